"""A diagnosis printed for a person: rich panels on a terminal, plain unwrapped lines in a pipe.

In a terminal long items wrap with hanging indents under their bullet; piped output is never
hard-wrapped (a reader or ``grep`` gets one item per line) and carries no colour codes.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table

from signatures import Diagnosis, Status
from signatures.diagnosis import DownstreamGroup
from signatures.display import human_time, rank_list

COLOURS = {
    "failure": "red",
    "unrecognized": "yellow",
    "degraded": "magenta",
    "clean": "green",
    "empty": "white",
}


def console_for_output() -> Console:
    """A console for standard output: soft-wrapped, without colour when piped."""
    probe = Console()
    if probe.is_terminal:
        return probe
    return Console(soft_wrap=True, no_color=True, highlight=False, emoji=False)


class Printer:
    """Headings, bullets and code for one console; the markup is escaped here, once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.piped = not console.is_terminal

    def heading(self, title: str, rest: str = "") -> None:
        tail = f"  {escape(rest)}" if rest else ""
        self.console.print(f"\n[bold]{escape(title)}[/bold]{tail}")

    def text(self, text: str) -> None:
        self.console.print(escape(text))

    def bullets(self, items: tuple[str, ...] | list[str], *, numbered: bool = False) -> None:
        for n, item in enumerate(items, 1):
            self.bullet(f"{n}." if numbered else "•", item)

    def bullet(self, mark: str, text: str, *, extra: tuple[tuple[str, str], ...] = ()) -> None:
        """``mark text``, then ``extra`` (style, text) lines indented under the text."""
        if self.piped:
            self.console.print(f"  {mark} {escape(text)}")
            for _style, line in extra:
                self.console.print(f"      {escape(line)}")
            return
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row(mark, escape(text))
        for style, line in extra:
            grid.add_row("", f"[{style}]{escape(line)}[/{style}]")
        self.console.print(Padding(grid, (0, 0, 0, 2)))

    def code(self, lines: list[str]) -> None:
        body = escape("\n".join(lines))
        if self.piped:
            for line in body.split("\n"):
                self.console.print(f"    {line}")
        else:
            self.console.print(Panel(body, border_style="dim"))


def print_diagnosis(d: Diagnosis, console: Console, *, context: int = 3) -> None:
    """Render a diagnosis for a terminal (or a pipe)."""
    out = Printer(console)
    _headline(d, out)
    if d.summary:
        out.text(d.summary)
    if d.advice:  # right under the headline: at 3 a.m. the question is whether to requeue
        out.heading("What to do next", f"{d.advice.decision.value} · confidence {d.advice.confidence:.2f}")
        out.text(d.advice.line)
        out.bullets(d.advice.history)
    if d.initiating:
        i = d.initiating
        facts = [
            f"rank {i.rank}" if i.rank is not None else None,
            f"host {i.host}" if i.host else None,
            human_time(i.time),
        ]
        out.heading("Where it started", f"{i.file}:{i.line}  " + " · ".join(x for x in facts if x))
        out.code([*(i.before[-context:] if context else ()), f"» {i.text}", *(i.after[:context])])
    if d.downstream:
        out.heading("What followed")
        for g in d.downstream:
            out.bullet("•", downstream_text(d, g))
    if d.why:
        out.heading("Why this line")
        out.bullets(d.why)
    if d.root_causes:
        out.heading("Root causes")
        out.bullets(d.root_causes)
    if d.fix:
        out.heading("Fix")
        for step in d.fix:
            extra = tuple(
                (style, step[key]) for key, style in (("command", "cyan"), ("why", "dim")) if step.get(key)
            )
            out.bullet("•", step["step"], extra=extra)
    for title, items, numbered in (
        ("Decision path", d.decision_path, True),
        ("Checklist", d.checklist, False),
        ("What I still need", d.missing_facts, False),
    ):
        if items:
            out.heading(title)
            out.bullets(items, numbered=numbered)
    if d.environment:
        out.heading("Environment", ", ".join(f"{k} {v}" for k, v in d.environment.items()))
    if d.related:
        out.heading("Related", ", ".join(d.related))
    console.print(
        f"\n[dim]{d.lines_read:,} lines, {d.bytes_read / 1e6:.1f} MB read from {len(d.files)} file(s)[/dim]"
    )


def downstream_text(d: Diagnosis, g: DownstreamGroup) -> str:
    """``63x NCCL watchdog timed out (downstream; ranks 0, 1, ... +53)``: role kept apart from
    the title so the two never run together."""
    name = g.signature.title if g.signature else "unrecognized error lines"
    if d.signature and g.signature and g.signature.id == d.signature.id:
        name = "the same failure, printed again"
    detail = [g.role]
    if g.ranks:
        detail.append(f"ranks {rank_list(g.ranks)}")
    count = f"at least {g.count}" if g.capped else str(g.count)
    return f"{count}× {name} ({'; '.join(detail)})"


def _headline(d: Diagnosis, out: Printer) -> None:
    sub = f"{d.signature.category} · {d.signature.id} · " if d.signature else ""
    facts = f"{sub}status {d.status.value} · confidence {d.confidence:.2f}"
    if out.piped:
        out.console.print(f"{escape(d.headline)}\n{escape(facts)}")
        return
    colour = COLOURS.get(d.status.value, "yellow" if d.status is not Status.CLEAN else "green")
    out.console.print(
        Panel(f"[bold]{escape(d.headline)}[/bold]\n{escape(facts)}", border_style=colour, title="denpex")
    )
