"""`denpex diagnose` and `denpex signatures ...`: the engine in a terminal."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from signatures import Diagnosis, InputError, Signature, SignatureError, Source, Status, diagnose
from signatures.docs import render_signatures_markdown
from signatures.engine import default_library
from signatures.library import Library
from signatures.loader import load_signatures
from signatures.scan import available_backends


def add_commands(sub: Any) -> None:
    p = sub.add_parser("diagnose", help="diagnose training logs (files, .gz, .zip, or - for stdin)")
    p.add_argument("files", nargs="+", metavar="FILE", help="log files; '-' reads standard input")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--context",
        type=int,
        default=3,
        metavar="N",
        help="context lines around the initiating line",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes for large inputs (default: one per core; small inputs always use one)",
    )
    p.add_argument(
        "--library", type=Path, metavar="DIR", help="a signature library folder (default: bundled)"
    )
    p.set_defaults(func=run_diagnose)

    sig = sub.add_parser("signatures", help="browse and check the signature library")
    sig_sub = sig.add_subparsers(dest="signatures_command", required=True)
    ls = sig_sub.add_parser("list", help="list signatures")
    ls.add_argument("--category", help="only this category")
    ls.set_defaults(func=run_list)
    show = sig_sub.add_parser("show", help="show one signature's full entry")
    show.add_argument("id")
    show.set_defaults(func=run_show)
    lint = sig_sub.add_parser("lint", help="validate every signature file; list every problem")
    lint.add_argument("--root", type=Path, help="library folder (default: the bundled one)")
    lint.set_defaults(func=run_lint)
    docs = sig_sub.add_parser("docs", help="write docs/signatures.md from the library")
    docs.add_argument("--output", type=Path, default=Path("docs/signatures.md"))
    docs.set_defaults(func=run_docs)


def _fail(message: str) -> int:
    print(f"denpex: {message}", file=sys.stderr)
    return 2


def run_diagnose(args: argparse.Namespace) -> int:
    """Diagnose the given files as one incident; exit 2 on unreadable input."""
    sources = [
        Source.from_stream("<stdin>", sys.stdin.buffer) if name == "-" else Source.from_path(name)
        for name in args.files
    ]
    try:
        library = Library.load(args.library) if args.library else None
        diagnosis = diagnose(sources, library=library, processes=max(args.processes, 1))
    except InputError as exc:
        return _fail(str(exc))
    except SignatureError as exc:
        return _fail(str(exc))
    if args.json:
        data = diagnosis.to_dict()
        if data["initiating"] is not None:
            n = max(args.context, 0)
            data["initiating"]["before"] = data["initiating"]["before"][-n:] if n else []
            data["initiating"]["after"] = data["initiating"]["after"][:n]
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    print_diagnosis(diagnosis, Console(), context=args.context)
    return 0


def print_diagnosis(d: Diagnosis, console: Console, *, context: int = 3) -> None:
    """Render a diagnosis for a terminal."""
    colour = {
        Status.FAILURE: "red",
        Status.UNRECOGNIZED: "yellow",
        Status.DEGRADED: "magenta",
        Status.CLEAN: "green",
        Status.EMPTY: "white",
    }[d.status]
    title = d.headline
    sub = f"{d.signature.category} · {d.signature.id} · " if d.signature else ""
    console.print(
        Panel(
            f"[bold]{escape(title)}[/bold]\n{escape(sub)}"
            f"status {d.status.value} · confidence {d.confidence:.2f}",
            border_style=colour,
            title="denpex",
        )
    )
    if d.summary:
        console.print(escape(d.summary))
    if d.initiating:
        i = d.initiating
        where = f"{i.file}:{i.line}"
        facts = [
            f"rank {i.rank}" if i.rank is not None else None,
            f"host {i.host}" if i.host else None,
            i.time,
        ]
        console.print(
            f"\n[bold]Where it started[/bold]  {escape(where)}  {escape(' · '.join(x for x in facts if x))}"
        )
        lines = [*(i.before[-context:] if context else ()), f"» {i.text}", *(i.after[:context])]
        console.print(Panel(escape("\n".join(lines)), border_style="dim"))
    if d.downstream:
        console.print("[bold]What followed[/bold]")
        for g in d.downstream:
            name = g.signature.title if g.signature else "unrecognized error lines"
            if d.signature and g.signature and g.signature.id == d.signature.id:
                name = "the same failure, printed again"
            ranks = f" (ranks {_ranks(g.ranks)})" if g.ranks else ""
            console.print(f"  • {g.count}× {escape(name)} [dim]{g.role}[/dim]{escape(ranks)}")
    _section(console, "Why this line", d.why)
    _section(console, "Root causes", d.root_causes)
    if d.fix:
        console.print("\n[bold]Fix[/bold]")
        for step in d.fix:
            console.print(f"  • {escape(step['step'])}")
            if step.get("command"):
                console.print(f"      [cyan]{escape(step['command'])}[/cyan]")
            if step.get("why"):
                console.print(f"      [dim]{escape(step['why'])}[/dim]")
    _section(console, "Decision path", d.decision_path, numbered=True)
    _section(console, "Checklist", d.checklist)
    _section(console, "What I still need", d.missing_facts)
    if d.environment:
        console.print(
            "\n[bold]Environment[/bold]  " + escape(", ".join(f"{k} {v}" for k, v in d.environment.items()))
        )
    if d.related:
        console.print("\n[bold]Related[/bold]  " + escape(", ".join(d.related)))
    console.print(
        f"\n[dim]{d.lines_read:,} lines, {d.bytes_read / 1e6:.1f} MB read from {len(d.files)} file(s)[/dim]"
    )


def _section(console: Console, title: str, items: tuple[str, ...], *, numbered: bool = False) -> None:
    if not items:
        return
    console.print(f"\n[bold]{title}[/bold]")
    for n, item in enumerate(items, 1):
        console.print(f"  {f'{n}.' if numbered else '•'} {escape(item)}")


def _ranks(ranks: tuple[int, ...]) -> str:
    return ", ".join(map(str, ranks[:10])) + (f" +{len(ranks) - 10}" if len(ranks) > 10 else "")


def _library_or_fail() -> list[Signature] | None:
    try:
        return default_library().signatures
    except SignatureError as exc:
        _fail(str(exc))
        return None


def run_list(args: argparse.Namespace) -> int:
    signatures = _library_or_fail()
    if signatures is None:
        return 2
    chosen = [s for s in signatures if not args.category or s.category == args.category]
    if not chosen:
        return _fail(f"no signatures in category {args.category!r}")
    rows = sorted(chosen, key=lambda s: (s.category, s.id))
    console = Console()
    if not console.is_terminal:  # piped: one tab-separated line per signature, never cut
        for s in rows:
            print(f"{s.id}\t{s.category}\t{s.role.value}\t{s.title}")
        return 0
    table = Table("id", "category", "role", "title")
    for s in rows:
        table.add_row(s.id, s.category, s.role.value, s.title)
    console.print(table)
    counts = Counter(s.category for s in chosen)
    Console().print(", ".join(f"{c}: {n}" for c, n in sorted(counts.items())) + f" · {len(chosen)} in all")
    return 0


def run_show(args: argparse.Namespace) -> int:
    signatures = _library_or_fail()
    if signatures is None:
        return 2
    by_id = {s.id: s for s in signatures}
    sig = by_id.get(args.id)
    if sig is None:
        return _fail(f"no signature {args.id!r}; `denpex signatures list` shows them")
    console = Console()
    console.print(
        Panel(
            f"[bold]{escape(sig.title)}[/bold]\n"
            f"{sig.id} · {sig.category} · {sig.role.value} · {sig.severity.value}"
        )
    )
    console.print(escape(sig.summary))
    console.print(f"\n[bold]Mechanism[/bold]\n{escape(sig.mechanism)}")
    console.print("\n[bold]Fingerprints[/bold]")
    for fp in sig.fingerprints:
        kind = "literal" if fp.literal is not None else "regex"
        console.print(
            f"  • {kind}: [cyan]{escape(fp.text)}[/cyan]"
            + (f" [dim]({escape(fp.versions)})[/dim]" if fp.versions else "")
        )
    _section(console, "What you will observe", sig.observed)
    _section(console, "Root causes", sig.root_causes)
    _section(console, "How to confirm it", sig.confirm)
    console.print("\n[bold]Fix[/bold]")
    for step in sig.fix:
        console.print(
            f"  • {escape(step.step)}"
            + (f"\n      [cyan]{escape(step.command)}[/cyan]" if step.command else "")
        )
    _section(console, "Prevention", sig.prevention)
    _section(console, "Decision path", tuple(sig.decision_path.steps()), numbered=True)
    _section(
        console,
        "Missing facts to ask for",
        tuple(f"{m.ask} (when {m.when})" for m in sig.missing_facts),
    )
    _section(
        console,
        "Questions engineers ask next",
        tuple(f"{f.question} — {f.answer}" for f in sig.follow_ups),
    )
    _section(console, "Related", sig.related)
    _section(console, "References", sig.references)
    return 0


def run_lint(args: argparse.Namespace) -> int:
    """Validate the library and compile it with every scanning backend installed here."""
    try:
        signatures = load_signatures(args.root)
        for backend in available_backends():
            Library(signatures, backend=backend, root=args.root).compile()
    except SignatureError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"{len(signatures)} signatures, no problems (checked with {', '.join(available_backends())})")
    return 0


def run_docs(args: argparse.Namespace) -> int:
    signatures = _library_or_fail()
    if signatures is None:
        return 2
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render_signatures_markdown(signatures), encoding="utf-8")
    print(f"wrote {args.output} ({len(signatures)} signatures)")
    return 0


__all__ = ["add_commands", "print_diagnosis"]
