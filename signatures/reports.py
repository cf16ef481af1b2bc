"""Which line of a several-line report states the failure, where the report's shape says it.

- A signal report framed by banner lines (Open MPI's handler: `[host:pid] *** Process received
  signal ***`, then `[host:pid] Signal: Segmentation fault (11)`, `Signal code: ...`, `Failing at
  address: ...`, the backtrace, `*** End of error message ***`) is stated by its field that names
  the signal: the banner only announces the report, and the other fields and frames detail it.
- An exception that carries another, named in parentheses (Ray's `RayTaskError(RuntimeError): ...`
  on the caller), is stated by the carried exception's own line when the log prints it below
  (with the traceback it was raised in); alone, the carrier states it.
- An exception, or an error record no signature knows (`[ERROR] <time> (PID:N, ...) ERR00100 PTA
  call acl api failed.`), followed by its framework's coded error records (Ascend CANN's `EJ0001:
  <time> Failed to initialize ...`, `EE9999: Inner Error!` then `EE9999: [PID: N] <time> get error:
  ...`) is stated by the first coded record that says something (not the bare "Inner Error!"
  head): the same convention as a cause on a detail line under a wrapper.
- A traceback logged one record per line (vLLM's workers log each line at ERROR level) is stated
  by its exception line: a record whose message is a frame, or the source line or carets under
  a frame, is part of that traceback and states nothing by itself.

- A record no signature knows, printed in the same instant and from the same source file as a
  known line (glog's `[E626 16:48:25.440243 ProcessGroupNCCL.cpp:670]`: the watchdog's hint that
  the FlightRecorder is off, among the watchdog's own lines), is part of that report: it is no
  stronger than the report's known line.

- An abort (SIGABRT: `Aborted (6)`, an exit code -6) is a process ending itself: an error printed
  just before it (`terminate called ...`, `what(): ...`, an assertion) says why, so a report of
  the abort (a launcher's, a signal box's) is no stronger than that error, and gives way to it.

- An exception being handled when another was raised gives way to it (ranking.py), unless the
  later one quotes its message: then the handler only re-raised the same failure in other words
  (JAX's `RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU
  devices.` over the plugin's `XlaRuntimeError: FAILED_PRECONDITION: No visible GPU devices.`), and
  the first states it.

``ranking.py`` applies these rules before ordering; each has a test in tests/test_reports.py.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from signatures.candidate import TIER_BENIGN, TIER_INITIATING, TIER_UNKNOWN, TIER_WRAPPER, Candidate
from signatures.failtable import is_field
from signatures.library import Kind
from signatures.lines import time_key, unwrap
from signatures.ncclwarn import NCCL_UNWIND, UNWOUND_REACH, nccl_process, unwound_warning
from signatures.tracebacks import FRAME, exception_name

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


CODE_REACH = 4  # lines below an exception where its coded error records start
# An error code's record: Ascend's "EJ0001: 2024-05-21-11:57:54 Failed ...", "EH9999: Inner Error!"
CODED = re.compile(r"^[A-Z]{2}[0-9]{4}: +(?P<body>\S.*)$")


def move_to_coded_detail(cands: list[Candidate]) -> None:
    """An exception line (or an error no signature knows: a record, `[Error]: ...`) whose coded
    error records follow it is stated by the first of them that says more than a heading
    ("EE9999: Inner Error!")."""
    for c in cands:
        if c.line != c.hit.line:
            continue
        record = c.signature is None and c.tier == TIER_UNKNOWN  # an error no signature knows
        if exception_name(c.hit.facts.message) is None and not record:
            continue
        for k, text in enumerate(c.hit.after[:CODE_REACH], 1):
            m = CODED.match(unwrap(text).message)
            if m is not None and len(m.group("body").split()) > 3:
                c.line, c.text = c.hit.line + k, text
                break


CARRIED_REACH = 80  # lines below a carrier where the carried exception's own traceback ends
_CARRIER = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\((?:[A-Za-z_]\w*\.)*(?P<inner>[A-Za-z_]\w*)\):")


def yield_carriers(cands: list[Candidate]) -> None:
    """A carrier (`RayTaskError(RuntimeError): ...`) yields to the carried exception's own line
    below it (`RuntimeError: ...`), which says what failed in the words it was raised with."""
    for c in cands:
        m = _CARRIER.match(c.hit.facts.message)
        if m is None:
            continue
        carried = [
            x
            for x in cands
            if x.hit.file_index == c.hit.file_index
            and 0 < x.hit.line - c.hit.line <= CARRIED_REACH
            and x.tier < TIER_BENIGN
            and exception_name(x.hit.facts.message) == m.group("inner")
        ]
        if carried:
            c.yields = True
            c.tier = max(c.tier, min(x.tier for x in carried))


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


SAME_INSTANT_S = 0.01  # records of one report printed by one call, to the hundredth of a second
_SOURCE = re.compile(r"\b(?P<file>[\w-]+\.(?:cpp|cc|cu|c|h|py)):[0-9]+\]")  # a glog-style head's file


def join_same_instant_reports(cands: list[Candidate]) -> None:
    """An unknown record of the same instant and source file as a known line joins its report."""
    known = [(*_origin(c), c) for c in cands if c.signature is not None and c.tier < TIER_BENIGN]
    for c in cands:
        if c.signature is not None or c.tier >= TIER_BENIGN:
            continue
        source, t = _origin(c)
        if source is None or t is None:
            continue
        peers = [
            k.tier
            for f, kt, k in known
            if f == source
            and kt is not None
            and k.hit.file_index == c.hit.file_index
            and abs(kt - t) <= SAME_INSTANT_S
        ]
        if peers and min(peers) > c.tier:
            c.tier = min(peers)
            c.yields = True


def _origin(c: Candidate) -> tuple[str | None, float | None]:
    m = _SOURCE.search(c.hit.text[:200])
    key = time_key(c.hit.facts.time)
    return (m.group("file") if m else None), (key[1] if key else None)


ABORT_REACH = 120  # lines above an abort's report where the process's own last error may be
_ABORT = re.compile(
    r"\bSIGABRT\b|\bAborted \(6\)|signal 6\b|exit ?code(?: *:| =)? *-6\b|return code = -6\b", re.IGNORECASE
)


def abort_follows_its_error(cands: list[Candidate]) -> None:
    """A report of an abort, below an error that explains it, is no stronger than that error."""
    for c in cands:
        if _ABORT.search(c.text):
            _give_way(c, cands, _explains_abort)


def _explains_abort(x: Candidate) -> bool:
    return (
        x.tier < TIER_WRAPPER  # a wrapper's re-report explains nothing
        and not x.yields  # nor another line of a report (a failure table's other fields)
        and not _ABORT.search(x.text)
        and not x.death
    )


def exit_follows_its_crash(cands: list[Candidate]) -> None:
    """A launcher's report of a process's exit code, below that process's own report of the crash
    (its crash handler's `Fatal Python error: Segmentation fault`, `*** SIGSEGV ... received by
    PID`), is no stronger than that report: the process said it first."""
    for c in cands:
        if c.death and "exit-code" in c.shapes and "signal-death" not in c.shapes:
            _give_way(c, cands, functools.partial(_reports_crash_of, exit_report=c))


def _reports_crash_of(x: Candidate, exit_report: Candidate) -> bool:
    rank = exit_report.hit.rank
    return (
        x.death
        and "signal-death" in x.shapes
        and not is_field(x.hit.text)  # a failure table's `traceback : Signal 7 ...` is the launcher's
        and (x.hit.rank is None or rank is None or x.hit.rank == rank)
    )


def _give_way(c: Candidate, cands: list[Candidate], explains: Callable[[Candidate], bool]) -> None:
    # a report is no stronger than the lines up to ABORT_REACH above it that explain it
    tiers = [
        x.tier
        for x in cands
        if x.hit.file_index == c.hit.file_index and 0 < c.line - x.line <= ABORT_REACH and explains(x)
    ]
    if tiers:
        c.tier, c.yields = max(c.tier, min(tiers)), True


RERAISE_REACH = 200  # lines below a handled exception where the one raised while handling it ends
_HANDLING = "During handling of the above exception"


def restore_quoted_causes(cands: list[Candidate]) -> None:
    """A handled exception whose message the exception raised while handling it quotes states the
    failure: the handler re-raised it in other words."""
    for c in cands:
        if c.hit.matcher.kind is not Kind.EXCEPTION or c.tier != TIER_UNKNOWN or not c.hit.view.in_traceback:
            continue
        following = next((t for t in c.hit.after[:2] if t.strip()), "")
        if not unwrap(following).message.startswith(_HANDLING):
            continue
        said = c.hit.facts.message.split(": ", 1)[-1].strip()
        if len(said.split()) < 3:
            continue  # too few words to tell a quotation from a coincidence
        later = [
            x
            for x in cands
            if x.hit.file_index == c.hit.file_index
            and 0 < x.line - c.line <= RERAISE_REACH
            and x.tier == TIER_INITIATING
            and exception_name(x.hit.facts.message) is not None
        ]
        raised = min(later, key=lambda x: x.line, default=None)
        if raised is not None and said in raised.hit.facts.message:
            c.tier = TIER_INITIATING


def move_to_unwound_warnings(cands: list[Candidate]) -> list[Candidate]:
    """A known report of an NCCL return code (nccl-tests' `Test NCCL failure common.cu:961
    'internal error ...'`) just below the NCCL WARN whose code unwinds down to it (`file.cc:N -> 3`
    lines of that process between) is stated by the WARN: it said first what failed. The report's
    signature names it; the WARN's own unknown candidate goes."""
    at = {(c.hit.file_index, c.line): c for c in cands}
    gone: set[int] = set()
    for c in cands:
        if c.signature is None or c.line != c.hit.line or "NCCL WARN " in c.hit.text:
            continue
        k = unwound_warning(c.hit.before)
        if k is None:
            k = _warning_behind_traceback(c, cands)
        if k is None:
            continue
        warn = c.hit.before[-k] if k <= len(c.hit.before) else at[(c.hit.file_index, c.line - k)].hit.text
        if unwrap(warn).rank != c.hit.rank:
            continue  # another process's report
        inner = at.get((c.hit.file_index, c.line - k))
        if inner is not None and inner.signature is not None:
            continue  # the WARN is known: it is earlier and stands on its own
        if inner is not None:
            gone.add(id(inner))
        c.line, c.text = c.line - k, warn
    return [c for c in cands if id(c) not in gone]


def _warning_behind_traceback(c: Candidate, cands: list[Candidate]) -> int | None:
    # The report is a traceback's exception whose title follows the unwinding at once (TensorFlow's
    # `UnknownError: ncclCommInitRank failed: unhandled system error` below `init.cu:557 -> 2`):
    # the WARN of that process the unwinding started from is the one nearest above, as many lines
    # up as it is (a hit keeps too few lines to walk).
    opener = c.hit.view.opener
    process = nccl_process(opener) if opener is not None and NCCL_UNWIND.search(opener) else None
    if process is None:
        return None
    warns = [
        x.line
        for x in cands
        if x.hit.file_index == c.hit.file_index
        and 0 < c.line - x.line <= UNWOUND_REACH
        and x.line == x.hit.line
        and "NCCL WARN " in x.hit.text
        and nccl_process(x.hit.text) == process
    ]
    return c.line - max(warns) if warns else None


_ROOT_COUNT = re.compile(r"^\d+ root error\(s\) found\.\s*$")
_FIRST_ROOT = re.compile(r"^\s*\(0\) [A-Z][\w ]{0,40}: \S")


def move_to_first_root_error(cands: list[Candidate]) -> list[Candidate]:
    """A line that goes on into TensorFlow's count of root errors ("Error recorded from
    training_loop: From /job:worker/replica:0/task:0:", then "3 root error(s) found.", then "(0)
    Failed precondition: The TPU system has not been initialized.") is stated by the first root
    error: the detail convention. A known signature on that line names it; else the carrier's."""
    at = {(c.hit.file_index, c.line): c for c in cands}
    gone: set[int] = set()
    for c in cands:
        if c.line != c.hit.line or id(c) in gone:
            continue
        after = [unwrap(t).message for t in c.hit.after[:3]]
        if len(after) < 2 or not _ROOT_COUNT.match(after[0].strip()) or not _FIRST_ROOT.match(after[1]):
            continue
        inner = at.get((c.hit.file_index, c.line + 2))
        if inner is not None and inner.signature is not None:
            inner.tier = min(inner.tier, c.tier)
            gone.add(id(c))
            continue
        if inner is not None:
            gone.add(id(inner))
        c.line, c.text = c.line + 2, c.hit.after[1]
    return [c for c in cands if id(c) not in gone]
