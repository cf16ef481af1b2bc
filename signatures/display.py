"""How evidence facts read to a person: times at a glance, long rank lists shortened.

The JSON form keeps the engine's exact values; these helpers are for terminals, Slack and pages.
"""

from __future__ import annotations

import re
from datetime import datetime

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# glog stamps carry no year: the engine keeps them as "MM-DDTHH:MM:SS.fraction".
_YEARLESS = re.compile(r"^(\d\d)-(\d\d)T(\d\d:\d\d:\d\d)(?:\.(\d+))?$")


def human_time(value: str | None) -> str | None:
    """``2024-09-11 17:52:18.030 UTC`` or ``Sep 9 09:55:29.307 (no year in the log)``."""
    if not value:
        return None
    yearless = _YEARLESS.match(value)
    if yearless:
        month, day, clock, fraction = yearless.groups()
        if not 1 <= int(month) <= 12:
            return value
        millis = f".{(fraction or '000')[:3].ljust(3, '0')}"
        return f"{_MONTHS[int(month) - 1]} {int(day)} {clock}{millis} (no year in the log)"
    try:
        # fromisoformat takes at most six fraction digits, and people read milliseconds.
        stamp = datetime.fromisoformat(re.sub(r"(\.\d{3})\d+", r"\1", value).replace("Z", "+00:00"))
    except ValueError:
        return value
    text = stamp.strftime("%Y-%m-%d %H:%M:%S")
    if stamp.microsecond:
        text += f".{stamp.microsecond // 1000:03d}"
    if stamp.tzinfo is not None:
        offset = stamp.utcoffset()
        text += " UTC" if offset is not None and not offset else stamp.strftime(" %z")
    return text


def rank_list(ranks: tuple[int, ...] | list[int], shown: int = 10) -> str:
    """``0, 1, 2 +61``: the first ``shown`` ranks and how many more."""
    head = ", ".join(map(str, ranks[:shown]))
    return head + (f" +{len(ranks) - shown}" if len(ranks) > shown else "")
