"""``denpex advise``: what a scheduler should do with a failed job, as an exit code and hosts.

Meant for a Slurm epilog or a Kubernetes controller: the exit status is the decision (0 restart,
3 restart without the printed hosts, 4 stop, 5 investigate), standard output says the same in
``key: value`` lines a shell can read, or one JSON object with ``--json``. The advice is the
engine's alone: the history rules (the same failure twice on one job, a host failing across jobs)
need the server's store; ``denpex report --wait --exit-code-advice`` gets the server's advice.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.cli.diagnose import fail
from signatures import Diagnosis, InputError, SignatureError, Source, diagnose
from signatures.advice import Advice, Decision, advise
from signatures.engine import default_library
from signatures.library import Library

EXIT_CODES = {Decision.RESTART: 0, Decision.RESTART_EXCLUDING: 3, Decision.STOP: 4, Decision.INVESTIGATE: 5}
# No failure in the log (clean, empty, or a run that kept going): nothing a restart answers, so
# a scheduler must not act on its own; the same code as investigate.
EXIT_NO_ADVICE = 5
NO_ADVICE_LINE = (
    "No failure found in the log, so there is nothing to restart or stop: look at the scheduler's "
    "record of the job (sacct, kubectl describe) for why it ended."
)
EXIT_HELP = (
    "exit status: 0 restart from the last checkpoint, 3 restart without the hosts on the "
    "'exclude:' line, 4 stop retrying, 5 investigate (also when the log shows no failure), "
    "2 input it cannot read"
)


def add_commands(sub: Any) -> None:
    """Register ``advise``."""
    p = sub.add_parser(
        "advise",
        help="restart, restart without a host, or stop: advice for a scheduler, as the exit status",
        description="Diagnose LOG files and say what to do with the job next.",
        epilog=EXIT_HELP,
    )
    p.add_argument("files", nargs="+", metavar="LOG", help="log files; '-' reads standard input")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--host",
        metavar="NAME",
        help="the host the log came from, used when the log names none (a one-node job's node)",
    )
    p.add_argument("--library", type=Path, metavar="DIR", help="a signature library folder")
    p.set_defaults(func=run_advise)


def exit_code(advice: Advice | None) -> int:
    """The exit status for ``advice`` (None: no failure to advise on)."""
    return EXIT_NO_ADVICE if advice is None else EXIT_CODES[advice.decision]


def with_host(d: Diagnosis, host: str, library: Library) -> Diagnosis:
    """``d`` advised as if its initiating line named ``host`` (only when it named none)."""
    if d.initiating is None or d.initiating.host or d.signature is None:
        return d
    sig = library.by_id.get(d.signature.id)
    restart = sig.restart if sig else None
    return replace(d, advice=advise(restart, status=d.status.value, confidence=d.confidence, host=host))


def print_advice(advice: Advice | None, *, out: Any = None) -> None:
    """``decision:``, ``exclude:`` (comma-separated, as ``--exclude`` takes it), ``confidence:``,
    then the advice in one sentence and what history added."""
    out = out or sys.stdout
    if advice is None:
        print(f"decision: none\n{NO_ADVICE_LINE}", file=out)
        return
    print(f"decision: {advice.decision.value}", file=out)
    if advice.exclude_hosts:
        print(f"exclude: {','.join(advice.exclude_hosts)}", file=out)
    print(f"confidence: {advice.confidence:.2f}", file=out)
    print(advice.line, file=out)
    for note in advice.history:
        print(f"history: {note}", file=out)


def run_advise(args: argparse.Namespace) -> int:
    """Diagnose, then print the advice; the exit status is the decision (2: unreadable input)."""
    sources = [
        Source.from_stream("<stdin>", sys.stdin.buffer) if name == "-" else Source.from_path(name)
        for name in args.files
    ]
    try:
        library = Library.load(args.library) if args.library else default_library()
        d = diagnose(sources, library=library)
    except (InputError, SignatureError) as exc:
        return fail(str(exc))
    if args.host:
        d = with_host(d, args.host, library)
    code = exit_code(d.advice)
    if args.json:
        data = {
            "status": d.status.value,
            "signature": d.signature.id if d.signature else None,
            "advice": d.advice.to_dict() if d.advice else None,
            "line": d.advice.line if d.advice else NO_ADVICE_LINE,
            "exit_code": code,
        }
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print_advice(d.advice)
    return code
