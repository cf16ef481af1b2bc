"""A report that lists, rank by rank, the collectives each rank is waiting in.

Horovod's stall inspector says tensors were submitted by a subset of ranks, then lists each
rank with the collectives it has not yet joined (``Stalled ranks:`` / ``Missing ranks:``, then
``3: [horovod_allreduce.noname.691943]``). When one rank is missing from a collective the others
entered, the list names one collective: a rank never arrived (the missing-rank class). When the
ranks' entries name *different* collectives, each rank entered one the others did not: the ranks
diverged in the order of their collectives, which is a mismatch, as the flight recorder's
comparison names it. The list is read as printed under the report, from the same process.
"""

from __future__ import annotations

import re

from signatures.candidate import Candidate
from signatures.library import Library
from signatures.lines import unwrap

MISSING = "nccl-collective-rank-missing"
MISMATCH = "collective-mismatch-desync"

_ENTRY = re.compile(r"^\s*(?P<rank>\d{1,6}): \[(?P<names>[^\]\n]+)\]\s*$")


def pending_by_rank(c: Candidate) -> dict[int, frozenset[str]]:
    """The ``rank: [collectives]`` entries of the list ``c``'s report introduces below it."""
    entries: dict[int, frozenset[str]] = {}
    head: str | None = None  # the launcher's tag of the process that printed the list
    for text in c.hit.after:
        text = text.rstrip("\r\n")
        if head is None:
            facts = unwrap(text)
            if facts.rank != c.hit.rank or not facts.message.strip():
                continue  # another process's line, interleaved, or a blank one
            if not facts.message.rstrip().endswith(":"):
                return {}  # the next line of the report introduces no list
            head = text[: len(text) - len(facts.message.lstrip())]
            continue
        # an entry is read after the same tag: a bare "3: " would pass for srun's label
        m = _ENTRY.match(text[len(head) :]) if text.startswith(head) else None
        if m is None:
            break
        entries[int(m.group("rank"))] = frozenset(n.strip() for n in m.group("names").split(","))
    return entries


def name_diverged_lists(cands: list[Candidate], library: Library) -> None:
    """A missing-rank report whose list shows ranks waiting in different collectives is a mismatch."""
    mismatch = library.by_id.get(MISMATCH)
    if mismatch is None:
        return
    for c in cands:
        if c.signature is None or c.signature.id != MISSING:
            continue
        pending = pending_by_rank(c)
        if len(pending) >= 2 and len(set(pending.values())) >= 2:
            c.signature = mismatch
