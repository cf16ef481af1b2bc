"""``denpex report``: diagnose logs where they are, send only the redacted diagnosis, signed.

Meant for a job scheduler's epilog: the log never leaves the cluster, only the diagnosis and its
evidence windows (already redacted by the engine) go to ``POST /webhooks/job-failure``. With
``--exit-code-advice`` the exit status is the advice (as ``denpex advise``); ``--wait`` first
asks the server for its advice (``GET /jobs/<job_id>``), which adds the history rules.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bot.cli.advise import EXIT_HELP, exit_code, print_advice, with_host
from bot.ops.webhook_client import TIMEOUT_S, WebhookError, endpoint, post_signed
from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from signatures import InputError, diagnose
from signatures.advice import Advice, AdviceFormatError
from signatures.engine import default_library

POLL_S = 2.0  # between asks for the server's advice while --wait runs


class ReportError(Exception):
    """The report could not be built or sent; the message says why."""


def add_commands(subparsers: Any) -> None:
    """Add ``denpex report`` to the CLI."""
    p = subparsers.add_parser(
        "report",
        help="diagnose logs here and send only the diagnosis to a Denpex server",
        description=(
            "Diagnose LOG files locally and post the redacted diagnosis (never the log) to "
            "a Denpex server's job-failure webhook, signed with the shared secret."
        ),
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files (.log, .gz, .zip)")
    p.add_argument("--url", help="the server, e.g. https://denpex.example.com (or the full path)")
    p.add_argument("--secret-file", type=Path, help="file holding DENPEX_WEBHOOK_SECRET")
    p.add_argument("--job-id", help="the scheduler's job id (default: derived from the logs)")
    p.add_argument("--job-name", help="the job's name")
    p.add_argument("--cluster", help="the cluster's name")
    p.add_argument("--user", default=_user(), help="who ran the job (default: current user)")
    p.add_argument("--channel", help="Slack channel (default: the server's routing)")
    p.add_argument("--exit-code", type=int, help="the job's exit code")
    p.add_argument(
        "--host",
        metavar="NAME",
        help="the host the logs came from, used when they name none (a one-node job's node)",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be sent; send nothing")
    p.add_argument(
        "--exit-code-advice",
        action="store_true",
        help="print the advice and exit with it (as `denpex advise`), even when sending failed",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --exit-code-advice: wait up to SECONDS for the server's advice, which knows the "
        "job's earlier runs (default: use this diagnosis' own advice at once)",
    )
    p.epilog = f"with --exit-code-advice, {EXIT_HELP}"
    p.set_defaults(func=run)


def build_payload(args: argparse.Namespace) -> dict[str, Any]:
    """Diagnose the logs and build the webhook body (no log text, only the diagnosis)."""
    paths = [Path(p) for p in args.logs]
    try:
        diagnosis = diagnose(paths)
    except InputError as exc:
        raise ReportError(str(exc)) from None
    if args.host:
        diagnosis = with_host(diagnosis, args.host, default_library())
    payload: dict[str, Any] = {
        "job_id": args.job_id or _derived_job_id(paths),
        "job_name": args.job_name,
        "cluster": args.cluster,
        "user": args.user,
        "status": "failed",
        "exit_code": args.exit_code,
        "channel": args.channel,
        "diagnosis": diagnosis.to_dict(context=True),
    }
    return {k: v for k, v in payload.items() if v is not None}


def send(url: str, secret: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST the signed payload; return the server's JSON answer or raise ReportError."""
    try:
        return post_signed(endpoint(url), secret, payload, user_agent="denpex-report")
    except WebhookError as exc:
        raise ReportError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """Entry point of ``denpex report``; 0 sent, 1 not sent, 2 bad arguments or input; with
    ``--exit-code-advice`` the advice's exit status."""
    if not args.dry_run and (not args.url or not args.secret_file):
        print("denpex report: --url and --secret-file are required (or --dry-run)", file=sys.stderr)
        return 2
    try:
        payload = build_payload(args)
    except ReportError as exc:
        print(f"denpex report: {exc}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(json.dumps(payload, indent=2))
        return 0
    advice = _advice(payload["diagnosis"].get("advice"))
    try:
        secret = _read_secret(args.secret_file)
        answer = send(args.url, secret, payload)
    except ReportError as exc:
        print(f"denpex report: {exc}", file=sys.stderr)
        if not args.exit_code_advice:
            return 1
        # The scheduler still needs a decision: this diagnosis' own advice, without history.
        print("denpex report: not sent; the advice below is this diagnosis' own", file=sys.stderr)
        print_advice(advice)
        return exit_code(advice)
    state = "already reported" if answer.get("duplicate") else "reported"
    # With advice on standard output for a script to read, the receipt goes to standard error.
    receipt = sys.stderr if args.exit_code_advice else sys.stdout
    print(f"denpex report: job {answer.get('job', payload['job_id'])} {state}", file=receipt)
    if not args.exit_code_advice:
        return 0
    if args.wait > 0:
        try:
            served = wait_for_advice(args.url, secret, payload["job_id"], args.wait)
        except ReportError as exc:
            served = None
            print(f"denpex report: {exc}", file=sys.stderr)
        if served is None:
            print("denpex report: no advice from the server in time; this diagnosis' own", file=sys.stderr)
        advice = served or advice
    print_advice(advice)
    return exit_code(advice)


def wait_for_advice(url: str, secret: str, job_id: str, wait_s: float) -> Advice | None:
    """The server's advice for ``job_id`` once the job is diagnosed there, or None when ``wait_s``
    runs out first (the job is queued, or the server has no advice for it)."""
    deadline = time.monotonic() + wait_s
    while True:
        answer = fetch_job(url, secret, job_id)
        if answer is not None:
            return _advice(answer.get("advice"))
        if time.monotonic() + POLL_S > deadline:
            return None
        time.sleep(POLL_S)


def fetch_job(url: str, secret: str, job_id: str) -> dict[str, Any] | None:
    """``GET /jobs/<job_id>``, signed; None while the server has no diagnosis for it (404)."""
    base = url.rstrip("/").removesuffix(PATH)
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        f"{base}/jobs/{urllib.parse.quote(job_id, safe='/')}",
        headers={
            "User-Agent": "denpex-report",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(secret, timestamp, f"GET /jobs/{job_id}".encode()),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 503):  # not diagnosed yet, or Redis busy: ask again
            return None
        raise ReportError(f"the server answered HTTP {exc.code} to GET /jobs/{job_id}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ReportError(f"could not read the advice from {base}: {getattr(exc, 'reason', exc)}") from None


def _advice(data: Any) -> Advice | None:
    try:
        return Advice.from_dict(data) if data else None
    except AdviceFormatError:
        return None


def _read_secret(path: Path) -> str:
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ReportError(f"cannot read the secret file {path}: {exc.strerror}") from None
    if not secret:
        raise ReportError(f"the secret file {path} is empty")
    return secret


def _derived_job_id(paths: list[Path]) -> str:
    # Stable for the same files, so a re-run of the same epilog is recognised as a duplicate.
    digest = hashlib.sha256(socket.gethostname().encode())
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"report-{digest.hexdigest()[:20]}"


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
