"""The last words of a log: a failure stated in plain words, read when nothing else states one.

A run that died often says why in words no shape or signature knows: Open MPI's "ORTE has lost
communication with a remote daemon", Ascend's "Getting socket times out", Ray's "has been marked
dead because the detector has missed too many heartbeats". Scanning every line of every log for
such common words would cost time and find them in healthy output everywhere, so they are read
only when the scan found no failure at all, and only where a dying run says them: among the last
lines of a text (``TAIL_LINES``, kept by the scan), after its last progress line.

A line qualifies when its message says that something failed, timed out, was lost or died, outside
a negation, a condition or an inference ("no errors", "if the job fails", "it usually means the
child failed"), and it is no info or debug record, traceback frame or its code line, or advice;
so does the title of a traceback the text ends inside (no exception line follows its frames).
The lines found go through the same noise model as every other candidate (retried right after,
trained on past it); the earliest that stands is named
``unrecognized``. A run that finished says no such thing after its last progress line, so a
healthy log stays ``clean``; after a last progress line at its total (the training finished),
only a record at a failing level or an error code's record states a failure of its wrap-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from signatures.episodes import RULE, SURVIVED_AFTER
from signatures.lastlines import TAIL_LINES
from signatures.levels import FAILING
from signatures.levels import learn as learn_levels
from signatures.library import Kind, Matcher
from signatures.lines import LineFacts, unwrap
from signatures.ncclwarn import NCCL_UNWIND, unwinds_unannounced
from signatures.progress import is_progress
from signatures.reports import CODED
from signatures.shapes import Shape, ShapeKind
from signatures.textscan import Hit, TextScan
from signatures.tracebacks import CARETS, FRAME, TRACEBACK_TITLE, exception_name, is_advice, read_traceback

CONTEXT = 12  # lines before and after a line that go with it, as for a scan hit

# Words that state a failure of something.
_FAILED = re.compile(
    r"\b(?:fail(?:ed|s|ure|ing)?|cannot|can't|could\s+not|couldn't|unable\s+to"
    r"|timed?[\s-]?out|times\s+out|lost|died|dead|crash(?:ed|es)?|abort(?:ed|ing)?"
    r"|terminat(?:ed|ing)|refused|denied|unreachable|exceeded|killed|panic|fatal"
    r"|not\s+(?:found|known|responding|reachable)|no\s+such|corrupt(?:ed)?|unexpectedly"
    r"|stuck|hung|hangs?)\b"
    # a message that opens with the word ("Error locating target 'x'", "Error: no such device"),
    # not a metric's name ("Error rate", "error: 0.031")
    r"|^\s*error\b(?!\s*(?:rate|[:=]\s*[-+]?[\d.]))"
    # or with an exception that reached it ("Exception in main training loop: out of memory ..."),
    # not Python's note on one it ignored
    r"|^\s*exception\s+(?:in|(?:has\s+)?occurred|raised|caught|while|during)\b"
    # the cause of an ending or a stop: "Exiting due to exception: ...", "stopped with an error"
    r"|\b(?:due\s+to|because\s+of|with)\s+(?:an?\s+)?(?:(?:unhandled|uncaught|fatal)\s+)?(?:exception|error)\b"
    r"(?!\s*(?:rate|[:=]\s*[-+]?[\d.]))",
    re.IGNORECASE,
)
# Words just before a failure word that make it no statement of one: a negation ("no errors",
# "0 failed"), or, a few words before, a condition or possibility ("if the link fails", "may time
# out") or an aim ("to avoid a timeout").
_NOT_STATED = re.compile(
    # (a 0 after a word is an index, no count: "Rank 0 crashed")
    r"(?:\b(?:no|not|zero|without)|(?<![A-Za-z]\s)\b0)\s*$"
    r"|\b(?:if|when|whether|unless|may|might|can|could|would|should|in\s+case\s+of|on|upon|avoid|prevent"
    r"|means|usually|probably|likely|possibly|perhaps|suggests?"
    r"|ignor(?:e|ed|ing))\b(?:\s+[^\s,;.:]+){0,3}\s*$",
    re.IGNORECASE,
)
# A level word is no statement: "[ERROR]    ^^^^" says nothing failed.
_LEVEL_TOKEN = re.compile(r"(?:^|(?<=[\s\[|(]))(?:ERROR|FATAL|CRITICAL|WARN(?:ING)?)\b")
# Words after a failure that say it was worked around.
_WORKED_AROUND = re.compile(
    r"\b(?:instead|fall(?:ing|s)?\s+back|retry(?:ing)?|try(?:ing)?\s+again|default(?:ing|s)?\s+to|setting\s+\S+\s+to|skipping"
    r"|ignoring|continuing|using)\b",
    re.IGNORECASE,
)
# A failure word followed by a count of none ("errors: 0", "failed=0") counts nothing.
# What follows a failure word to say it was none: a count of nothing ("failed: 0"), or an ending
# that went as meant ("Primary job terminated normally, but ...", "worker exited cleanly").
_NONE_COUNTED = re.compile(
    r"^\s*(?:[:=]\s*)?0\b|^\s+(?:normally|successfully|cleanly|gracefully)\b", re.IGNORECASE
)
_QUIET = ("I", "D")  # info and debug records state no failure of their own
# An info or debug level written as a word in a line's head (NCCL's "host:pid:tid [0] NCCL INFO").
_QUIET_WORD = re.compile(
    r"(?:^|[\s\[|(])(?:INFO|DEBUG|TRACE|NOTICE|VERBOSE)(?:[\s\]|):]|$)|\d:\d\d(?:[.,]\d+)?:?\s+[ID]\s"
)
_WARN_WORD = re.compile(
    r"(?:^|[\s\[|(])(?:WARN|WARNING|Warning)(?:[\s\]|):]|$)"  # a level word
    r"|\b[A-Z]\w*Warning: "  # Python's warnings module: "conv.py:456: UserWarning: ..."
    r"|\d:\d\d(?:[.,]\d+)?:?\s+W\s"  # a level letter after the time: "17:06:25.825248: W path"
)
# A line of a several-line report: a box's rule, a list item ("* not finding the libraries").
_DETAIL = re.compile(r"^(?:[-=*#_~]{3,}|[*\u2022>-]\s|\d{1,2}[.)]\s)")
# What starts a record of its own, in whatever head a log writes: a time of day or a level word.
_RECORD_HEAD = re.compile(r"\b\d{1,2}:\d{2}:\d{2}|(?:^|[\s\[|(])(?:ERROR|WARN|WARNING|FATAL|CRITICAL|INFO)\b")
# A progress count at its total ("iter: 80000/80000", "100%|##########|"): the run finished.
_FINISHED = re.compile(r"\b(\d+)\s*/\s*\1\b|\b100%")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")
HEAD = 100  # characters of a line in which a level word is its level

WORDS = Shape(
    name="failure-in-words",
    kind=ShapeKind.ERROR,
    label="a line near the log's end that says in words that something failed",
    needles=(),
    verify=_FAILED,
)
_MATCHER = Matcher(
    pid=-1,
    kind=Kind.SHAPE,
    signature=None,
    verify_source=_FAILED,
    locate_source=(_FAILED.pattern.encode(), re.IGNORECASE),
    excludes=(),
    cap=TAIL_LINES,
    shape=WORDS,
)


def _ordinary_after(messages: Sequence[str], in_vain: set[int]) -> list[int]:
    # For each line, how many ordinary lines follow it (any process's, info records included; not
    # a record's indented detail, a traceback, advice, another failure statement, a report's rule
    # or list item, or what introduces a list): past SURVIVED_AFTER of them, the text went on.
    # A line said again word for word is counted once: a report printed three times over
    # (Ascend's EH9999 records and their NPU warning) is no output the text went on with, while
    # lines that count on ("eval batch 3 done", "batch 4 done") are.
    counts = [0] * len(messages)
    ordinary = 0
    seen: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        counts[i] = ordinary
        message = messages[i]
        bare = message.strip()
        if not bare or message[:1].isspace() or FRAME.match(bare) or TRACEBACK_TITLE in bare:
            continue
        if _frame_code(messages, i) or NCCL_UNWIND.search(message):
            continue  # a frame's code, NCCL's unwinding of a failed call: the failure's own lines
        if is_advice(bare) or states_failure(bare) or _DETAIL.match(bare) or bare.endswith(":"):
            continue
        if i in in_vain:
            continue  # a failure said to be retried, whose retries failed too
        if bare not in seen:
            seen.add(bare)
            ordinary += 1
    return counts


def states_failure(message: str) -> bool:
    """Whether ``message`` says, outside a negation or condition, that something failed (and not
    that it was worked around: "was not found. Setting CardData to empty")."""
    message = _LEVEL_TOKEN.sub(" ", message)
    for m in _FAILED.finditer(message):
        if _WORKED_AROUND.search(message, m.end()):
            return False
        before = message[max(0, m.start() - 24) : m.start()]
        if _NOT_STATED.search(before) or _NONE_COUNTED.match(message[m.end() :]):
            continue
        return True
    return False


def last_words(scans: Sequence[TextScan]) -> list[Hit]:
    """The lines among each text's last ones, after its last progress line, that state a failure.

    A warning is one of them only when a line that is no warning states a failure after it: a
    text that ends in warnings alone ends in what its processes worked around."""
    out: list[Hit] = []
    for scan in scans:
        found = _stated(scan)
        if any(not warned for _, warned in found):
            out.extend(hit for hit, _ in found)
    return out


def _stated(scan: TextScan) -> list[tuple[Hit, bool]]:
    # (hit, whether it is a warning) for each line of the text's end that states a failure
    # The scan keeps a sample of progress lines; the kept last lines give the latest one for sure.
    progress = max(
        [*scan.progress[-1:], *((n, x) for n, x in scan.last_lines if is_progress(x.encode()))], default=None
    )
    # The run's last progress line reached its total: it finished, and what follows is its
    # wrap-up (saving, reports). Plain words there ("Cannot find suitable count function ... Treat
    # it as zero FLOPs") are its reports; a record at a failing level or an error code
    # ("EH9999: ... wait for compute device to finish failed") still states a failure.
    finished = progress is not None and _FINISHED.search(progress[1]) is not None
    after_progress = progress[0] if progress is not None else 0
    texts = [t for _, t in scan.last_lines]
    read = [unwrap(t) for t in texts]  # each line unwrapped once, for every rule below
    messages = [f.message for f in read]
    levels = learn_levels(texts)  # where this text writes a record's level (levels.py)
    in_vain = {i for i in range(len(messages)) if _retried_in_vain(messages, i)}
    went_on = _ordinary_after(messages, in_vain)
    unfinished = _unfinished_traceback(messages)
    survived: set[str] = set()
    out: list[tuple[Hit, bool]] = []
    warning = False  # the line is a warning record's or one of its headless detail lines
    for i, (number, text) in enumerate(scan.last_lines):
        facts = read[i]
        level = levels.level(text)
        message = facts.message.strip()
        heads = facts.time is not None or level is not None or _RECORD_HEAD.search(text[:HEAD])
        if heads or not message:
            warning = level == "W" or _WARN_WORD.search(text[:HEAD]) is not None
        if number < after_progress:  # (a line read as progress may say it failed: "epoch 2 timed out")
            continue
        if finished and level not in FAILING and not CODED.match(message) and i != unfinished:
            continue
        if unwinds_unannounced(texts, i) and went_on[i] < SURVIVED_AFTER:
            # NCCL's unwinding with no WARN above it: the text starts after the WARN
            out.append((_hit(scan, i, number, text, facts, texts), False))
            continue
        if (
            level in _QUIET
            or _QUIET_WORD.search(text[:HEAD])
            or not message
            or FRAME.match(message)
            or _frame_code(messages, i)
            or is_advice(message)
            or not (i == unfinished or states_failure(message) or i in in_vain)
        ):
            continue
        shape = _DIGITS.sub("#", message)
        if shape in survived or went_on[i] >= SURVIVED_AFTER:
            survived.add(shape)  # an echo of a line the text carried on from is carried on from
            continue
        hit = _hit(scan, i, number, text, facts, texts)
        # a traceback the text ends inside is a process dying, no warning's detail: the warning
        # just above it says what it died of
        warned = i != unfinished and (warning or _WARN_WORD.search(text[:HEAD]) is not None)
        out.append((hit, warned))
    return out


def _retried_in_vain(messages: Sequence[str], i: int) -> bool:
    # A failure said to be retried ("save failed, trying again") whose subject later fails with no
    # retry ("save failed 3 times, exiting") was not worked around: the first try states it.
    words = _WORD.findall(messages[i])[:2]
    if len(words) < 2 or not _FAILED.search(messages[i]):
        return False
    return any(_WORD.findall(m)[:2] == words and states_failure(m) for m in messages[i + 1 :])


def _hit(scan: TextScan, i: int, number: int, text: str, facts: LineFacts, texts: Sequence[str]) -> Hit:
    before = texts[max(0, i - CONTEXT) : i]
    return Hit(
        matcher=_MATCHER,
        file_index=scan.file_index,
        file=scan.name,
        line=number,
        text=text,
        facts=facts,
        groups={},
        view=read_traceback(facts.message, before),
        before=tuple(before),
        after=tuple(texts[i + 1 : i + 1 + CONTEXT]),
    )


def _frame_code(messages: Sequence[str], i: int) -> bool:
    # The source line Python prints under a traceback frame (`    return run(..., timeout=timeout,`)
    # is code, no statement, indented or not (a paste may lose the indentation): the line above it
    # is the frame.
    if i == 0:
        return False
    message = messages[i].strip()
    if FRAME.match(message) or TRACEBACK_TITLE in message or exception_name(message) is not None:
        return False  # (a frame with no source to show is followed by the exception itself)
    return FRAME.match(messages[i - 1].strip()) is not None


def _unfinished_traceback(messages: Sequence[str]) -> int | None:
    # The title of a traceback the text ends inside (frames and their code to the last line, no
    # exception line: the process died printing it, or the paste was cut): the line that opens it
    # ("Scheduler hit an exception: Traceback (most recent call last):") says something failed.
    # Interleaved tracebacks of several processes make one region: its first title opens it.
    title = None
    for i in reversed([i for i, m in enumerate(messages) if m.strip()]):
        message = messages[i].strip()
        if TRACEBACK_TITLE in message:
            title = i
        elif not (FRAME.match(message) or _frame_code(messages, i) or CARETS.match(message)):
            break  # (Python 3.11+ marks the failing expression under a frame's code with carets)
    return title


def in_ruled_box(hit: Hit) -> bool:
    """Whether the line stands in a launcher's box between rules (Open MPI's "Primary job
    terminated normally, but 1 process returned / a non-zero exit code ...", torchrun's "train.py
    FAILED"): a rule above or below it with no blank line between (a paste may start inside the
    box). Such a box reports a death; its words say no more than the death does."""
    return _rule_within(reversed(hit.before)) or _rule_within(hit.after)


def _rule_within(lines: Iterable[str]) -> bool:
    for line in lines:
        text = unwrap(line).message
        if not text.strip():
            return False
        if RULE.match(text):
            return True
    return False
