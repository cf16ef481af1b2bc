"""Which line of a several-line report states the failure, where the report's shape says it.

- A signal report framed by banner lines (Open MPI's handler: `[host:pid] *** Process received
  signal ***`, then `[host:pid] Signal: Segmentation fault (11)`, `Signal code: ...`, `Failing at
  address: ...`, the backtrace, `*** End of error message ***`) is stated by its field that names
  the signal: the banner only announces the report, and the other fields and frames detail it.
- A traceback logged one record per line (vLLM's workers log each line at ERROR level) is stated
  by its exception line: a record whose message is a frame, or the source line or carets under
  a frame, is part of that traceback and states nothing by itself.

``ranking.py`` applies these rules before ordering; each has a test in tests/test_reports.py.
"""

from __future__ import annotations

import re

from signatures.candidate import TIER_BENIGN, Candidate
from signatures.library import Kind
from signatures.lines import unwrap
from signatures.tracebacks import FRAME

REPORT_REACH = 4  # lines below a banner where the report's first fields are
_BANNER = re.compile(r"^(?P<prefix>.*?)\*{3} [^*\n]{3,60} \*{3}\s*$")
_FIELD = re.compile(r"^[A-Z][A-Za-z]+(?: [a-z]+){0,2}: +\S")  # "Signal: Bus error (7)"


def yield_report_banners(cands: list[Candidate]) -> None:
    """A banner (`*** ... ***`) whose report goes on in field lines of the same prefix just below
    it yields to the first of those fields that is a failure line: that field names what happened."""
    at = {(c.hit.file_index, c.hit.line): c for c in cands}
    for c in cands:
        m = _BANNER.match(c.hit.text.rstrip("\r\n"))
        if m is None or c.line != c.hit.line:
            continue
        prefix = m.group("prefix")
        for k, text in enumerate(c.hit.after[:REPORT_REACH], 1):
            if not text.startswith(prefix) or _BANNER.match(text):
                break  # another process's line, or the report's end
            field = at.get((c.hit.file_index, c.hit.line + k))
            if field is not None and _FIELD.match(text[len(prefix) :]):
                c.yields = True  # it says no more than its field, and so is no stronger
                c.tier = max(c.tier, field.tier)
                break


_CODE_UNDER_FRAME = re.compile(r"^\s{2,}\S")  # the source line Python prints under a frame, and its carets


def quiet_traceback_records(cands: list[Candidate]) -> None:
    """A record that holds one line of a traceback (a frame, or the code and carets under one, or
    above the exception line) states no failure: the traceback's exception line, logged the same
    way below it, does."""
    raised = {(c.hit.file_index, c.hit.line) for c in cands if c.hit.matcher.kind is Kind.EXCEPTION}
    for c in cands:
        shape = c.hit.matcher.shape
        if c.signature is not None or shape is None or shape.name != "logged-error":
            continue
        message = c.hit.facts.message
        if FRAME.match(message) or (
            _CODE_UNDER_FRAME.match(message)
            and (_under_frame(c) or any((c.hit.file_index, c.hit.line + k) in raised for k in (1, 2, 3)))
        ):
            c.tier = TIER_BENIGN


def _under_frame(c: Candidate) -> bool:
    # up to two lines of code and carets sit between a frame and the line in question
    for text in reversed(c.hit.before[-3:]):
        message = unwrap(text).message
        if FRAME.match(message):
            return True
        if not _CODE_UNDER_FRAME.match(message):
            return False
    return False
