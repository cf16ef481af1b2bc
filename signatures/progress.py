"""Training progress: the lines that show a run kept going, and what they say about an error.

An error that a process logged and then trained on past is no failure (it was handled), and a
degradation is a problem the run kept training with. Both are read from progress lines: step or
iteration counters, loss values, rates, progress bars.

Reading every progress line of a 1 GB log in Python would cost seconds, so each chunk keeps only
the progress lines in its last few KB: what the end of each stretch of output looked like. That
is enough to tell whether a rank trained on after a line, which is all the engine asks.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from signatures.lines import unwrap

PROGRESS = re.compile(
    # a loss value, a rate, a progress bar, or a step/iteration/epoch counter ("step 10", "[3/50]")
    rb"\bloss\b[\"']?[ \t]*[:=]?[ \t]*[-+]?(?:[0-9]|nan\b|inf\b)"
    rb"|[0-9](?:\.[0-9]+)?[ \t]?(?:it/s|s/it|samples/s|tokens/s|tok/s)\b"
    rb"|[0-9]+/[0-9]+ \[[0-9:]+<"
    rb"|\b(?:global_step|step|iter(?:ation)?|epoch)\b[ \t]*[:=#]?[ \t]*\[?[0-9]+\]?(?:\[[0-9]+)?"
    rb"(?:[ \t]*/[ \t]*[0-9]+)?\]?(?=[ \t,|\]:)]|$)",
    re.IGNORECASE | re.MULTILINE,
)
# A line that reports a problem is no sign of progress, whatever counter it carries.
_TROUBLE = re.compile(
    rb"[Ee]rror|ERROR|Exception|Traceback|[Ff]ail|FAIL|Killed|Terminat|Abort|WARN|[Ww]arning"
)
WINDOW = 16 << 10  # bytes at the end of each chunk searched for progress lines
KEPT = 256  # progress lines a text keeps (the newest)
AFTER_MIN = 2  # progress lines after an error that prove the process went on


def progress_lines(chunk: bytes, base: int) -> list[tuple[int, str]]:
    """(line number, text) of the progress lines in the last WINDOW bytes of ``chunk``."""
    start = 0
    if len(chunk) > WINDOW:
        start = chunk.find(b"\n", len(chunk) - WINDOW) + 1
        if start <= 0:
            return []
    line_no = base + chunk.count(b"\n", 0, start)  # lines before the current position
    pos, found = start, []
    for m in PROGRESS.finditer(chunk, start):
        if m.start() < pos:
            continue  # a second match on a line already taken
        begin = chunk.rfind(b"\n", 0, m.start()) + 1
        line_no += chunk.count(b"\n", pos, begin)
        end = chunk.find(b"\n", m.end())
        end = end if end >= 0 else len(chunk)
        line = chunk[begin:end]
        if not _TROUBLE.search(line):
            found.append((line_no + 1, line[:300].decode("utf-8", "replace")))
        pos = end
    return found


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
        """Whether the process that printed ``line`` shows training progress after it.

        With a rank, that rank's own progress counts. Without one, any progress counts only when
        the text's progress lines carry no ranks either (one process); otherwise who went on
        cannot be told.
        """
        return len(self.around(file_index, line, rank)[1]) >= AFTER_MIN

    def around(
        self, file_index: int, line: int, rank: int | None
    ) -> tuple[list[ProgressLine], list[ProgressLine]]:
        """The progress lines of the process that printed ``line``: before it, and after it."""
        own = self.lines.get(file_index, [])
        if rank is not None:
            own = [p for p in own if p.rank == rank]
        elif any(p.rank is not None for p in own):
            return [], []
        return [p for p in own if p.line < line], [p for p in own if p.line > line]


_NUMBER = r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_UNIT = r"it/s|s/it|samples/s|tokens/s|tok/s|sec/step|s/step|ms/step|ms/it"
_RATE = re.compile(
    rf"(?P<v>{_NUMBER}) ?(?P<u>{_UNIT})\b"  # 1.2it/s, 0.138 sec/step
    rf"|\b(?P<u2>{_UNIT})[ \t:=]+(?P<v2>{_NUMBER})"  # tokens/s 1.2e+06
    rf"|elapsed time per iteration \(ms\): (?P<ms>{_NUMBER})"  # Megatron
)
_SLOW_UNITS = ("s/it", "sec/step", "s/step", "ms/step", "ms/it")


def speed(text: str) -> float | None:
    """Work per second a progress line reports (iterations, samples or tokens), or None."""
    m = _RATE.search(text)
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
    return statistics.median(ahead) / statistics.median(behind) if statistics.median(behind) else None
