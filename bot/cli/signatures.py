"""`denpex signatures ...`: browse, check and document the signature library."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from bot.cli.diagnose import fail
from bot.cli.terminal import Printer, console_for_output
from signatures import Signature, SignatureError
from signatures.docs import render_signatures_markdown
from signatures.engine import default_library
from signatures.library import Library
from signatures.loader import load_signatures
from signatures.scan import available_backends


def add_commands(sub: Any) -> None:
    """Register ``signatures list|show|lint|docs``."""
    sig = sub.add_parser("signatures", help="browse and check the signature library")
    sig_sub = sig.add_subparsers(dest="signatures_command", required=True, metavar="COMMAND")
    ls = sig_sub.add_parser("list", help="list signatures")
    ls.add_argument("--category", help="only this category")
    ls.set_defaults(func=run_list)
    show = sig_sub.add_parser("show", help="show one signature's full entry")
    show.add_argument("id")
    show.set_defaults(func=run_show)
    lint = sig_sub.add_parser("lint", help="validate every signature file; list every problem")
    lint.add_argument("--root", type=Path, help="library folder (default: the bundled one)")
    lint.set_defaults(func=run_lint)
    docs = sig_sub.add_parser("docs", help="the library as a Markdown page (standard output, or --output)")
    docs.add_argument("--output", type=Path, metavar="FILE", help="write the page to FILE instead")
    docs.set_defaults(func=run_docs)


def did_you_mean(wanted: str, known: list[str]) -> str:
    """`` (did you mean nccl-watchdog-timeout?)`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(wanted.lower(), known, n=3, cutoff=0.6)
    if not close:
        close = [k for k in known if wanted.lower() in k][:3]
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _library_or_fail() -> list[Signature] | None:
    try:
        return default_library().signatures
    except SignatureError as exc:
        fail(str(exc))
        return None


def run_list(args: argparse.Namespace) -> int:
    signatures = _library_or_fail()
    if signatures is None:
        return 2
    chosen = [s for s in signatures if not args.category or s.category == args.category]
    if not chosen:
        categories = sorted({s.category for s in signatures})
        hint = did_you_mean(args.category, categories) or f"; categories: {', '.join(categories)}"
        return fail(f"no signatures in category {args.category!r}{hint}")
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
        hint = did_you_mean(args.id, sorted(by_id))
        return fail(f"no signature {args.id!r}{hint or '; `denpex signatures list` shows them'}")
    out = Printer(console_for_output())
    head = f"{sig.id} · {sig.category} · {sig.role.value} · {sig.severity.value}"
    if out.piped:
        out.text(f"{sig.title}\n{head}")
    else:
        out.console.print(Panel(f"[bold]{escape(sig.title)}[/bold]\n{escape(head)}"))
    out.text(sig.summary)
    out.heading("If it ends a job", sig.restart.cls.value)
    out.text(sig.restart.reason)
    out.heading("Mechanism")
    out.text(sig.mechanism)
    out.heading("Fingerprints")
    for fp in sig.fingerprints:
        kind = "literal" if fp.literal is not None else "regex"
        out.bullet("•", f"{kind}: {fp.text}" + (f" ({fp.versions})" if fp.versions else ""))
    sections: list[tuple[str, tuple[str, ...], bool]] = [
        ("What you will observe", sig.observed, False),
        ("Root causes", sig.root_causes, False),
        ("How to confirm it", sig.confirm, False),
    ]
    for title, items, numbered in sections:
        _titled(out, title, items, numbered=numbered)
    out.heading("Fix")
    for step in sig.fix:
        out.bullet("•", step.step, extra=(("cyan", step.command),) if step.command else ())
    for title, items, numbered in (
        ("Prevention", sig.prevention, False),
        ("Decision path", tuple(sig.decision_path.steps()), True),
        ("Missing facts to ask for", tuple(f"{m.ask} (when {m.when})" for m in sig.missing_facts), False),
        ("Questions engineers ask next", tuple(f"{f.question} — {f.answer}" for f in sig.follow_ups), False),
        ("Related", sig.related, False),
        ("References", sig.references, False),
    ):
        _titled(out, title, items, numbered=numbered)
    return 0


def _titled(out: Printer, title: str, items: tuple[str, ...], *, numbered: bool = False) -> None:
    if items:
        out.heading(title)
        out.bullets(items, numbered=numbered)


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
    page = render_signatures_markdown(signatures)
    if args.output is None:
        sys.stdout.write(page)
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(page, encoding="utf-8")
    print(f"wrote {args.output} ({len(signatures)} signatures)", file=sys.stderr)
    return 0
