"""``denpex watch``: follow live logs (or a command's output) and report when the answer changes."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from bot.cli.diagnose import fail, positive_int
from bot.watch.answer import Tracker
from bot.watch.follow import Follower
from bot.watch.job import from_environment
from bot.watch.metrics import WatchMetrics
from bot.watch.process import Command, alive
from bot.watch.report import JsonLines, Sink, Webhook
from bot.watch.session import Session
from signatures import SignatureError
from signatures.engine import default_library
from signatures.library import Library

SETTLE_S = 30.0


def add_commands(sub: Any) -> None:
    """Register ``watch``."""
    p = sub.add_parser(
        "watch",
        usage="denpex watch [options] [PATH ...] [-- COMMAND ...]",
        help="follow live training logs and report the first failure or degradation",
        description=(
            "Follow growing log files (rotation, truncation and files that appear later handled) "
            "or a command's output, and report each time the diagnosis changes: the first "
            "degradation, the first failure, more ranks failing, and a final report at the end. "
            "Put a command to run and watch after `--`; its exit code is passed on."
        ),
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="log files or glob patterns (quote them: 'logs/rank*.log'), followed like tail -F",
    )
    p.add_argument(
        "--from-end",
        action="store_true",
        help="read files that exist already from their end, like tail -n 0 -F (files that appear "
        "later are read whole); the diagnosis then sees only what is written from now on",
    )
    p.add_argument("--json", action="store_true", help="print each report as one JSON object per line")
    p.add_argument("--url", help="a Denpex server to send the reports to (its job-failure webhook)")
    p.add_argument("--secret-file", type=Path, help="file holding DENPEX_WEBHOOK_SECRET (with --url)")
    p.add_argument("--job-id", help="the job's id (default: from Slurm, Kubernetes or torchrun variables)")
    p.add_argument("--job-name", help="the job's name")
    p.add_argument("--cluster", help="the cluster's name")
    p.add_argument("--channel", help="Slack channel (default: the server's routing)")
    p.add_argument(
        "--pid", type=positive_int, metavar="N", help="stop, with a final report, when process N ends"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus counters per signature and role on PORT (0: any free port)",
    )
    p.add_argument("--metrics-addr", default="0.0.0.0", metavar="ADDR", help="address for --metrics-port")
    p.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        metavar="SECONDS",
        help=f"report a new answer once it has held this long (default: {SETTLE_S:g}); an error the "
        "run trains past in that time is not reported",
    )
    p.add_argument(
        "--library", type=Path, metavar="DIR", help="a signature library folder (default: bundled)"
    )
    p.set_defaults(func=run_watch, command_argv=[])


def run_watch(args: argparse.Namespace) -> int:
    """Watch until the process ends; the command's exit code, else 0 (2 on bad arguments)."""
    problem = _check(args)
    if problem is not None:
        return fail(f"watch: {problem}")
    try:
        library = Library.load(args.library) if args.library else default_library()
    except SignatureError as exc:
        return fail(str(exc))
    sinks: list[Sink] = [JsonLines(sys.stdout)] if args.json else []
    if args.url:
        try:
            secret = args.secret_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            return fail(f"watch: cannot read the secret file {args.secret_file}: {exc.strerror}")
        job = from_environment(job_id=args.job_id)
        job = replace(job, job_name=args.job_name or job.job_name, cluster=args.cluster or job.cluster)
        sinks.append(Webhook(args.url, secret, job, args.channel))
    metrics = None
    if args.metrics_port is not None:
        metrics = WatchMetrics()
        port = metrics.serve(args.metrics_port, args.metrics_addr)
        print(
            f"denpex watch: metrics on http://{args.metrics_addr}:{port}/metrics", file=sys.stderr, flush=True
        )
    command = None
    if args.command_argv:
        echo = sys.stderr.buffer if args.json else sys.stdout.buffer  # stdout stays the JSON lines
        try:
            command = Command(args.command_argv, capture=not args.paths, echo=echo)
        except OSError as exc:
            return fail(f"watch: cannot run {args.command_argv[0]}: {exc.strerror or exc}")
    stopped: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if command is None:
            stopped.append(signum)
        elif signum == signal.SIGTERM:
            command.forward(signum)  # a scheduler stopping the job: the command decides, we report
        # SIGINT from a terminal reaches the command too (one process group): it decides.

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    what = " ".join(args.paths) or (command.name if command else "")
    print(f"denpex watch: watching {what}", file=sys.stderr, flush=True)

    def stop() -> bool:
        if command is not None:
            return command.ended()
        return bool(stopped) or (args.pid is not None and not alive(args.pid))

    session = Session(
        library, Follower(args.paths, from_end=args.from_end), Tracker(args.settle), sinks, metrics, command
    )
    session.run(stop)
    code = command.exit_code() if command is not None else None
    session.finish(code)
    return code if code is not None else 0


def _check(args: argparse.Namespace) -> str | None:
    if not args.paths and not args.command_argv:
        return "give log files to follow, or a command to run after `--`"
    if args.pid is not None and args.command_argv:
        return "--pid watches a running process; a command after `--` is run and watched: not both"
    if not (args.json or args.url or args.metrics_port is not None):
        return "nowhere to report: give --json, --url or --metrics-port"
    if args.url and not args.secret_file:
        return "--url needs --secret-file"
    if args.settle < 0:
        return "--settle must be 0 or more"
    return None
