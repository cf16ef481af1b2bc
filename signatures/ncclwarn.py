"""NCCL's WARN lines: whether one reports a failed call, or a fallback NCCL went on from.

NCCL prints a warning for calls that failed and for choices it worked around alike; the lines of
the same process (its `host:pid`) after it tell which: a return code unwinding (`file.cc:N -> 6`)
is the failure, ordinary INFO lines are NCCL carrying on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

# NCCL prints a failed call's return code as it unwinds: "NCCL INFO transport/net.cc:1008 -> 6".
NCCL_UNWIND = re.compile(r"NCCL INFO [\w./-]+:\d+ -> \d+")
_NCCL_PROCESS = re.compile(r"([A-Za-z0-9][\w.-]*:\d+):\d+ \[\d+\] ")


@cache
def _nccl_failure_words() -> re.Pattern[str]:
    # Compiled on first use, not at import: only an NCCL WARN line with no return code needs it.
    return re.compile(
        r"\b(?:fail\w*|error\w*|abort\w*|timed? ?out|timeout|refused|closed|unable|cannot|invalid|mismatch\w*"
        r"|[Dd]uplicate|unhandled|not (?:found|supported|initialized)|no \w+ (?:found|available))\b",
        re.IGNORECASE,
    )


def nccl_warning_failed(raw: str, message: str, after: Sequence[str]) -> bool:
    """An NCCL WARN line reports a failed call: its return code unwinds below it, or it says so.

    The next line of the same process decides: `file.cc:N -> code` is the failure unwinding, any
    other INFO line means NCCL carried on (a fallback it announced as a warning).
    """
    own = _NCCL_PROCESS.search(raw)
    for line in after[:3]:
        if own is None or own.group(1) + ":" in line:
            if NCCL_UNWIND.search(line):
                return True
            if "NCCL INFO" in line:
                return False
    return _nccl_failure_words().search(message.split("NCCL WARN ", 1)[-1]) is not None


def nccl_fell_back(raw: str, after: Sequence[str]) -> bool:
    """After an NCCL WARN, the same process went on with ordinary INFO lines (warnings in between
    allowed) and no return code unwound: NCCL worked around what it warned about."""
    own = _NCCL_PROCESS.search(raw)
    if own is None or "NCCL WARN " not in raw:
        return False
    for line in after:
        if own.group(1) + ":" not in line or "NCCL WARN " in line:
            continue
        return "NCCL INFO" in line and not NCCL_UNWIND.search(line)
    return False


def unwound_warning(before: Sequence[str]) -> int | None:
    """How many lines above a report the NCCL WARN is whose return code unwinds down to it.

    ``before`` holds the lines above the report, nearest last. Only the unwinding (`file.cc:N ->
    code` INFO lines of the WARN's process) may stand between them: the report (nccl-tests' `Test
    NCCL failure common.cu:961 'internal error ...'`, torch's `NCCL error in: ...`) is where that
    return code surfaced, and the WARN said first what failed."""
    process: str | None = None
    for k, line in enumerate(reversed(before), 1):
        if not line.strip():
            continue
        own = _NCCL_PROCESS.search(line)
        if own is None or (process is not None and own.group(1) != process):
            return None
        process = own.group(1)
        if NCCL_UNWIND.search(line):
            continue
        return k if "NCCL WARN " in line and k > 1 else None
    return None


UNWOUND_REACH = 60  # lines above a traceback's exception where the WARN its opener unwinds from may be


def nccl_process(line: str) -> str | None:
    """The ``host:pid`` of an NCCL line's head, or None."""
    m = _NCCL_PROCESS.search(line)
    return m.group(1) if m else None


def unwinds_unannounced(texts: Sequence[str], i: int) -> bool:
    """Whether ``texts[i]`` is the first line of a return code unwinding (`file.cc:N -> 2`) whose
    process printed no WARN before it in ``texts``: the text starts after the WARN (a paste), and
    the unwinding is the first sign of the failed call."""
    line = texts[i]
    own = _NCCL_PROCESS.search(line)
    if own is None or not NCCL_UNWIND.search(line):
        return False
    process = own.group(1) + ":"
    earlier = [t for t in texts[:i] if process in t]
    if any("NCCL WARN " in t for t in earlier):
        return False
    return not (earlier and NCCL_UNWIND.search(earlier[-1]))
