"""``denpex report``: diagnose logs where they are, send only the redacted diagnosis, signed.

Meant for a job scheduler's epilog: the log never leaves the cluster, only the diagnosis and its
evidence windows (already redacted by the engine) go to ``POST /webhooks/job-failure``.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import hashlib
import json
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from signatures import InputError, diagnose

TIMEOUT_S = 30.0


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
    p.add_argument("--dry-run", action="store_true", help="print what would be sent; send nothing")
    p.set_defaults(func=run)


def build_payload(args: argparse.Namespace) -> dict[str, Any]:
    """Diagnose the logs and build the webhook body (no log text, only the diagnosis)."""
    paths = [Path(p) for p in args.logs]
    try:
        diagnosis = diagnose(paths)
    except InputError as exc:
        raise ReportError(str(exc)) from None
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
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        _endpoint(url),
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "denpex-report",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(secret, timestamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise ReportError(f"the server answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReportError(f"could not reach {_endpoint(url)}: {reason}") from None


def run(args: argparse.Namespace) -> int:
    """Entry point of ``denpex report``; 0 sent, 1 not sent, 2 bad arguments or input."""
    if not args.dry_run and (not args.url or not args.secret_file):
        print("denpex report: --url and --secret-file are required (or --dry-run)", file=sys.stderr)
        return 2
    try:
        payload = build_payload(args)
        if args.dry_run:
            print(json.dumps(payload, indent=2))
            return 0
        answer = send(args.url, _read_secret(args.secret_file), payload)
    except ReportError as exc:
        print(f"denpex report: {exc}", file=sys.stderr)
        return 1
    state = "already reported" if answer.get("duplicate") else "reported"
    print(f"denpex report: job {answer.get('job', payload['job_id'])} {state}")
    return 0


def _read_secret(path: Path) -> str:
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ReportError(f"cannot read the secret file {path}: {exc.strerror}") from None
    if not secret:
        raise ReportError(f"the secret file {path} is empty")
    return secret


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith(PATH) else url + PATH


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
