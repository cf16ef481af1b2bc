"""`denpex diagnose`: the engine on files or standard input, printed for a person or as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from signatures import Diagnosis, InputError, SignatureError, Source, diagnose
from signatures.folders import expand
from signatures.library import Library


def add_commands(sub: Any) -> None:
    """Register ``diagnose``."""
    p = sub.add_parser("diagnose", help="diagnose training logs (files, folders, .gz, .zip, or - for stdin)")
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="log files, flight-recorder dumps, or folders of them; '-' reads standard input",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the full report: one self-contained page with the rank timeline",
    )
    p.add_argument(
        "--context",
        type=non_negative_int,
        default=3,
        metavar="N",
        help="context lines around the initiating line (default: 3)",
    )
    p.add_argument(
        "--processes",
        type=positive_int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes for large inputs (default: one per core; small inputs always use one)",
    )
    p.add_argument(
        "--library", type=Path, metavar="DIR", help="a signature library folder (default: bundled)"
    )
    p.set_defaults(func=run_diagnose)


def non_negative_int(raw: str) -> int:
    """argparse type: 0, 1, 2, ..."""
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {raw!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def positive_int(raw: str) -> int:
    """argparse type: 1, 2, 3, ..."""
    value = non_negative_int(raw)
    if value == 0:
        raise argparse.ArgumentTypeError("expected 1 or more, got 0")
    return value


def fail(message: str) -> int:
    """Print ``denpex: message`` on standard error; exit code 2."""
    print(f"denpex: {message}", file=sys.stderr)
    return 2


def run_diagnose(args: argparse.Namespace) -> int:
    """Diagnose the given files as one incident; exit 2 on unreadable input."""
    try:
        # A folder stands for the files below it (per-rank logs, flight-recorder dumps).
        sources = [
            s
            for name in args.files
            for s in ([Source.from_stream("<stdin>", sys.stdin.buffer)] if name == "-" else expand([name]))
        ]
        library = Library.load(args.library) if args.library else None
        diagnosis = diagnose(sources, library=library, processes=args.processes)
    except InputError as exc:
        return fail(str(exc))
    except SignatureError as exc:
        return fail(str(exc))
    for note in diagnosis.skipped:  # on stderr: stdout stays the diagnosis (JSON with --json)
        print(f"denpex: skipped {note}", file=sys.stderr)
    if args.html is not None:
        failed = _write_html(diagnosis, args.html)
        if failed is not None:
            return failed
    if args.json:
        data = diagnosis.to_dict()
        if data["initiating"] is not None:
            n = args.context
            data["initiating"]["before"] = data["initiating"]["before"][-n:] if n else []
            data["initiating"]["after"] = data["initiating"]["after"][:n]
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    # Here, not at the top: rich loads only when a person reads the answer, never for --json.
    from bot.cli.terminal import console_for_output, print_diagnosis

    print_diagnosis(diagnosis, console_for_output(), context=args.context)
    return 0


def _write_html(d: Diagnosis, path: Path) -> int | None:
    """Write the report page; None when written, else the exit code (with the reason on stderr)."""
    # Here, not at the top: the template engine loads only for the command that needs it.
    from bot.pages.report import write_report
    from bot.pages.view import ReportInfo

    info = ReportInfo(generated_at=datetime.now(UTC), origin="denpex diagnose")
    try:
        size = write_report(d, path, info)
    except OSError as exc:
        return fail(f"cannot write {path}: {exc.strerror or exc}")
    # stderr: standard output stays the diagnosis (JSON with --json) for whatever reads it.
    print(f"denpex: wrote the report to {path} ({size / 1024:.0f} KiB)", file=sys.stderr)
    return None
