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

from signatures.candidate import TIER_BENIGN, TIER_DOWNSTREAM, TIER_WRAPPER, Candidate
from signatures.lines import unwrap

# torch 1.9-1.10 wrote "Root Cause:", then "Other Failures:", and a "msg" field
_FIELD = re.compile(r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback|msg)\s*: ?(?P<value>.*?)\s*$")
_ENTRY = re.compile(r"^\s*\[\d+\]:\s*$")
_ROOT_CAUSE_HEAD = re.compile(r"^\s*Root Cause(?: \(first observed failure\))?:\s*$")
_FAILURES_HEAD = re.compile(r"^\s*(?:Other )?Failures:\s*$")
_SECTION_RULE = re.compile(r"^\s*-{20,}\s*$")  # between the Failures and Root Cause sections
_TABLE_END = re.compile(r"^\s*={20,}\s*$")
_RANK = re.compile(r"^(?P<rank>\d+) \(local_rank: \d+\)")
TABLE_REACH = 40  # lines from an entry's field to its section's head (blank lines in between)
ENTRY_REACH = 14  # lines of one entry (six fields, blank lines between them in some pastes)


def read_failure_tables(cands: list[Candidate]) -> None:
    """Every rule of torchrun's table, in order (each is below)."""
    demote_other_entries(cands)
    move_to_agent_records(cands)
    demote_later_root_causes(cands)
    demote_agent_kills(cands)


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


def demote_other_entries(cands: list[Candidate]) -> None:
    """torchrun's table: an entry under ``Failures:`` failed after its ``Root Cause`` entry."""
    fields = [c for c in cands if is_field(c.hit.text)]
    listed: list[Candidate] = []  # fields above the root-cause head, the lowest first
    for c in sorted(fields, key=lambda c: (c.hit.file_index, -c.hit.line)):
        # the head may lie past the lines kept below c: a field below it in the same section knows
        if listed_before_root_cause(c.hit.before, c.hit.text, c.hit.after) or any(
            x.hit.file_index == c.hit.file_index and same_table(x.hit.before, x.hit.line - c.hit.line)
            for x in listed
        ):
            listed.append(c)
    for c in listed:
        if c.tier < TIER_BENIGN:
            _later_entry(c)
    # of one entry, its exitcode line states the failure: the head above it and its other fields
    # (rank, the traceback field's signal) say the same of it and yield to that line
    statements = [c for c in fields if is_exit_field(c.hit.text)]
    for c in cands:
        near = [
            s
            for s in statements
            if s.hit.file_index == c.hit.file_index and abs(s.hit.line - c.hit.line) <= TABLE_REACH
        ]
        if (is_root_cause_head(c.hit.text) or (c in fields and c not in statements)) and near:
            c.yields = True
            if c.signature is None:  # a field no signature knows ("msg: ...") says no more than it
                c.tier = max(c.tier, min(s.tier for s in near))


_EXIT_VALUE = re.compile(r"^(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")


def move_to_agent_records(cands: list[Candidate]) -> None:
    """The agent logs each worker's death as it sees it (``failed (exitcode: -15) local_rank: 0
    (pid: 206843)``) before it prints its table: an entry's exitcode line that no signature knows
    repeats that record, which stated the death first (the same exit code and pid)."""
    for c in cands:
        if c.signature is not None or c.line != c.hit.line or not is_exit_field(c.hit.text):
            continue
        m = _EXIT_VALUE.match(entry_fields(c.hit.before, c.hit.text, c.hit.after).get("exitcode", ""))
        if m is None:
            continue
        said = (f"(exitcode: {m.group('code')})", f"(pid: {m.group('pid')})")
        records = [
            a
            for a in cands
            if a.hit.file_index == c.hit.file_index
            and a.line < c.line
            and not is_field(a.hit.text)
            and all(s in a.hit.text for s in said)
        ]
        if records:
            first = min(records, key=lambda a: a.line)
            c.line, c.text = first.line, first.text


def demote_later_root_causes(cands: list[Candidate]) -> None:
    """Several agents (nodes) print one failure table each: the root cause whose entry's ``time``
    is the earliest failed first; the other tables' entries report later failures."""
    timed = [
        (t, c)
        for c in cands
        if c.tier < TIER_BENIGN and (t := entry_time(c.hit.before, c.hit.text, c.hit.after))
    ]
    if len({t for t, _ in timed}) < 2:
        return
    first = min(t for t, _ in timed)
    for t, c in timed:
        if t > first:
            _later_entry(c)


_SIGNALLED = re.compile(r"^-\d+\b")  # an exit code that is a signal's number, negated


def demote_agent_kills(cands: list[Candidate]) -> None:
    """An entry whose rank died of a signal (exit code -9, -15) at a later time than another
    entry's failure was killed by the agent itself: once one worker fails, torchrun sends the
    others SIGTERM, then SIGKILL when they have not ended within its grace period. Its signal
    says nothing of the host (no OOM killer): it is the table's report of a tear-down."""
    timed = [
        (t, c, fields)
        for c in cands
        if (fields := entry_fields(c.hit.before, c.hit.text, c.hit.after)) and (t := fields.get("time"))
    ]
    for t, c, fields in timed:
        earlier = any(u < t and x.hit.file_index == c.hit.file_index for u, x, _ in timed)
        if earlier and _SIGNALLED.match(fields.get("exitcode", "")):  # any field of that entry
            c.tier, c.yields = max(c.tier, TIER_WRAPPER), True


def _later_entry(c: Candidate) -> None:
    # a later failure: a symptom beside the first; among the table's wrapper lines, after the first
    c.yields = True
    c.tier = max(c.tier, TIER_DOWNSTREAM)
