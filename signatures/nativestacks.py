"""A native stack trace belongs to the message printed just above it.

dmlc's fatal log (MXNet, XGBoost, TVM) prints its message, then the stack it was raised from:
``Stack trace returned 10 entries:`` (or ``Stack trace:``) and ``[bt] (0) ...`` frames. The message
may be in any words (``[17:36:58] src/storage/pooled_storage_manager.h:111: cudaMalloc failed: out
of memory``, an uncaught exception's ``what():`` glued onto other output); the stack after it is
what says it was fatal. The header's candidate moves up to that message; when a candidate already
holds the message's line, the header adds nothing and is dropped. Lines are read inside their
launcher prefixes (``[rank3]: [bt] (0) ...``): a tagged process prints its stack tagged too.
"""

from __future__ import annotations

import re

from signatures.candidate import TIER_BENIGN, Candidate
from signatures.lines import unwrap

_HEADER = re.compile(r"^\s*Stack trace(?: returned \d+ entries)?:\s*$")
_FRAME = re.compile(r"^\s*\[bt\] \(\d+\) ")
OWNER_REACH = 3  # lines above the header where its message may stand (blank lines between)


def move_to_stack_owners(cands: list[Candidate]) -> list[Candidate]:
    lines = {(c.hit.file_index, c.line) for c in cands}
    gone: set[int] = set()
    for c in cands:
        if "native-stack" not in c.shapes or c.signature is not None or c.line != c.hit.line:
            continue
        if not _HEADER.match(_message(c.hit.text)):
            continue
        below = next((m for t in c.hit.after if (m := _message(t)).strip()), "")
        above = next(
            ((k, t) for k, t in enumerate(reversed(c.hit.before[-OWNER_REACH:]), 1) if _message(t).strip()),
            None,
        )
        if not _FRAME.match(below) or above is None:
            c.tier = TIER_BENIGN  # no frames below: words, not a stack
            continue
        k, text = above
        if (c.hit.file_index, c.line - k) in lines:
            gone.add(id(c))  # the message is a candidate already: the stack only follows it
            continue
        c.line, c.text = c.hit.line - k, text
    return [c for c in cands if id(c) not in gone]


def _message(line: str) -> str:
    return unwrap(line).message
