"""A non-finite metric the run came back from states no degradation.

A loss or gradient norm printed as ``nan`` or ``inf`` is a degradation when it stays so. When the
same process prints the same metric finite again later, the run recovered: a mixed-precision
scaler skipping its first overflowed steps (``grad_norm: nan`` then ``grad_norm: 3.97``), or a
running average that one bad batch spoiled until the next epoch reset it (``training loss nan``
then ``training loss 0.955``). A diverged run never prints a finite value of the metric again.
Only the same kind of line counts (one that opens with the same word): a training bar's finite
loss is no recovery of a validation pass's ``nan``.

A metric that stays non-finite may have exploded first: ``Loss: 2.42`` then ``Loss: 1.36e+15``
then ``Loss: inf``. The run went wrong at the explosion; the ``inf`` is where the float overflowed.
A report of one metric per line (``KL: nan``, ``PolicyEntropy: nan``, ``PolicyLoss: nan``) went
non-finite at its first such line, whichever metric a signature knows by name.
"""

from __future__ import annotations

import re
from statistics import median

from signatures.candidate import TIER_BENIGN, TIER_DEGRADED, Candidate
from signatures.lines import unwrap
from signatures.progress import Progress

# The metric printed non-finite: "training loss nan", "'grad_norm': nan", "loss=inf", "loss: tensor(nan",
# "[Loss] nan".
_NON_FINITE = re.compile(
    r"(?P<name>[A-Za-z_][\w.-]*)\]?[\"']?[ \t]*[:=]?[ \t]*(?:tensor\()?[-+]?(?:nan|NaN|NAN|inf|Inf|INF)\b"
)


def _finite(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-]){re.escape(name)}\]?[\"']?[ \t]*[:=]?[ \t]*(?:tensor\()?[-+]?\.?\d")


def _names(c: Candidate) -> frozenset[str]:
    return _names_in(c.hit.facts.message)


def _names_in(message: str) -> frozenset[str]:
    """The metrics ``message`` prints non-finite."""
    low = message.lower()
    if "nan" not in low and "inf" not in low:
        return frozenset()  # (most lines: the search below is slow on long ones)
    return frozenset(m.group("name") for m in _NON_FINITE.finditer(message))


def recovered_metric(c: Candidate, progress: Progress | None) -> bool:
    """Every metric ``c`` prints non-finite is printed finite again later by the same process."""
    names = _names(c)
    if not names:
        return False
    later = [unwrap(t) for t in c.hit.after]
    own = [f.message for f in later if f.rank == c.hit.rank]
    if progress is not None:
        # the same rank's progress below it (without a rank: the untagged stream's, whoever else
        # prints tagged progress around it)
        every = progress.lines.get(c.hit.file_index, [])
        own += [unwrap(p.text).message for p in every if p.line > c.line and p.rank == c.hit.rank]
    # the same kind of line: a validation pass's "Loss: nan" does not come back in a training
    # bar's "Loss: 0.36"
    kind = _opening_words(c.hit.facts.message)[:1]
    own = [text for text in own if not kind or kind[0] in _opening_words(text)]
    return all(any(_finite(name).search(text) for text in own) for name in names)


_WORD = re.compile(r"[A-Za-z_]+")
OPENING_WORDS = 4  # a logger's head left in the message ("- mmocr - INFO - Epoch [1]") comes first


def _opening_words(message: str) -> list[str]:
    """The words a line opens with: which report prints the metric ("Valid", "Train", "step")."""
    return [w.lower() for w in _WORD.findall(message[:80])[:OPENING_WORDS]]


def read_non_finite_metrics(cands: list[Candidate], progress: Progress | None) -> None:
    demote_recovered_metrics(cands, progress)
    move_to_explosions(cands)
    move_to_first_of_block(cands)


