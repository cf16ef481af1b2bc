"""The rank timeline of a diagnosis: which rank reported what, in which order.

Built only from what a stored diagnosis keeps: the initiating line (its rank, line and time) and,
per downstream group, the ranks that printed it and the group's first line. The rank and time of
a group's first line are read back from its text with the engine's own prefix parser, because the
stored form keeps only the text. A diagnosis does not keep where each rank printed its own line,
so a rank's marker sits in its group's column; only the rank that printed the group's first line
is known exactly (``Marker.exact``). Log text in events is redacted (see ``bot.pages.view``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from signatures.diagnosis import Diagnosis, Evidence
from signatures.lines import time_key, unwrap
from signatures.redact import redact

MAX_ROWS = 256  # more ranks than this share rows (ranks 0-7, 8-15, ...) so the picture stays legible
MAX_WORLD = 1 << 16  # a world_size above this is a parsing accident, not a job


@dataclass(frozen=True)
class Event:
    """One column: the initiating line, or one downstream group's first report."""

    role: str  # initiating, downstream, wrapper, unknown, benign
    title: str
    file: str
    line: int
    text: str
    time: str | None
    rank: int | None  # the rank that printed this very line
    ranks: tuple[int, ...]  # every rank that printed the group's lines
    count: int
    first_failure: bool = False
    delta_s: float | None = None  # seconds after the first failure, when both times are comparable
    group: int | None = None  # index into Diagnosis.downstream; None for the initiating line


@dataclass(frozen=True)
class Row:
    """One rank (or, for very large jobs, a band of ranks), or the row of lines without a rank."""

    ranks: tuple[int, ...]  # empty: the "no rank" row (launcher and agent lines)
    first_failure: bool = False

    @property
    def label(self) -> str:
        if not self.ranks:
            return "no rank"
        if len(self.ranks) == 1:
            return f"rank {self.ranks[0]}"
        return f"ranks {self.ranks[0]}–{self.ranks[-1]}"


@dataclass(frozen=True)
class Marker:
    event: int  # index into Timeline.events
    row: int  # index into Timeline.rows
    exact: bool  # this row printed the event's own line (else: one of the group's ranks)


@dataclass(frozen=True)
class Timeline:
    events: tuple[Event, ...]
    rows: tuple[Row, ...]
    markers: tuple[Marker, ...]
    order: str  # "time" (every event has a comparable time), "line" (one file), else "files"

    @property
    def silent_rows(self) -> tuple[Row, ...]:
        """Rank rows without any marker: no line of theirs was reported."""
        marked = {m.row for m in self.markers}
        return tuple(r for i, r in enumerate(self.rows) if i not in marked and r.ranks)

    @property
    def first(self) -> Event | None:
        return next((e for e in self.events if e.first_failure), None)


def build_timeline(d: Diagnosis) -> Timeline:
    """The timeline of ``d``; empty when there is nothing to place."""
    events = _events(d)
    if not events:
        return Timeline((), (), (), "line")
    files = {redact(name): i for i, name in enumerate(d.files)}
    if _comparable([e.time for e in events]):
        order = "time"
        events.sort(key=lambda e: (time_key(e.time), files.get(e.file, len(files)), e.line))
    elif len({e.file for e in events}) == 1:
        order = "line"
        events.sort(key=lambda e: e.line)
    else:
        # Lines of different files without comparable times have no known order between them:
        # the engine's verdict (the first failure) leads, then each file's lines in turn.
        order = "files"
        events.sort(key=lambda e: (not e.first_failure, files.get(e.file, len(files)), e.line))
    events = _with_deltas(events)
    rows = _rows(d, events)
    return Timeline(tuple(events), rows, _markers(events, rows), order)


def _events(d: Diagnosis) -> list[Event]:
    out: list[Event] = []
    sig_id = d.signature.id if d.signature else None
    if d.initiating is not None:
        ev = d.initiating
        out.append(
            Event(
                role="initiating",
                title=d.signature.title if d.signature else "First error line",
                file=redact(ev.file),
                line=ev.line,
                text=redact(ev.text),
                time=ev.time or unwrap(ev.text).time,
                rank=ev.rank,
                ranks=(ev.rank,) if ev.rank is not None else (),
                count=1,
                first_failure=True,
            )
        )
    for n, g in enumerate(d.downstream):
        rank, time = _facts(g.first)
        same = g.signature is not None and g.signature.id == sig_id
        title = g.signature.title if g.signature else "Unrecognized error lines"
        out.append(
            Event(
                role=g.role,
                title="Same failure, printed again" if same else title,
                file=redact(g.first.file),
                line=g.first.line,
                text=redact(g.first.text),
                time=time,
                rank=rank,
                ranks=g.ranks,
                count=g.count,
                group=n,
            )
        )
    return out


def _facts(ev: Evidence) -> tuple[int | None, str | None]:
    """Rank and time of an evidence line: as stored, else read from its prefixes."""
    if ev.rank is not None and ev.time is not None:
        return ev.rank, ev.time
    facts = unwrap(ev.text)
    return (ev.rank if ev.rank is not None else facts.rank), ev.time or facts.time


def _comparable(times: list[str | None]) -> bool:
    keys = [time_key(t) for t in times]
    return all(k is not None for k in keys) and len({k[0] for k in keys if k is not None}) == 1


def _with_deltas(events: list[Event]) -> list[Event]:
    first = next((e for e in events if e.first_failure), events[0])
    out = []
    for e in events:
        if _comparable([first.time, e.time]):
            a, b = time_key(first.time), time_key(e.time)
            assert a is not None and b is not None  # _comparable checked both
            e = replace(e, delta_s=b[1] - a[1])
        out.append(e)
    return out


def _world_size(d: Diagnosis) -> int | None:
    raw = d.environment.get("world_size", "")
    return int(raw) if raw.isdigit() and 0 < int(raw) <= MAX_WORLD else None


def _rows(d: Diagnosis, events: list[Event]) -> tuple[Row, ...]:
    seen = {r for e in events for r in (*e.ranks, e.rank) if r is not None}
    # Ranks are numbered from 0 by every launcher: a gap is a rank that printed nothing we kept.
    top = max(seen, default=-1) + 1
    world = max(_world_size(d) or 0, top)
    first = next((e.rank for e in events if e.first_failure), None)
    band = max(1, math.ceil(world / MAX_ROWS))
    rows = [
        Row(
            tuple(range(start, min(start + band, world))), first is not None and start <= first < start + band
        )
        for start in range(0, world, band)
    ]
    if any(e.rank is None and not e.ranks for e in events):
        rows.append(Row((), first_failure=any(e.first_failure and e.rank is None for e in events)))
    return tuple(rows)


def _markers(events: list[Event], rows: tuple[Row, ...]) -> tuple[Marker, ...]:
    band = len(rows[0].ranks) if rows and rows[0].ranks else 1
    rank_rows = sum(1 for r in rows if r.ranks)
    no_rank_row = len(rows) - 1 if rows and not rows[-1].ranks else None
    out: list[Marker] = []
    for i, e in enumerate(events):
        exact_row = e.rank // band if e.rank is not None else None
        placed = {r // band for r in e.ranks if r // band < rank_rows}
        if exact_row is not None and exact_row < rank_rows:
            placed.add(exact_row)
        for row in sorted(placed):
            out.append(Marker(i, row, exact=row == exact_row))
        if not placed and no_rank_row is not None:
            out.append(Marker(i, no_rank_row, exact=True))
    return tuple(out)
