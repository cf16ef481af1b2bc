"""How a failure statement relates to the lines around it: one failure is often several lines.

A process states one failure in several lines: a logger's header and the traceback it
introduces, an exception name and its message on the next line, a message wrapped in two, the
kernel's assertion lines and the Python traceback they caused. These rules decide which of those
lines states the failure; ``ranking.py`` then orders what is left.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.candidate import Candidate
from signatures.lines import unwrap
from signatures.shapes import NCCL_UNWIND
from signatures.tracebacks import FRAME, HEADER

LEAD_GAP = 6  # lines a statement may sit above the traceback it leads into


def introduces(message: str) -> bool:
    """A message that ends with a colon introduces what follows ("...error (see its traceback):")."""
    return message.rstrip().rstrip("*").endswith(":")


def bare(message: str) -> bool:
    """A statement with no words of its own: an exception name or a level word and a colon."""
    return _BARE.match(message) is not None


_BARE = re.compile(r"^[ \t*]*[\w.]+:[ \t*]*$")


def move_introductions(cands: list[Candidate]) -> list[Candidate]:
    """A generic statement that only introduces the next lines gives way to them.

    - Ending in a colon and followed by a traceback, it is a logger's header ("ERROR: Exception
      occurred during run:"): the exception that ends the traceback states the failure.
    - Ending in a colon with a known line within 3 lines below, the known line states it.
    - Bare ("AssertionError: " then "The NVIDIA driver on your system is too old"), the failure
      is stated on the next line: the evidence moves there.
    """
    signed = {(c.hit.file_index, c.line) for c in cands if c.signature is not None}
    keep = []
    for c in cands:
        message = c.hit.facts.message
        if c.signature is not None or not introduces(message) or c.line != c.hit.line:
            keep.append(c)
            continue
        if any((c.hit.file_index, c.hit.line + k) in signed for k in (1, 2, 3)):
            continue
        following = next(((k, t) for k, t in enumerate(c.hit.after[:3], 1) if t.strip()), None)
        if following is not None and HEADER.match(unwrap(following[1]).message):
            continue
        if following is not None and bare(message):
            c.line, c.text = c.hit.line + following[0], following[1]
        keep.append(c)
    return keep


def drop_wrapped_halves(cands: list[Candidate]) -> list[Candidate]:
    """A message wrapped onto the next line is one statement; a signature on its second half names it."""
    signed = {(c.hit.file_index, c.line): c for c in cands if c.signature is not None}
    keep = []
    for c in cands:
        below = signed.get((c.hit.file_index, c.line + 1))
        if c.signature is None and below is not None and continues(c.text, below.text):
            continue
        keep.append(c)
    return keep


def continues(upper: str, lower: str) -> bool:
    """``lower`` carries on the message of ``upper``: indented, no head of its own, ``upper`` unfinished."""
    head = unwrap(lower)
    if head.rank is not None or head.time is not None or head.level is not None:
        return False
    return lower[:1] in (" ", "\t") and not upper.rstrip().endswith((".", "!"))


def leads_into_traceback(c: Candidate, generic_lines: set[tuple[int, int]]) -> int | None:
    """The line of the traceback header that ``c`` leads into, or None.

    Only blank lines, or more statements of the failure (the same assertion on other threads),
    may sit between: then the statement and the traceback are one episode of one failure.
    """
    for k, text in enumerate(c.hit.after[:LEAD_GAP], 1):
        message = unwrap(text).message
        if HEADER.match(message):
            return c.hit.line + k
        if message.strip() and (c.hit.file_index, c.hit.line + k) not in generic_lines:
            return None
    return None


def first_after(cands: Sequence[Candidate], file_index: int, line: int) -> Candidate | None:
    """The first candidate in ``file_index`` below ``line``: the exception a traceback ends in."""
    below = [c for c in cands if c.hit.file_index == file_index and c.line > line]
    return min(below, key=lambda c: c.line, default=None)


# Shapes that a process may print and then carry on from (log records); an exception, a C++
# abort, a status code, a failed assertion or a scheduler's verdict is never carried on from.
SURVIVABLE_SHAPES = ("logged-error", "tool-error", "nccl-warning", "os-error")
SURVIVED_AFTER = 5  # ordinary lines of the same process after an error that show it carried on
TRACEBACK_TITLE = "Traceback (most recent call last)"


def carried_on(c: Candidate, candidate_lines: set[tuple[int, int]]) -> bool:
    """The process printed ordinary output (no failure, no warning) after ``c``: it carried on."""
    ordinary = 0
    for k, text in enumerate(c.hit.after, 1):
        if not text.strip() or (c.hit.file_index, c.hit.line + k) in candidate_lines:
            continue
        facts = unwrap(text)
        if TRACEBACK_TITLE in facts.message or FRAME.match(facts.message):
            return False  # a traceback follows (plain or drawn by rich): the process is going down
        if facts.rank == c.hit.rank and not NCCL_UNWIND.search(facts.message):
            ordinary += 1
    return ordinary >= SURVIVED_AFTER
