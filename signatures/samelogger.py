"""The rank of an untagged record, from the next record of the same logger at the same moment.

A library that prefixes its own records with the rank only sometimes (Horovod's `[1]: Shutting
down background thread` after an untagged `Horovod background loop uncaught exception: ...`)
names the process on the record its failure leads to at once. The untagged record is taken to be
that rank's when the next line is a record of the same logger (the same source file in its head),
stamped within a second of it, naming its speaker's rank, and no line around the two names
another rank. It is an inference, and the answer says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.lines import time_key, unwrap

# The logger's source file in a glog-style head: "E horovod/common/operations.cc:516] ".
_SOURCE = re.compile(r"(?:^|\s)[IWEFDT] ?(?:\d{4} [\d:.]+ +\d+ )?(?P<file>[\w./-]+\.\w+):\d+\] ")
WITHIN = 1.0  # seconds between the two records
AROUND = 3  # lines above and below that must name no other rank


def next_record_rank(text: str, before: Sequence[str], after: Sequence[str]) -> int | None:
    """The rank the next record of the same logger names, when it can only be this record's."""
    mine, following = _SOURCE.search(text), next((a for a in after if a.strip()), None)
    if mine is None or following is None:
        return None
    theirs = _SOURCE.search(following)
    if theirs is None or theirs.group("file") != mine.group("file"):
        return None
    facts, next_facts = unwrap(text), unwrap(following)
    t0, t1 = time_key(facts.time), time_key(next_facts.time)
    if facts.rank is not None or t0 is None or t1 is None or t0[0] != t1[0]:
        return None
    if not 0 <= t1[1] - t0[1] <= WITHIN:
        return None
    rank = next_facts.rank
    named = {r for line in (*before[-AROUND:], *after[:AROUND]) if (r := unwrap(line).rank) is not None}
    return rank if rank is not None and named == {rank} else None