def demote_recovered_metrics(cands: list[Candidate], progress: Progress | None) -> None:
    """A degradation no signature knows whose metric came back finite was survived.

    Latest first: a line whose metrics a later line of the same process printed non-finite too,
    and that one recovered, recovered as well (a long run of ``nan`` lines, in a log too large to
    keep every progress line, shows the finite value only near its last line)."""
    for c in cands:
        if c.signature is None and "non-finite-row" in c.shapes and _row_came_back(c):
            c.tier = TIER_BENIGN
    came_back: set[tuple[int, int | None, frozenset[str]]] = set()
    metric = [c for c in cands if c.signature is None and "non-finite-metric" in c.shapes]
    for c in sorted(metric, key=lambda c: (c.hit.file_index, -c.line)):
        key = (c.hit.file_index, c.hit.rank, _names(c))
        if key in came_back or recovered_metric(c, progress):
            came_back.add(key)
            if c.tier == TIER_DEGRADED:
                c.tier = TIER_BENIGN


_ROW = re.compile(r"^\s*\d+/\d+\s")
_NON_FINITE_VALUE = re.compile(r"(?:^|\s)[-+]?(?:nan|inf)(?:\s|$)")


def _row_came_back(c: Candidate) -> bool:
    # A later row of the same table, of the same process, with every value finite.
    return any(
        f.rank == c.hit.rank and _ROW.match(f.message) and not _NON_FINITE_VALUE.search(f.message)
        for f in (unwrap(t) for t in c.hit.after)
    )


EXPLOSION = 1000.0  # a value this many times the metric's median so far has exploded, not drifted
BASELINE_ROWS = 2  # finite values before it that give the metric's usual size (a hit keeps 12 lines above)


def _value(name: str) -> re.Pattern[str]:
    number = r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    return re.compile(rf"(?<![\w.-]){re.escape(name)}\]?[\"']?[ \t]*[:=]?[ \t]*(?:tensor\()?{number}")


def move_to_explosions(cands: list[Candidate]) -> None:
    """A metric gone non-finite after it exploded went wrong at the explosion's first line."""
    for c in cands:
        if c.tier >= TIER_BENIGN or c.line != c.hit.line:
            continue
        kind = _opening_words(c.hit.facts.message)[:1]
        for name in sorted(_names(c)):
            rows = _finite_rows(c, name, kind)
            start = _explosion_start([v for _, v in rows])
            if start is not None:
                back = rows[start][0]
                c.line, c.text = c.hit.line - back, c.hit.before[-back]
                break


def _finite_rows(c: Candidate, name: str, kind: list[str]) -> list[tuple[int, float]]:
    """(lines back, value) of the same process's same kind of line printing ``name`` finite, oldest first."""
    value = _value(name)
    rows: list[tuple[int, float]] = []
    for back, text in enumerate(reversed(c.hit.before), 1):
        facts = unwrap(text)
        if facts.rank != c.hit.rank or (kind and kind[0] not in _opening_words(facts.message)):
            continue
        if name in _names_in(facts.message):
            break  # an earlier non-finite row: this one is not where it went wrong
        if m := value.search(facts.message):
            rows.append((back, float(m.group("value"))))
    return rows[::-1]


def _explosion_start(values: list[float]) -> int | None:
    """The first of the trailing values that are all EXPLOSION times the median of those before them."""
    start = None
    for s in range(len(values) - 1, BASELINE_ROWS - 1, -1):
        usual = median(abs(v) for v in values[:s])
        if usual == 0 or abs(values[s]) < EXPLOSION * usual:
            break
        start = s
    return start


# A line of a report of one metric per line: "KL: nan", "ExplainedVarOld: 0.812", "Steps: 672".
_METRIC_LINE = re.compile(r"^\s*[A-Za-z_][\w ./()-]{0,40}\s*[:=]\s*\S+\s*$")


def move_to_first_of_block(cands: list[Candidate]) -> None:
    """A non-finite metric in a report of one metric per line moves up to the report's first
    non-finite line: the lines above it, up to a blank line or one of another form, of the same
    process (a header such as "***** Episode 31455 *****" ends the report)."""
    for c in cands:
        if c.tier >= TIER_BENIGN or c.line != c.hit.line or not _names(c):
            continue
        if not _METRIC_LINE.match(c.hit.facts.message):
            continue
        first = 0
        for back, text in enumerate(reversed(c.hit.before), 1):
            facts = unwrap(text)
            if facts.rank != c.hit.rank or not _METRIC_LINE.match(facts.message):
                break
            if _NON_FINITE.search(facts.message):
                first = back
        if first:
            c.line, c.text = c.hit.line - first, c.hit.before[-first]
