"""A line printed just above a traceback that says what its exception says stated it first.

A library may print its error, then raise an exception with the same words: Theano prints "Error
allocating 147865600 bytes of device memory (out of memory). Driver report ... bytes free", then
its traceback ends in `MemoryError: Error allocating 147865600 bytes of device memory (out of
memory).`. The printed line came first and said it; the exception that ends the traceback
repeats it. The last line above the traceback's title counts when the exception's own words (not
its name) stand in it, or when the exception points there itself (PaddleDetection's `ValueError:
Dataset ... is not valid for reason above`, below its `WARNING: Config annotation ... is not a
file`); a line up to three lines higher counts when the exception's words stand in it (a
script's handler that prints the error, then a timing line or a report, then re-raises).
"""

from __future__ import annotations

import re

from signatures.candidate import TIER_BENIGN, Candidate
from signatures.lines import unwrap
from signatures.tracebacks import exception_name

SAID = 24  # characters of the exception's words the printed line must hold
_DIGITS = re.compile(r"\d+")
# An exception that says its reason was printed above it (not TensorFlow's "see above for
# traceback", which points at its own traceback).
_POINTS_ABOVE = re.compile(
    r"\b(?:reasons? above|(?:errors?|messages?|warnings?|logs?) above"
    r"|above (?:errors?|messages?|warnings?))\b",
    re.IGNORECASE,
)


def move_to_printed_first(cands: list[Candidate]) -> None:
    lines = {(c.hit.file_index, c.line) for c in cands if c.tier < TIER_BENIGN}  # stated already
    for c in cands:
        if c.tier >= TIER_BENIGN or c.line != c.hit.line:
            continue
        message = c.hit.facts.message.strip()
        name = exception_name(message)
        if name is None:
            continue
        words = message.split(": ", 1)[1] if ": " in message else ""
        pointed = _POINTS_ABOVE.search(words) is not None
        if len(words) < SAID and not pointed:
            continue
        up, opener = c.hit.view.opener_up, c.hit.view.opener
        if up is None or opener is None or (c.hit.file_index, c.line - up) in lines:
            continue
        printed = unwrap(opener).message
        said = pointed or _DIGITS.sub("#", words[:40].rstrip()) in _DIGITS.sub("#", printed)
        if said and exception_name(printed) is None:
            c.line, c.text = c.hit.line - up, opener
            continue
        said_words = _DIGITS.sub("#", words) if len(words) >= SAID else None
        for k, text in enumerate(c.hit.view.above_opener, up + 1):
            if said_words is None or said_words not in _DIGITS.sub("#", text):
                continue  # (the raw line holds its message: most lines are ruled out unread)
            printed = unwrap(text).message
            said = said_words in _DIGITS.sub("#", printed)
            if said and exception_name(printed) is None and (c.hit.file_index, c.line - k) not in lines:
                c.line, c.text = c.hit.line - k, text
                break
