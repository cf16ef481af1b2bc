"""Reading Python tracebacks from the lines above a hit.

A fingerprint can match a line that only *echoes source code* inside a traceback (the
`raise RuntimeError(f"... too old ...")` statement above the real message), a frame line, or an
advice line printed under the real error. None of those is ever the cause. For an exception no
signature knows, the traceback's deepest frames say which subsystem raised it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from signatures.lines import unwrap

TRACEBACK_TITLE = "Traceback (most recent call last)"

FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')
# A frame line and nothing else: a "frame" that goes on with more text is a paste whose line
# breaks were lost ('File "...", line 9, in f 10: work = ... 10: DistBackendError: ...').
_FRAME_ALONE = re.compile(r'^\s*File "[^"]+", line \d+(?:, in [^ \t]+)?[ \t]*$')
_LONG_FRAME = 240  # a frame line longer than this holds more than its frame
HEADER = re.compile(r"^\s*Traceback \(most recent call last\):")
CARETS = re.compile(r"^\s*[\^~]+\s*$")
CHAIN = re.compile(
    r"^(?:The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)"
)
# TensorFlow 1.x names the exception and points back: "ResourceExhaustedError (see above for traceback): ..."
_SEE_ABOVE = r"(?: \(see above for traceback\))?"
# A wrapper names the exception it carries in parentheses: Ray's "RayTaskError(OutOfMemoryError): ..."
_CARRIED = r"(?:\((?:[A-Za-z_]\w*\.){0,6}[A-Za-z_]\w*\))?"
EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<name>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)"
    # any class of an exceptions module: torch._dynamo.exc.BackendCompilerFailed
    r"|(?<=exc\.)[A-Z]\w+|(?<=errors\.)[A-Z]\w+|(?<=error\.)[A-Z]\w+|(?<=exceptions\.)[A-Z]\w+"
    r"|(?<=[a-z0-9_]\.)Error)"  # a module's own Error class: binascii.Error, csv.Error, shutil.Error
    + _CARRIED
    + _SEE_ABOVE
    + r"(?::|[ \t]*$)"  # a bare name may keep the paste's trailing space: "MemoryError "
)
# A tag the prefix rules do not know ("[job/step (pid 12)] [uuid] ") may still precede the name.
EXCEPTION_LINE = re.compile(
    r"^[ \t]*(?:\[[^\]\n]{1,80}\] +)*(?:\*\*)?"
    r"(?:(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)"
    + _CARRIED
    + _SEE_ABOVE
    + r"(?::|\**[ \t]*$)"  # [ \t], not \s: the bulk form reads many lines at once
    r"|(?:[a-z_][a-z0-9_]*\.){0,8}(?:exc|errors?|exceptions?)\.[A-Z][A-Za-z0-9]+: "
    r"|(?:[a-z_][a-z0-9_]*\.){1,8}Error: )"
)
_WRAPPER_HEAD = re.compile(r"raised:\s*$|^\s*$")
_ASSERT_SRC = re.compile(r"^\s+assert\b")

# Lines that tell you how to debug, printed under the error: never the cause.
ADVICE = re.compile(
    r"^\s*(?:CUDA kernel errors might be asynchronously reported"
    r"|For debugging consider passing CUDA_LAUNCH_BLOCKING"
    r"|Compile with [`']?TORCH_USE_CUDA_DSA"
    r"|You can suppress this exception"
    r"|Set TORCH_LOGS="
    r"|Set TORCHDYNAMO_VERBOSE"
    r"|To disable this warning"
    r"|To log all recompilation reasons"
    r"|This (?:error|failure) (?:might|may) be caused by"
    r"|(?:It|This) might be caused by"
    r"|HINT:|Hint:|Tip:|Note: you can"
    r"|To enable traceback see"
    r"|Please (?:report|file) (?:an issue|a bug)"
    # how to see more: "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."
    r"|(?:Set|Export|Try setting) (?:the )?env(?:ironment)?\.? var(?:iable)?s? )"
)

_MAX_WALK = 120


@dataclass(frozen=True)
class TracebackView:
    """What the lines above a hit say about it."""

    echo: bool  # the hit line is source code echoed inside a traceback
    frame: bool  # the hit line is a traceback frame line
    in_traceback: bool  # a traceback (frames) leads to this line
    frames: tuple[str, ...]  # file paths of the frames, outermost first
    assert_offset: int | None  # lines above the hit where an `assert` statement is echoed
    assert_text: str | None
    ignored: bool = False  # Python said "Exception ignored in ...": the program went on
    # The raw title line when something precedes the title on it, else the nearest line with
    # text above the title: the record that opened the traceback (a hit keeps fewer lines above)
    opener: str | None = None
    opener_up: int | None = None  # lines above the hit where the opener stands
    from_module: bool = False  # the outermost frame is a script's module code: nothing caught it
    above_opener: tuple[str, ...] = ()  # the raw lines just above the opener, nearest first


def read_traceback(message: str, before: Sequence[str]) -> TracebackView:
    """Classify a hit line from its unwrapped ``message`` and the raw ``before`` lines."""
    if FRAME.match(message) and (len(message) <= _LONG_FRAME or _FRAME_ALONE.match(message)):
        return TracebackView(False, True, True, (), None, None)
    messages = _Lazy(before)
    if message[:1] in (" ", "\t"):
        # Python echoes source code indented deeper than its frame line. A traceback embedded in
        # another report (torchrun's failure table) is indented as a whole, and its exception line
        # then sits left of the frames: that line is the message, not source.
        depth = _indent(message)
        for i in range(1, min(len(before), 16) + 1):
            prev = messages[i]
            if FRAME.match(prev):
                if depth > _indent(prev):
                    return TracebackView(True, False, True, (), None, None)
                break
            if prev[:1] not in (" ", "\t") or not prev.strip():
                break
    frames: list[str] = []
    assert_offset: int | None = None
    assert_text: str | None = None
    skipped_heads = 0
    ignored = False
    opener: str | None = None
    opener_up: int | None = None
    from_module = titled = False
    for i in range(1, min(len(before), _MAX_WALK) + 1):
        prev = messages[i]
        m = FRAME.match(prev)
        if m:
            frames.append(m.group("path"))
            from_module = prev.rstrip().endswith(", in <module>")  # the outermost, once walked up
            continue
        if HEADER.match(prev):
            ignored = i < len(before) and messages[i + 1].startswith("Exception ignored in")
            titled = True
            opener_up = _opener(before, i)
            opener = before[-opener_up] if opener_up is not None else None
            break
        if prev[:1] in (" ", "\t") and prev.strip():
            if assert_offset is None and not frames and _ASSERT_SRC.match(prev):
                assert_offset, assert_text = i, before[-i]
            continue
        if CARETS.match(prev):
            continue
        if not frames and skipped_heads < 2 and (_WRAPPER_HEAD.search(prev) or EXCEPTION.match(prev)):
            skipped_heads += (
                1  # e.g. "BackendCompilerFailed: backend='inductor' raised:" above the inner error
            )
            continue
        if TRACEBACK_TITLE in prev:
            opener = before[-i]  # a title inside a record's head: "rank:  3 | ... | Traceback ..."
        break
    frames.reverse()
    return TracebackView(
        echo=False,
        frame=False,
        in_traceback=bool(frames),
        frames=tuple(frames),
        assert_offset=assert_offset,
        assert_text=assert_text,
        ignored=ignored,
        opener=opener,
        opener_up=opener_up,
        from_module=from_module and titled,
        above_opener=_above(before, opener_up),
    )


ABOVE_OPENER = 3  # lines above a traceback's opener kept with it


def _above(before: Sequence[str], opener_up: int | None) -> tuple[str, ...]:
    if opener_up is None:
        return ()
    return tuple(before[-up] for up in range(opener_up + 1, min(opener_up + ABOVE_OPENER, len(before)) + 1))


def _opener(before: Sequence[str], title: int) -> int | None:
    """How many lines above the hit the line with text above a traceback's title (``title``
    lines above the hit), its opener, stands."""
    return next((up for up in range(title + 1, len(before) + 1) if before[-up].strip()), None)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class _Lazy:
    """Unwrapped messages of the lines above a hit, 1 = the line just above; computed on demand."""

    def __init__(self, before: Sequence[str]) -> None:
        self.before = before
        self.cache: dict[int, str] = {}

    def __getitem__(self, i: int) -> str:
        if i not in self.cache:
            self.cache[i] = unwrap(self.before[-i]).message
        return self.cache[i]


@cache
def _recovery() -> re.Pattern[str]:
    # Compiled on first use, not at import: most diagnoses never ask whether an error was handled.
    return re.compile(
        r"\b(?:[Rr]etry(?:ing)?|[Rr]etried|[Ww]ill retry|[Rr]econnect(?:ing|ed)|[Rr]ecovered"
        r"|[Ff]all(?:ing)? back|[Ff]allback to eager|assuming every)\b"
    )


def recovered(after: Sequence[str], lines: int = 3) -> bool:
    """The next lines say the program retried, fell back or recovered: the error was handled."""
    return any(_recovery().search(line) for line in after[:lines])


# Python's notes between chained tracebacks ("During handling of the above exception, another
# exception occurred:"): no statement of their own, as a rule of dashes is none
CHAIN_NOTE = re.compile(
    r"^\s*(?:During handling of the above exception|The above exception was the direct cause)"
)


def handled_below(after: Sequence[str]) -> bool:
    """ "During handling of the above exception, another exception occurred" follows: the exception
    above was being handled (a cache miss, a probe) when the one that matters was raised."""
    following = next((t for t in after[:2] if t.strip()), "")
    return unwrap(following).message.startswith("During handling of the above exception")


def is_advice(message: str) -> bool:
    return ADVICE.match(message) is not None


def exception_name(message: str) -> str | None:
    m = EXCEPTION.match(message)
    return m.group("name") if m else None
