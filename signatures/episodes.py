"""How a failure statement relates to the lines around it: one failure is often several lines.

A process states one failure in several lines: a logger's header and the traceback it
introduces, an exception name and its message on the next line, a message wrapped in two, the
kernel's assertion lines and the Python traceback they caused. These rules decide which of those
lines states the failure; ``ranking.py`` then orders what is left.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

from signatures.candidate import Candidate
from signatures.hits import Hit
from signatures.levels import FAILING
from signatures.levels import learn as learn_levels
from signatures.library import Kind
from signatures.lines import unwrap
from signatures.ncclwarn import NCCL_UNWIND
from signatures.tracebacks import CHAIN_NOTE, FRAME, HEADER, TRACEBACK_TITLE, exception_name

LEAD_GAP = 6  # lines a statement may sit above the traceback it leads into


def introduces(message: str) -> bool:
    """A message that ends with a colon introduces what follows ("...error (see its traceback):")."""
    return message.rstrip().rstrip("*").endswith(":")


def bare(message: str) -> bool:
    """A statement with no words of its own: an exception name or a level word and a colon, or a
    debugger's head naming only the class (VS Code's "Exception has occurred: RuntimeError")."""
    return _BARE.match(message) is not None


_BARE = re.compile(r"^[ \t*]*[\w.]+:[ \t*]*$|^Exception has occurred: [\w.]+[ \t]*$")


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
        if c.signature is not None or not (introduces(message) or bare(message)) or c.line != c.hit.line:
            keep.append(c)
            continue
        if any((c.hit.file_index, c.hit.line + k) in signed for k in (1, 2, 3)):
            continue
        following = next(((k, t) for k, t in enumerate(c.hit.after[:3], 1) if t.strip()), None)
        if following is not None and HEADER.match(unwrap(following[1]).message) and _ends_below(c, cands):
            continue
        if following and bare(message) and not (RULE.match(following[1]) or CHAIN_NOTE.match(following[1])):
            c.line, c.text = c.hit.line + following[0], following[1]
        keep.append(c)
    return keep


def _ends_below(header: Candidate, cands: list[Candidate]) -> bool:
    # The traceback a header introduces ends in an exception line the scan found: that line
    # states the failure. A traceback cut before its end (a paste, a process killed while
    # printing it) leaves the header the only statement.
    return any(
        c.hit.file_index == header.hit.file_index
        and 0 < c.hit.line - header.hit.line <= TRACEBACK_REACH
        and (c.hit.matcher.kind is Kind.EXCEPTION or exception_name(c.hit.facts.message) is not None)
        for c in cands
    )


TRACEBACK_REACH = 400  # lines below a header where the traceback it introduces may end


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
# A native stack's header or frame: glog's "*** Check failure stack trace: ***" and its
# "@ 0x7f4c5091c27d google::LogMessage::Fail()", UCX's "==== backtrace (tid: 52950) ====",
# gdb's "#3 0x... in f ()". The process is going down, as under a Python traceback.
NATIVE_STACK = re.compile(
    r"^\s*(?:\*{3} [^*\n]*stack trace[^*\n]*\*{3}"
    r"|={2,} ?backtrace\b"
    r"|@ +0x[0-9a-fA-F]{4,} "
    r"|#\d+ +0x[0-9a-fA-F]{4,} )"
)


def carried_on(
    c: Candidate,
    candidate_lines: set[tuple[int, int]],
    enough: int = SURVIVED_AFTER,
    within: int | None = None,
) -> bool:
    """The process printed ordinary output (no failure, no warning) after ``c``: it carried on.
    A record at a failing level (read where the log writes its level, levels.py) is no ordinary output.

    A record whose next line introduces a list ("Stalled ranks:" under Horovod's stall warning)
    is a report of several lines: what it lists is its detail, no ordinary output.
    ``within`` reads only that many lines after ``c``."""
    ordinary = 0
    levels = learn_levels((*c.hit.before, c.hit.text, *c.hit.after))
    for k, text in enumerate(c.hit.after[:within], 1):
        if not text.strip() or (c.hit.file_index, c.hit.line + k) in candidate_lines:
            continue
        facts = unwrap(text)
        if levels.level(text) in FAILING:
            return False  # the process goes on stating failures (in a level the scan has no word for)
        if ordinary == 0 and facts.rank == c.hit.rank and introduces(facts.message):
            return False
        message = facts.message
        if TRACEBACK_TITLE in message or FRAME.match(message) or NATIVE_STACK.match(message):
            return False  # a traceback follows (plain, drawn by rich, native): the process is going down
        if facts.rank == c.hit.rank and not NCCL_UNWIND.search(facts.message):
            ordinary += 1
    return ordinary >= enough


def move_to_captured_output(cands: list[Candidate]) -> list[Candidate]:
    """An exception that carries a tool's output gives way to the tool's own error line.

    ``PTXASError: PTXAS error ...`` then "`ptxas` stderr:" then ``ptxas fatal : Value 'sm_121a' is
    not defined``: the line that introduces captured output (ends in a colon) joins the carrier
    to what the tool said, and the tool's error states the failure. The carrier's signature names
    it when the tool's line has none. A carrier whose own message ends in a colon introduces the
    tool's error itself, on the next line, when no signature knows that line.
    """
    at = {(c.hit.file_index, c.line): c for c in cands}
    gone: set[int] = set()
    for c in cands:
        if c.death or id(c) in gone or not carries_exception(c):
            continue
        itself = introduces(c.hit.facts.message)  # "RuntimeError: Internal Triton PTX codegen error: "
        if itself:
            told = _next_text(c.hit.after, 0)
        else:
            intro = _next_text(c.hit.after, 0)
            if intro is None or (c.hit.file_index, c.line + intro[0]) in at or not introduces(intro[1]):
                continue
            told = _next_text(c.hit.after, intro[0])
        inner = at.get((c.hit.file_index, c.line + told[0])) if told else None
        if inner is None or inner.death or (inner.tier > c.tier and inner.signature is not None):
            continue
        if inner.signature is not None:
            # The tool's line is known itself: it is the statement; but a message that goes on
            # into a line of its own signature is that line's header ("Error(s) in loading
            # state_dict:" then "Missing key(s) in state_dict").
            if not itself or inner.signature is not c.signature:
                gone.add(id(c))
            continue
        c.line, c.text = inner.line, inner.text
        c.tier = min(c.tier, inner.tier)  # the carried line states it: as strongly as it did alone
        gone.add(id(inner))
    return [c for c in cands if id(c) not in gone]


def carries_exception(c: Candidate) -> bool:
    return c.line == c.hit.line and (
        "reported-exception" in c.shapes or exception_name(c.hit.facts.message) is not None
    )


def _next_text(after: Sequence[str], start: int) -> tuple[int, str] | None:
    """The first line with text below offset ``start`` of ``after``, as (offset from the hit, text)."""
    for k in range(start, min(len(after), start + 2)):
        if after[k].strip():
            return k + 1, unwrap(after[k]).message
    return None


EPISODE_GAP = 2  # lines apart that two lines of one signature and one process are one episode
STACK_START = re.compile(r"^\s*(?:Exception raised from |frame #0: |Traceback \(most recent call last\))")


def keep_thrown_statements(cands: list[Candidate]) -> list[Candidate]:
    """Of one episode of one failure, the line that is thrown states it.

    Two lines of one signature from one process, at most EPISODE_GAP lines apart, are one
    episode ("To avoid data inconsistency, we are taking the entire process down", then "Process
    group watchdog thread terminated with exception: ... Watchdog caught collective operation
    timeout"). When only the later one is followed by its stack (C++ `Exception raised from`, a
    `frame #0:`, a Python traceback), it is the exception itself, and the earlier a notice;
    unless the thrown line quotes the earlier one or repeats it with other values (then the
    earlier one stated it first). The ``what():`` of an uncaught C++ exception is thrown by
    nature, and its ``terminate called after throwing`` header belongs to it; a record a paste
    hard-wrapped onto more lines (``_wrapped_lines``) ends where its last piece does.
    """
    signed = sorted(
        (c for c in cands if c.signature is not None and c.line == c.hit.line),
        key=lambda c: (c.hit.file_index, c.line),
    )
    gone: set[int] = set()
    for i, b in enumerate(signed):
        if not _thrown(b):
            continue
        later = b.line - 1 if _uncaught(b) else b.line  # an episode may run over several lines:
        for a in reversed(signed[:i]):  # walk back while it goes on
            if a.line == later and _uncaught(b):
                continue  # the header of the same throw
            # an untagged record is the process's whose tagged line follows it in the episode
            same = a.hit.file_index == b.hit.file_index and a.hit.rank in (None, b.hit.rank)
            one = a.signature is b.signature and same
            gap = later - a.line - _wrapped_lines(a)
            if not (one and a.tier == b.tier and 0 < gap <= EPISODE_GAP) or _thrown(a):
                break
            if _quoted(a, b) is False and not _stated_before_throw(a, b, _uncaught(b)):
                gone.add(id(a))
            later = a.line
    return [c for c in cands if id(c) not in gone]


_TAGS = re.compile(r"^(?:\s*\[[^\]\n]{1,40}\])+")


SAME_WORDS = 24  # characters two messages share that make them one statement
SAME_READ = 400  # characters of each message compared (the comparison is quadratic)


def _stated_before_throw(a: Candidate, b: Candidate, uncaught: bool) -> bool:
    # Above an uncaught exception, only a logged record ("[E pg.cpp:325] ... taking the process
    # down") is its notice: a bare line (a kernel's assertion) or one the what() repeats stated it.
    # Above a bare line its stack follows (`THCudaCheck FAIL ...`), a bare line stated it too.
    bare = a.hit.facts.level is None
    return bare or says_the_same(a, b) if uncaught else bare and b.hit.facts.level is None


def says_the_same(a: Candidate, b: Candidate) -> bool:
    """The two messages share a run of SAME_WORDS characters (digits aside): one statement twice.

    "[15:43:22] logging.h:245: [15:43:22] stream.h:125: Check failed: ..." then "what():
    [15:43:22] stream.h:125: Check failed: ..."."""
    x = _DIGITS.sub("#", a.hit.facts.message[:SAME_READ])
    y = _DIGITS.sub("#", b.hit.facts.message[:SAME_READ])
    match = SequenceMatcher(None, x, y, autojunk=False).find_longest_match(0, len(x), 0, len(y))
    return match.size >= SAME_WORDS


def _quoted(a: Candidate, b: Candidate) -> bool:
    # The thrown line says the earlier one's words, or says them again with other values (XLA's
    # "Execution of replica 1 failed: ..." then "replica 0" and its traceback: a repeat, first).
    words = _TAGS.sub("", a.hit.facts.message).strip()[:40]  # "[c10d] " and such are no words
    return bool(words) and _DIGITS.sub("#", words) in _DIGITS.sub("#", b.hit.facts.message)


_DIGITS = re.compile(r"\d+")


def _thrown(c: Candidate) -> bool:
    following = _next_text(c.hit.after, 0)
    return _uncaught(c) or (following is not None and STACK_START.match(following[1]) is not None)


_UNCAUGHT = "terminate called after throwing"


def _uncaught(c: Candidate) -> bool:
    # "terminate called after throwing an instance of '...'", then "  what():  <the exception>".
    return (
        c.hit.facts.message.lstrip().startswith("what():")
        and bool(c.hit.before)
        and _UNCAUGHT in c.hit.before[-1]
    )


WRAP_WIDTH_MIN = 60  # characters: narrower "wraps" are short lines, not a terminal's or a form's width
WRAPPED_SEEN = 3  # lines of that exact width from a line on that show the paste was hard-wrapped
WRAP_READ = 8  # lines below a record read for its paste's width


def _wrapped_lines(c: Candidate) -> int:
    """Lines below ``c`` that are the rest of its record, cut at a fixed width by a paste.

    A paste hard-wrapped at W characters leaves every long line exactly W long, and none longer:
    a line of that width goes on in the next one."""
    around = (c.hit.text, *c.hit.after[:WRAP_READ])  # not above: other output may run wider
    width = max((len(t.rstrip("\n")) for t in around), default=0)
    if width < WRAP_WIDTH_MIN or sum(len(t.rstrip("\n")) == width for t in around) < WRAPPED_SEEN:
        return 0
    pieces = 0
    line = c.hit.text
    while len(line.rstrip("\n")) == width and pieces < len(c.hit.after):
        line = c.hit.after[pieces]
        pieces += 1
    return pieces


RULE = re.compile(r"^\s*[-=*]{20,}\s*$")
BOX_REACH = 8  # lines of a launcher's box above the line that reports the death


def move_to_box_leads(cands: list[Candidate]) -> None:
    """A death reported inside a launcher's box (Open MPI's, between dashed rules) is stated by
    the box's first line ("mpirun detected that one or more processes exited with non-zero
    status"): the evidence moves up to it, when no other failure line is in the box."""
    lines = {(c.hit.file_index, c.line) for c in cands}
    for c in cands:
        if not c.death or c.signature is not None or c.line != c.hit.line:
            continue
        before = c.hit.before
        for k in range(1, min(len(before), BOX_REACH) + 1):
            if (c.hit.file_index, c.line - k) in lines:
                break
            if RULE.match(before[-k]):
                lead = next((j for j in range(k - 1, 0, -1) if before[-j].strip()), None)
                # the lead is a sentence (words, single spaces), not a table's heading
                sentence = (
                    lead is not None
                    and len(before[-lead].split()) >= 5
                    and "   " not in before[-lead].strip()
                )
                if lead is not None and sentence and not introduces(unwrap(before[-lead]).message):
                    c.line, c.text = c.hit.line - lead, before[-lead]
                break


def box_lines(hit: Hit) -> list[str]:
    """The lines of the launcher's box ``hit`` sits in, up to its rules (empty when in none)."""
    above: list[str] = []
    for text in reversed(hit.before[-BOX_REACH:]):
        if RULE.match(text):
            break
        above.append(text)
    else:
        return []
    below: list[str] = []
    for text in hit.after[:BOX_REACH]:
        if RULE.match(text):
            break
        below.append(text)
    return [*reversed(above), hit.text, *below]


STACK_HEADS = ("Exception raised from ", "frame #")
RECORD_REACH = 12  # lines above a C++ stack that may still be the record it belongs to


def stack_of_quiet_record(hit: Hit) -> bool:
    """The line is a C++ stack (`Exception raised from ...`, `frame #N`) printed under a record
    logged at info or debug level: part of that record, which states no failure."""
    if not hit.facts.message.lstrip().startswith(STACK_HEADS):
        return False
    for text in reversed(hit.before[-RECORD_REACH:]):
        facts = unwrap(text)
        if facts.level is not None:
            return facts.level in ("I", "D")
        if facts.message.lstrip().startswith(STACK_HEADS) or not facts.message.strip():
            continue
        if exception_name(facts.message.lstrip()) is not None or HEADER.match(facts.message):
            return False  # the stack of an exception of its own
    return False
