"""Where each shape of the timeline picture goes: plain numbers the template turns into SVG.

One column per event in order, one row per rank. Columns are evenly spaced rather than to scale:
a failure and the watchdogs ten minutes later would otherwise collide at one edge, so the time
between them is written under each column instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.pages.timeline import Event, Row, Timeline

WIDTH = 1000
LEFT = 104  # row labels
RIGHT = 16
HEAD = 112  # column headings
FOOT = 44  # times after the first failure, and the axis caption
CAPTIONS = {
    "time": "Columns in time order; times are after the first failure.",
    "line": "Columns in log-line order; times, where a line has one, are after the first failure.",
    "files": "Columns: the first failure, then each file's lines in order (these lines carry no times "
    "to order them across files).",
}
CHAR_W = 6.7  # a generous average width of a bold 11px sans character: cut rather than overlap


@dataclass(frozen=True)
class Column:
    x: float  # centre
    left: float
    width: float
    number: int
    role: str
    first_failure: bool
    heading: tuple[str, ...]  # the title, wrapped and cut to fit
    where: str  # "line 126 · rank 0"
    when: str  # the time of the first report, or ""
    delta: str  # "+9m 12s", or ""
    tooltip: str


@dataclass(frozen=True)
class Band:
    y: float
    height: float
    label: str
    show_label: bool
    rank_attr: str  # data-rank: "12", "8-15", or "none"
    first_failure: bool
    silent: bool
    stripe: bool


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    size: float
    role: str
    exact: bool
    first_failure: bool
    tooltip: str


@dataclass(frozen=True)
class Drawing:
    width: int
    height: float
    left: float
    right: float
    top: float
    bottom: float
    row_font: float
    columns: tuple[Column, ...]
    bands: tuple[Band, ...]
    dots: tuple[Dot, ...]
    caption: str


def draw(t: Timeline) -> Drawing | None:
    """The picture of ``t``; None when it has no events."""
    if not t.events:
        return None
    n_rows = len(t.rows)
    row_h = 14.0 if n_rows <= 32 else 11.0 if n_rows <= 64 else max(3.0, 720 / n_rows)
    top, plot_w = float(HEAD), WIDTH - LEFT - RIGHT
    bottom = top + row_h * n_rows
    col_w = plot_w / len(t.events)
    columns = tuple(_column(i, e, LEFT + i * col_w, col_w) for i, e in enumerate(t.events))
    marked = {m.row for m in t.markers}
    label_every = max(1, math.ceil(9 / row_h))
    bands = tuple(
        _band(
            i, r, top + i * row_h, row_h, show=i % label_every == 0 or r.first_failure, silent=i not in marked
        )
        for i, r in enumerate(t.rows)
    )
    size = min(4.6, row_h * 0.36)
    dots = []
    for m in t.markers:
        e, band = t.events[m.event], bands[m.row]
        first = e.first_failure and m.exact
        dots.append(
            Dot(
                x=columns[m.event].x,
                y=band.y + row_h / 2,
                size=size * (1.6 if first else 1.25 if m.exact else 1.0),
                role=e.role,
                exact=m.exact,
                first_failure=first,
                tooltip=_dot_tooltip(e, t.rows[m.row], m.exact),
            )
        )
    caption = CAPTIONS[t.order]
    return Drawing(
        width=WIDTH,
        height=bottom + FOOT,
        left=LEFT,
        right=WIDTH - RIGHT,
        top=top,
        bottom=bottom,
        row_font=min(10.0, max(6.0, row_h - 2)),
        columns=columns,
        bands=bands,
        dots=tuple(dots),
        caption=caption,
    )


def _column(i: int, e: Event, left: float, width: float) -> Column:
    chars = max(4, int((width - 14) / CHAR_W))
    where = f"line {e.line}" + (f" · rank {e.rank}" if e.rank is not None else "")
    return Column(
        x=left + width / 2,
        left=left,
        width=width,
        number=i + 1,
        role=e.role,
        first_failure=e.first_failure,
        heading=wrap(f"{i + 1}. {e.title}", chars, lines=3),
        where=clip(where, chars),
        when=clip(short_time(e.time), chars),
        delta=clip(delta_text(e.delta_s), chars),
        tooltip=f"{i + 1}. {e.title} ({e.role}) — {e.file}:{e.line}: {e.text}",
    )


def _band(i: int, r: Row, y: float, h: float, *, show: bool, silent: bool) -> Band:
    silent = silent and bool(r.ranks)
    attr = "none" if not r.ranks else str(r.ranks[0]) if len(r.ranks) == 1 else f"{r.ranks[0]}-{r.ranks[-1]}"
    return Band(y, h, r.label, show, attr, r.first_failure, silent, stripe=i % 2 == 1)


def _dot_tooltip(e: Event, r: Row, exact: bool) -> str:
    if exact:
        return f"{r.label}: {e.title} — printed {e.file}:{e.line}"
    return f"{r.label}: {e.title} — among the {e.count} lines of this group (first at line {e.line})"


def wrap(text: str, width: int, *, lines: int) -> tuple[str, ...]:
    """Greedy word wrap into at most ``lines`` lines; the last one is cut with an ellipsis."""
    out: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if len(candidate) <= width or not current:
            current = candidate
            continue
        out.append(current)
        current = word
    out.append(current)
    if len(out) > lines:
        out = [*out[: lines - 1], " ".join(out[lines - 1 :])]
    return tuple(clip(line, width) for line in out)


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)].rstrip() + "…"


def short_time(time: str | None) -> str:
    """'2024-09-11 17:52:18.030' or '11-29 03:16:53.482': no T, milliseconds at most."""
    if not time:
        return ""
    day, _, clock = time.partition("T")
    whole, dot, frac = clock.partition(".")
    clock = f"{whole}.{frac[:3]}" if dot else whole
    return f"{day} {clock}".strip()


def delta_text(seconds: float | None) -> str:
    """'+0s', '+850ms', '+12.3s', '+9m 12s', '+1h 04m' ('-' when before the first failure)."""
    if seconds is None:
        return ""
    sign = "-" if seconds < 0 else "+"
    s = abs(seconds)
    if s == 0:
        return "+0s"
    if s < 1:
        return f"{sign}{round(s * 1000)}ms"
    if s < 60:
        return f"{sign}{s:.1f}s".replace(".0s", "s")
    if s < 3600:
        return f"{sign}{int(s // 60)}m {int(s % 60):02d}s"
    return f"{sign}{int(s // 3600)}h {int(s % 3600 // 60):02d}m"
