"""A line printed just above a traceback that says what its exception says stated it first.

A library may print its error, then raise an exception with the same words: Theano prints "Error
allocating 147865600 bytes of device memory (out of memory). Driver report ... bytes free", then
its traceback ends in `MemoryError: Error allocating 147865600 bytes of device memory (out of
memory).`. The printed line came first and said it; the exception that ends the traceback
repeats it. Only the last line above the traceback's title counts, and only when the exception's
own words (not its name) stand in it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.candidate import TIER_BENIGN, Candidate
from signatures.lines import unwrap
from signatures.tracebacks import TRACEBACK_TITLE, exception_name

SAID = 24  # characters of the exception's words the printed line must hold
_DIGITS = re.compile(r"\d+")


def move_to_printed_first(cands: list[Candidate]) -> None:
    lines = {(c.hit.file_index, c.line) for c in cands}
    for c in cands:
        if c.tier >= TIER_BENIGN or c.line != c.hit.line:
            continue
        message = c.hit.facts.message.strip()
        name = exception_name(message)
        if name is None:
            continue
        words = message.split(": ", 1)[1] if ": " in message else ""
        if len(words) < SAID:
            continue
        above = _above_title(c.hit.before)
        if above is None or (c.hit.file_index, c.line - above[0]) in lines:
            continue
        printed = unwrap(above[1]).message
        if (
            _DIGITS.sub("#", words[:40].rstrip()) in _DIGITS.sub("#", printed)
            and exception_name(printed) is None
        ):
            c.line, c.text = c.hit.line - above[0], above[1]


def _above_title(before: Sequence[str]) -> tuple[int, str] | None:
    # (lines up from the exception, text) of the last line with text above the traceback's title
    for up, text in enumerate(reversed(before), 1):
        if TRACEBACK_TITLE in text:
            rest = before[: len(before) - up]
            for more, line in enumerate(reversed(rest), 1):
                if line.strip():
                    return up + more, line
            return None
    return None
