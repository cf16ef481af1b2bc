"""A non-finite metric the run came back from states no degradation.

A loss or gradient norm printed as ``nan`` or ``inf`` is a degradation when it stays so. When the
same process prints the same metric finite again later, the run recovered: a mixed-precision
scaler skipping its first overflowed steps (``grad_norm: nan`` then ``grad_norm: 3.97``), or a
running average that one bad batch spoiled until the next epoch reset it (``training loss nan``
then ``training loss 0.955``). A diverged run never prints a finite value of the metric again.
"""

from __future__ import annotations

import re

from signatures.candidate import TIER_BENIGN, TIER_DEGRADED, Candidate
from signatures.lines import unwrap
from signatures.progress import Progress

# The metric printed non-finite: "training loss nan", "'grad_norm': nan", "loss=inf", "loss: tensor(nan".
_NON_FINITE = re.compile(
    r"(?P<name>[A-Za-z_][\w.-]*)[\"']?[ \t]*[:=]?[ \t]*(?:tensor\()?[-+]?(?:nan|NaN|NAN|inf|Inf|INF)\b"
)


def _finite(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-]){re.escape(name)}[\"']?[ \t]*[:=]?[ \t]*(?:tensor\()?[-+]?\.?\d")


def recovered_metric(c: Candidate, progress: Progress | None) -> bool:
    """Every metric ``c`` prints non-finite is printed finite again later by the same process."""
    names = {m.group("name") for m in _NON_FINITE.finditer(c.hit.facts.message)}
    if not names:
        return False
    later = [unwrap(t) for t in c.hit.after]
    own = [f.message for f in later if f.rank == c.hit.rank]
    if progress is not None:
        _, after = progress.around(c.hit.file_index, c.line, c.hit.rank)
        own += [unwrap(p.text).message for p in after]
    return all(any(_finite(name).search(text) for text in own) for name in names)


def demote_recovered_metrics(cands: list[Candidate], progress: Progress | None) -> None:
    """A degradation no signature knows whose metric came back finite was survived."""
    for c in cands:
        unknown = c.signature is None and c.tier == TIER_DEGRADED
        if unknown and "non-finite-metric" in c.shapes and recovered_metric(c, progress):
            c.tier = TIER_BENIGN
