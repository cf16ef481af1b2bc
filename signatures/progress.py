"""Training progress: the lines that show a run kept going, and what they say about an error.

An error that a process logged and then trained on past is no failure (it was handled), and a
degradation is a problem the run kept training with. Both are read from progress lines: step or
iteration counters, loss values, rates, progress bars.

Reading every progress line of a 1 GB log in Python would cost seconds, so each large chunk keeps
only the progress lines among its last few lines: a sample of who was still training at that
point. That is enough to tell whether a rank trained on after a line, which is all the engine
asks; a small text (a pasted excerpt) is read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from signatures.lines import unwrap

# What makes a line a progress line: a rate, a progress bar, a loss value, or a step, iteration
# or epoch counter ("step 10", "[3/50]"). Each form is tried only when its cheap literal is in the
# line, so that a line costs a few microseconds, not a scan of every alternative at every byte.
_FORMS: tuple[tuple[tuple[bytes, ...], re.Pattern[bytes]], ...] = (
    (
        (b"/s", b"s/it", b"/step"),
        re.compile(rb"[0-9][ \t]?(?:it/s|s/it|samples/s|tokens/s|tok/s|sec/step|s/step)\b"),
    ),
    ((b"/",), re.compile(rb"[0-9]+/[0-9]+ \[[0-9:]+<")),
    ((b"oss", b"OSS"), re.compile(rb"\b(?:[Ll]oss|LOSS)\b[\"']?[ \t]*[:=]?[ \t]*[-+]?(?:[0-9]|nan\b|inf\b)")),
    (
        (b"tep", b"ter", b"poch", b"TEP", b"TER", b"POCH"),
        re.compile(
            rb"\b(?:global_step|[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER|[Ee]poch|EPOCH)\b"
            rb"[ \t]*[:=#]?[ \t]*\[?[0-9]+\]?(?:\[[0-9]+)?(?:[ \t]*/[ \t]*[0-9]+)?\]?(?=[ \t,|\]:)]|$)"
        ),
    ),
)
# Words of a line that reports a problem: no sign of progress, whatever counter it carries.
_TROUBLE = (
    b"rror",
    b"ERROR",
    b"xception",
    b"Traceback",
    b"ail",
    b"FAIL",
    b"Killed",
    b"erminat",
    b"bort",
    b"WARN",
    b"arning",
)


# A run's summary printed as it exits ("wandb: train/global_step 260") repeats progress; it is none.
# Nor is a bar of setting up ("Downloading shards: 100%|...| 4/4"): a process fetches and loads
# while another has already failed, and a failure does not stop it.
_NOT_TRAINING = (
    b"wandb:",
    b"Downloading",
    b"Loading checkpoint shards",
    b"Fetching ",
    b"Map: ",
    b"Map (num_proc",
    b"Tokenizing",
    b"Resolving data files",
    b"Extracting",
)


def is_progress(line: bytes) -> bool:
    """Whether ``line`` reports training progress (and no problem)."""
    if any(word in line for word in _TROUBLE) or line.startswith(_NOT_TRAINING):
        return False
    return any(any(k in line for k in keys) and form.search(line) for keys, form in _FORMS)


# The step or iteration number a progress line names.
STEP = re.compile(
    r"\b(?:global[ _]step|step|iter(?:ation)?)\b[ \t]*[:=#]?[ \t]*\[?(\d+)(?![.\d])", re.IGNORECASE
)
# A progress count: "12/56 [" (a bar) or a step or iteration number.
_BAR_COUNT = re.compile(r"(\d+)/\d+ \[")


def count(text: str) -> int | None:
    """How far a progress line says the run got (its bar's count or its step), or None."""
    m = _BAR_COUNT.search(text) or STEP.search(text)
    return int(m.group(1)) if m else None


def step(text: str) -> int | None:
    """The training step or iteration a progress line names, or None."""
    m = STEP.search(text)
    return int(m.group(1)) if m else None


WHOLE = 256 << 10  # a chunk up to this size (a pasted excerpt, a short log) is read whole
TAIL_BYTES = 4 << 10  # of a larger chunk, only lines in its last 4 KB ...
TAIL_LINES = 2  # ... and at most this many of them
KEPT = 256  # progress lines a text keeps (the newest)
AFTER_MIN = 2  # progress lines after an error that prove the process went on
JOB_STEPS = 2  # steps the job must advance past an error to prove the job went on


def progress_lines(chunk: bytes, last_line: int) -> list[tuple[int, str]]:
    """(line number, text) of progress lines in ``chunk``, whose last line is number ``last_line``.

    A small chunk (a pasted excerpt, a short log) is read whole; of a large one only the last
    TAIL_LINES lines are, so the cost per chunk stays a few microseconds whatever its size.
    """
    if len(chunk) <= WHOLE:
        lines = chunk.split(b"\n")
    else:
        lines = chunk[chunk.rfind(b"\n", 0, len(chunk) - TAIL_BYTES) + 1 :].split(b"\n")[-TAIL_LINES - 1 :]
    if lines and not lines[-1]:
        lines.pop()  # the chunk ends with a newline
    first = last_line - len(lines) + 1
    return [(first + i, _text(line)) for i, line in enumerate(lines) if is_progress(line)]


def _text(line: bytes) -> str:
    return line[:300].decode("utf-8", "replace")


@dataclass(frozen=True)
class ProgressLine:
    file_index: int
    line: int
    rank: int | None
    text: str


class Progress:
    """The progress lines kept from every text, to ask whether a process went on after a line."""

    def __init__(self, per_text: Iterable[tuple[int, Sequence[tuple[int, str]]]]) -> None:
        self.lines: dict[int, list[ProgressLine]] = {}
        for file_index, kept in per_text:
            self.lines[file_index] = [ProgressLine(file_index, n, unwrap(t).rank, t) for n, t in kept]

    def went_on(self, file_index: int, line: int, rank: int | None) -> bool:
        """Whether training went on after ``line``: the process that printed it, or the whole job.

        The process went on when its own progress lines continue past the line (with a rank, that
        rank's; without one, those without one, when most progress lines after it carry none).
        The job went on when the step counter of any rank moved JOB_STEPS or more past the line:
        data-parallel ranks wait for each other every step, so no rank gets that far while another
        is dead (with no step before the line, or a counter started again after it, the steps
        after it must advance that much from the first of them).
        """
        before, after = self.around(file_index, line, rank)
        if len(after) >= AFTER_MIN:
            # A progress bar redrawn as the process exits repeats its last count: only a count
            # beyond the last one before the line shows training went on.
            reached = max((n for p in before if (n := count(p.text)) is not None), default=None)
            later = [n for p in after if (n := count(p.text)) is not None]
            if reached is None or not later or max(later) > reached:
                return True
        every = self.lines.get(file_index, [])
        steps_before = [n for p in every if p.line < line and (n := step(p.text)) is not None]
        steps_after = [n for p in every if p.line > line and (n := step(p.text)) is not None]
        if not steps_after:
            return False
        # With no step before the line (an error at start-up), or a counter that started again
        # below it (a new run after the line), the steps after it must advance from their first.
        base = min(max(steps_before), min(steps_after)) if steps_before else min(steps_after)
        return max(steps_after) >= base + JOB_STEPS

    def around(
        self, file_index: int, line: int, rank: int | None
    ) -> tuple[list[ProgressLine], list[ProgressLine]]:
        """The progress lines of the process that printed ``line``: before it, and after it."""
        own = self.lines.get(file_index, [])
        if rank is not None:
            own = [p for p in own if p.rank == rank]
        elif any(p.rank is not None for p in own):
            # a line without a rank in a log of ranked progress is the launcher's or another
            # process's; only when most progress lines after it carry no rank (one stream, a
            # rank tag glued to a progress bar here and there) are those lines its process's
            later = [p for p in own if p.line > line]
            if 2 * sum(p.rank is None for p in later) <= len(later):
                return [], []
            own = [p for p in own if p.rank is None]
        return [p for p in own if p.line < line], [p for p in own if p.line > line]


_NUMBER = r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_UNIT = r"it/s|s/it|samples/s|tokens/s|tok/s|sec/step|s/step|ms/step|ms/it"


@cache
def _rate() -> re.Pattern[str]:
    # Compiled on first use, not at import: only a run that went on after its error needs speeds.
    return re.compile(
        rf"(?P<v>{_NUMBER}) ?(?P<u>{_UNIT})\b"  # 1.2it/s, 0.138 sec/step
        rf"|\b(?P<u2>{_UNIT})[ \t:=]+(?P<v2>{_NUMBER})"  # tokens/s 1.2e+06
        rf"|elapsed time per iteration \(ms\): (?P<ms>{_NUMBER})"  # Megatron
    )


_SLOW_UNITS = ("s/it", "sec/step", "s/step", "ms/step", "ms/it")


def speed(text: str) -> float | None:
    """Work per second a progress line reports (iterations, samples or tokens), or None."""
    m = _rate().search(text)
    if m is None:
        return None
    if m.group("ms"):
        value = float(m.group("ms"))
        return 1000.0 / value if value else None
    value, unit = float(m.group("v") or m.group("v2")), m.group("u") or m.group("u2")
    if unit in _SLOW_UNITS:
        seconds = value / 1000.0 if unit.startswith("ms") else value
        return 1.0 / seconds if seconds else None
    return value


def slowdown(before: Sequence[ProgressLine], after: Sequence[ProgressLine]) -> float | None:
    """How many times slower the lines after run than the lines before, or None when unknown."""
    ahead = [v for p in before[-8:] if (v := speed(p.text)) is not None]
    behind = [v for p in after[:8] if (v := speed(p.text)) is not None]
    if not ahead or not behind:
        return None
    import statistics  # here, not at the top: ~8 ms of start-up for the rare slowdown question

    return statistics.median(ahead) / statistics.median(behind) if statistics.median(behind) else None
