"""torchrun's failure table: which entry is the first failure, and what one entry says.

The elastic agent ends a failed run with a table between ``====`` rules: a ``Failures:`` section
listing the other failed ranks, then ``Root Cause (first observed failure):`` with one entry. Each
entry is ``[N]:`` followed by ``time``, ``host``, ``rank``, ``exitcode``, ``error_file`` and
``traceback`` fields. A paste often starts in the middle of the ``Failures:`` section, and a log of
several nodes holds one table per agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.lines import unwrap

_FIELD = re.compile(r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*?)\s*$")
_ENTRY = re.compile(r"^\s*\[\d+\]:\s*$")
_ROOT_CAUSE_HEAD = re.compile(r"^\s*Root Cause \(first observed failure\):\s*$")
_FAILURES_HEAD = re.compile(r"^\s*Failures:\s*$")
_SECTION_RULE = re.compile(r"^\s*-{20,}\s*$")  # between the Failures and Root Cause sections
_TABLE_END = re.compile(r"^\s*={20,}\s*$")
_RANK = re.compile(r"^(?P<rank>\d+) \(local_rank: \d+\)")
TABLE_REACH = 40  # lines from an entry's field to its section's head (blank lines in between)
ENTRY_REACH = 14  # lines of one entry (six fields, blank lines between them in some pastes)


def is_field(text: str) -> bool:
    """The line is a field of an entry (`  exitcode  : -7 (pid: 5063)`)."""
    return _FIELD.match(unwrap(text).message) is not None


def listed_before_root_cause(before: Sequence[str], text: str, after: Sequence[str]) -> bool:
    """A field of an entry under ``Failures:``: the table's root-cause entry follows below it,
    so this entry failed after that one (torchrun prints the other failures first)."""
    if not is_field(text):
        return False
    for line in after[:TABLE_REACH]:
        message = unwrap(line).message
        if _ROOT_CAUSE_HEAD.match(message):
            return True
        if _TABLE_END.match(message) or _FAILURES_HEAD.match(message):
            return False
    return False


def entry_fields(before: Sequence[str], text: str, after: Sequence[str]) -> dict[str, str]:
    """The fields of the entry the field line ``text`` belongs to (empty when it is no field)."""
    if not is_field(text):
        return {}
    lines: list[str] = []
    for line in reversed(before[-ENTRY_REACH:]):
        message = unwrap(line).message
        if _ENTRY.match(message) or not (is_field(line) or not message.strip()):
            break
        lines.append(message)
    lines.reverse()
    lines.append(unwrap(text).message)
    for line in after[:ENTRY_REACH]:
        message = unwrap(line).message
        if not (is_field(line) or not message.strip()):
            break
        lines.append(message)
    fields: dict[str, str] = {}
    for message in lines:
        if (m := _FIELD.match(message)) is not None:
            fields.setdefault(m.group("key"), m.group("value"))
    return fields


def entry_rank(before: Sequence[str], text: str, after: Sequence[str]) -> int | None:
    """The global rank the entry's ``rank :`` field names."""
    m = _RANK.match(entry_fields(before, text, after).get("rank", ""))
    return int(m.group("rank")) if m else None


def entry_time(before: Sequence[str], text: str, after: Sequence[str]) -> str | None:
    """The entry's ``time :`` field (`2023-06-03_22:45:01`), which sorts as text."""
    return entry_fields(before, text, after).get("time") or None


def same_table(before: Sequence[str], lines_up: int) -> bool:
    """The line ``lines_up`` lines above a later line (whose ``before`` this is) is in the same
    section of the same table: no table end, ``Failures:`` or root-cause head in between."""
    if not 0 < lines_up <= len(before):
        return False
    for line in before[len(before) - lines_up + 1 :]:
        message = unwrap(line).message
        if _TABLE_END.match(message) or _FAILURES_HEAD.match(message) or _ROOT_CAUSE_HEAD.match(message):
            return False
    return True


def is_exit_field(text: str) -> bool:
    """The entry's ``exitcode :`` field: the line of an entry that states its failure."""
    m = _FIELD.match(unwrap(text).message)
    return m is not None and m.group("key") == "exitcode"


def is_root_cause_head(text: str) -> bool:
    return _ROOT_CAUSE_HEAD.match(unwrap(text).message) is not None
