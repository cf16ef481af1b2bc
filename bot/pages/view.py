"""What the report page shows, as plain values: a ``Diagnosis`` turned into ready-to-print text.

Everything taken from a log (lines, file names, hosts, environment values, the engine's reasons
that quote them) goes through ``redact`` once more here. The engine redacted it already; a page
that can be forwarded as a file must not depend on every producer having done so. Library text
(titles, fixes, checklists) is not redacted: it is ours, and ``TOKENIZERS_PARALLELISM=false`` is a
command, not a secret. Escaping is the template's job (autoescape).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.pages.drawing import Drawing, delta_text, draw, short_time
from bot.pages.timeline import Timeline, build_timeline
from signatures.diagnosis import Diagnosis, Status
from signatures.redact import redact

STATUS_LABELS = {
    Status.FAILURE: "Failure",
    Status.UNRECOGNIZED: "Unrecognized failure",
    Status.CLEAN: "No failure found",
}


@dataclass(frozen=True)
class ReportInfo:
    """Facts about the page itself rather than the diagnosis."""

    generated_at: datetime
    diagnosis_id: str | None = None
    origin: str | None = None  # "denpex diagnose", or where in Slack it was answered
    expires_at: datetime | None = None  # when the link that opened it stops working


@dataclass(frozen=True)
class ContextLine:
    number: int | None  # None when the window does not start where we think (a moved line)
    text: str
    initiating: bool = False


@dataclass(frozen=True)
class FirstFailure:
    label: str
    file: str
    line: int
    rank: int | None
    host: str | None
    time: str
    text: str
    context: tuple[ContextLine, ...]


@dataclass(frozen=True)
class Group:
    number: int  # its column in the timeline
    title: str
    signature_id: str | None
    role: str
    count: int
    ranks: str  # runs of ranks, as ranges() writes them
    n_ranks: int
    where: str
    first_rank: int | None
    when: str
    delta: str
    text: str


@dataclass(frozen=True)
class FixStep:
    step: str
    command: str | None
    why: str | None


@dataclass(frozen=True)
class ReportView:
    status: str
    status_label: str
    headline: str
    category: str | None
    signature_id: str | None
    confidence: int
    summary: str
    advice: str | None  # what to do with the job next, in one line
    first: FirstFailure | None
    glance: tuple[tuple[str, str], ...]
    timeline: Timeline
    drawing: Drawing | None
    silent: str  # ranks with no reported line, as ranges
    groups: tuple[Group, ...]
    why: tuple[str, ...]
    root_causes: tuple[str, ...]
    fix: tuple[FixStep, ...]
    decision_path: tuple[str, ...]
    checklist: tuple[str, ...]
    missing_facts: tuple[str, ...]
    related: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    files: tuple[str, ...]
    read: str
    info: ReportInfo
    title: str


def build_view(d: Diagnosis, info: ReportInfo) -> ReportView:
    """Everything the template prints, redacted."""
    timeline = build_timeline(d)
    drawing = draw(timeline)
    first = _first(d)
    groups = _groups(d, timeline)
    silent = ranges(r for row in timeline.silent_rows for r in row.ranks)
    return ReportView(
        status=d.status.value,
        status_label=STATUS_LABELS[d.status],
        headline=d.headline,
        category=d.signature.category if d.signature else None,
        signature_id=d.signature.id if d.signature else None,
        confidence=round(d.confidence * 100),
        summary=d.summary,
        advice=" ".join([d.advice.line, *d.advice.history]) if d.advice else None,
        first=first,
        glance=_glance(d, timeline, first, silent),
        timeline=timeline,
        drawing=drawing,
        silent=silent,
        groups=groups,
        why=tuple(redact(w) for w in d.why),
        root_causes=d.root_causes,
        fix=tuple(FixStep(s.get("step", ""), s.get("command"), s.get("why")) for s in d.fix),
        decision_path=d.decision_path,
        checklist=d.checklist,
        missing_facts=d.missing_facts,
        related=d.related,
        environment=tuple((redact(k), redact(v)) for k, v in sorted(d.environment.items())),
        files=tuple(redact(f) for f in d.files),
        read=_read(d),
        info=info,
        title=f"{d.headline} — Denpex report",
    )


def _first(d: Diagnosis) -> FirstFailure | None:
    ev = d.initiating
    if ev is None:
        return None
    start = ev.line - len(ev.before)
    lines = [
        *(ContextLine(start + i if start + i > 0 else None, redact(t)) for i, t in enumerate(ev.before)),
        ContextLine(ev.line, redact(ev.text), initiating=True),
        *(ContextLine(ev.line + 1 + i, redact(t)) for i, t in enumerate(ev.after)),
    ]
    return FirstFailure(
        label="Initiating line" if d.status is Status.FAILURE else "First error line",
        file=redact(ev.file),
        line=ev.line,
        rank=ev.rank,
        host=redact(ev.host) if ev.host else None,
        time=short_time(ev.time),
        text=redact(ev.text),
        context=tuple(lines),
    )


def _groups(d: Diagnosis, timeline: Timeline) -> tuple[Group, ...]:
    out = []
    for number, e in enumerate(timeline.events, 1):
        if e.group is None:
            continue
        g = d.downstream[e.group]
        out.append(
            Group(
                number=number,
                title=e.title,
                signature_id=g.signature.id if g.signature else None,
                role=g.role,
                count=g.count,
                ranks=ranges(g.ranks),
                n_ranks=len(g.ranks),
                where=f"{redact(g.first.file)}:{g.first.line}",
                first_rank=e.rank,
                when=short_time(e.time),
                delta=delta_text(e.delta_s),
                text=redact(g.first.text),
            )
        )
    return tuple(sorted(out, key=lambda g: g.number))


def _glance(
    d: Diagnosis, t: Timeline, first: FirstFailure | None, silent: str
) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    if first is not None:
        where = [f"{first.file}:{first.line}"]
        if first.rank is not None:
            where.insert(0, f"rank {first.rank}")
        if first.host:
            where.append(f"host {first.host}")
        if first.time:
            where.append(first.time)
        out.append(("First failure" if d.status is Status.FAILURE else "First error", " · ".join(where)))
    ranks = {r for row in t.rows for r in row.ranks}
    reported = {r for e in t.events for r in (*e.ranks, e.rank) if r is not None}
    if ranks:
        out.append(("Ranks that reported", f"{len(reported)} of {len(ranks)}"))
    if silent:
        out.append(("Ranks with no reported line", silent))
    if d.downstream:
        lines = sum(g.count for g in d.downstream)
        out.append(("Downstream", f"{lines:,} lines in {len(d.downstream)} groups"))
    last = max((e.delta_s for e in t.events if e.delta_s is not None), default=None)
    if last:
        out.append(
            ("Cascade span", delta_text(last).lstrip("+") + " from the first failure to the last report")
        )
    out.append(("Read", _read(d)))
    return tuple(out)


def _read(d: Diagnosis) -> str:
    files = len(d.files)
    return f"{d.lines_read:,} lines, {_size(d.bytes_read)} from {files} file{'s' if files != 1 else ''}"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def ranges(ranks: Iterable[int]) -> str:
    """'0-11, 13-63' (with en dashes) for a set of ranks: sorted, runs collapsed."""
    values: Sequence[int] = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}–{values[j]}")
        i = j + 1
    return ", ".join(parts)
