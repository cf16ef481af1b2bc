"""A report that goes on into its own detail states its cause there.

``DistBackendError: NCCL error ..., remote process exited`` (and its ``ncclRemoteError: ...``),
then a short header ("Last error:"), then ``socketProgress: Connection closed by remote peer``:
the detail is the most specific statement of the cause, and the records the process printed at
the same instant to announce that report ("Some NCCL operations have failed or timed out", "we
are taking the entire process down") only introduce it.
"""

from __future__ import annotations

import re

from signatures.candidate import Candidate
from signatures.episodes import STACK_START, carries_exception
from signatures.hits import Hit
from signatures.lines import time_key, unwrap
from signatures.reports import SAME_INSTANT_S
from signatures.tracebacks import exception_name

_CHAINED = re.compile(r"^\s*\.?[A-Za-z_][\w.]*: \S")  # "ncclInternalError: Internal check failed."
# A header that introduces the cause: "Last error:", "Caused by:", "Reason:", "Error details:".
_DETAIL_HEAD = re.compile(
    r"^\s*(?:(?:last|root|underlying|original|error|the) )?"
    r"(?:error|errors|reason|cause|caused by|details?)\s*:\s*$",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
REPORT_HEAD_REACH = 4  # records above a carrier that may announce its report


def move_to_stated_detail(cands: list[Candidate]) -> list[Candidate]:
    """The evidence of an error that goes on into its own detail moves to the detail.

    Its own signature names the detail when it has one (whatever its role: here it is this
    process's own cause), else the carrier's does. The records that announce the same report
    just above the carrier yield to the detail (``_yield_report_heads``).
    """
    at = {(c.hit.file_index, c.line): c for c in cands}
    gone: set[int] = set()
    moved: set[tuple[int, int]] = set()
    for c in cands:
        carrier = carries_exception(c) or (c.line == c.hit.line and _CHAINED.match(c.hit.facts.message))
        if c.death or id(c) in gone or not carrier:
            continue
        after = [unwrap(t).message for t in c.hit.after[:4]]
        k = 0
        while k < 2 and k < len(after) and _CHAINED.match(after[k]):
            k += 1  # the same report's chain: "ncclInternalError: Internal check failed."
        if k + 1 >= len(after) or not _DETAIL_HEAD.match(after[k]) or not _a_detail(after[k + 1]):
            continue
        if _DIGITS.sub("#", after[k + 1].strip()) in _DIGITS.sub("#", c.hit.facts.message):
            continue  # an empty detail, then the same error again (another process's, interleaved)
        where = (c.hit.file_index, c.line + k + 2)
        head = _yield_report_heads(c, at)
        inner = at.get(where)
        if (inner is not None and inner.signature is not None) or where in moved:
            if inner is not None:
                inner.tier = min(inner.tier, c.tier)
                inner.head = inner.head or head
            gone.add(id(c))
            continue
        if inner is not None:
            gone.add(id(inner))
        c.line, c.text = where[1], c.hit.after[k + 1]
        c.head = c.head or head
        moved.add(where)
    return [c for c in cands if id(c) not in gone]


def _yield_report_heads(carrier: Candidate, at: dict[tuple[int, int], Candidate]) -> Hit | None:
    """The unbroken run of one process's records just above a carrier, printed at one instant,
    announce its report: they yield to its detail (none of them is a death). Returns the record
    that opened the report when the carrier's own line names no process (whose report it is)."""
    heads: list[Candidate] = []
    instant: float | None = None
    rank = carrier.hit.rank  # an untagged continuation line is the record's above it
    for line in range(carrier.hit.line - 1, carrier.hit.line - 1 - REPORT_HEAD_REACH, -1):
        head = at.get((carrier.hit.file_index, line))
        if head is None or head.line != head.hit.line or head.death:
            break
        if rank is None and not heads:
            rank = head.hit.rank
        if head.hit.rank != rank:
            break
        key = time_key(head.hit.facts.time)
        if key is None:
            break
        if instant is not None and abs(key[1] - instant) > SAME_INSTANT_S:
            break
        instant = key[1]
        heads.append(head)
    if carrier.hit.facts.time is not None and heads:
        mine = time_key(carrier.hit.facts.time)
        if mine is None or instant is None or abs(mine[1] - instant) > SAME_INSTANT_S:
            return None
    for head in heads:
        if head.tier >= carrier.tier:
            head.yields = True
    return heads[-1].hit if heads and carrier.hit.rank is None else None


def _a_detail(message: str) -> bool:
    text = message.strip()
    return (
        bool(text)
        and exception_name(text) is None
        and STACK_START.match(text) is None
        and not _DETAIL_HEAD.match(text)
    )
