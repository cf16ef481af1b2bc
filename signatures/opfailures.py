"""A TensorFlow op's failed status states the failure the process then raises with it.

When an op fails, TensorFlow logs its status as a warning (``W ... op_kernel.cc:1763]
OP_REQUIRES failed at whole_file_read_ops.cc:116 : Not found: COCO_train2014_000000299675.jpg;
No such file or directory``) and hands it up to Python, which raises it later, often many lines
below (``NotFoundError: 2 root error(s) found.``, ``(0) Not found: ...``). The warning is the first
statement of that failure. Most such warnings are no failure: an input pipeline ends each epoch
with ``Out of range: End of sequence``, a probe's op fails and is retried. So the warning states a
failure only when a later line of the same file that states one carries its status and message
again (numbers and spacing aside); without it, it is benign.
"""

from __future__ import annotations

import re

from signatures.candidate import TIER_BENIGN, Candidate
from signatures.lines import numbers_aside

_STATUS = re.compile(r"\bOP_REQUIRES failed at \S+ : (?P<status>.+)$")
_SPACE = re.compile(r"\s+")
SHAPE = "op-failed"


def read_op_failures(cands: list[Candidate]) -> None:
    """An op's failed status takes the strength of the later failure that carries it, or none."""
    failing = [c for c in cands if c.tier < TIER_BENIGN and SHAPE not in c.shapes]
    for c in cands:
        m = _STATUS.search(c.hit.facts.message)
        if c.signature is not None or SHAPE not in c.shapes or m is None:
            continue
        status = _plain(m.group("status"))
        later = [x for x in failing if x.hit.file_index == c.hit.file_index and x.line > c.line]
        raised = next((x for x in later if status in _plain(x.hit.facts.message)), None)
        if raised is not None:
            c.tier = min(c.tier, raised.tier)
        elif c.shapes == {SHAPE}:
            c.tier = TIER_BENIGN  # no failure carries it on: an op failure handled or expected


def _plain(text: str) -> str:
    return _SPACE.sub(" ", numbers_aside(text)).strip()
