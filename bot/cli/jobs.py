"""``denpex jobs``: look at the queue and at dead letters, and put dead letters back."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from typing import Any

from bot.cli.redis_access import NO_REDIS, RedisUnreachable, connect_or_explain
from bot.jobs.keys import DEFAULT_PREFIX, Keys
from bot.jobs.queue import DeadLetter, JobQueue
from bot.ops.settings import SettingsError, load_redis_url
from handlers.jobs import Job, JobFormatError

STREAM_ID = re.compile(r"\d{1,20}-\d{1,20}")


def add_commands(sub: Any) -> None:
    """Add ``denpex jobs ...`` to the CLI."""
    jobs = sub.add_parser("jobs", help="inspect the job queue and its dead letters")
    jobs.add_argument("--redis-url", help="Redis to use (default: REDIS_URL from the settings)")
    jobs.add_argument("--prefix", default=DEFAULT_PREFIX, help="key prefix")
    jobs_sub = jobs.add_subparsers(dest="jobs_command", required=True)

    stats = jobs_sub.add_parser("stats", help="queue length, lag, pending and dead letters")
    stats.set_defaults(func=run_stats)

    dead = jobs_sub.add_parser("dead-letter", help="jobs given up on after repeated failures")
    dead_sub = dead.add_subparsers(dest="dead_command", required=True)
    ls = dead_sub.add_parser("list", help="list dead letters, newest first")
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    ls.set_defaults(func=run_list)
    retry = dead_sub.add_parser("retry", help="put dead letters back on the job queue")
    retry.add_argument("ids", nargs="*", help="dead-letter entry ids (from `list`)")
    retry.add_argument("--all", action="store_true", help="retry every dead letter")
    retry.set_defaults(func=run_retry)


def run_stats(args: argparse.Namespace) -> int:
    """Print the queue's figures."""
    return _run(args, _stats)


def run_list(args: argparse.Namespace) -> int:
    """Print dead letters."""
    return _run(args, _list)


def run_retry(args: argparse.Namespace) -> int:
    """Re-queue dead letters by id, or all of them."""
    if not args.ids and not args.all:
        print("denpex: give dead-letter ids, or --all", file=sys.stderr)
        return 2
    return _run(args, _retry)


def _run(args: argparse.Namespace, action: Any) -> int:
    try:
        url = args.redis_url or load_redis_url()
    except SettingsError as exc:
        print(f"denpex: {exc}", file=sys.stderr)
        return 2
    if not url:
        print(f"denpex: {NO_REDIS}", file=sys.stderr)
        return 2
    try:
        code: int = asyncio.run(_with_queue(url, args, action))
    except RedisUnreachable as exc:
        print(f"denpex: {exc}", file=sys.stderr)
        return 2
    return code


async def _with_queue(url: str, args: argparse.Namespace, action: Any) -> int:
    redis = await connect_or_explain(url)
    try:
        code: int = await action(JobQueue(redis, keys=Keys(args.prefix)), args)
        return code
    finally:
        await redis.aclose()


async def _stats(queue: JobQueue, _args: argparse.Namespace) -> int:
    for name, value in (await queue.stats()).items():
        print(f"{name:8} {'unknown' if value is None else value}")
    return 0


async def _list(queue: JobQueue, args: argparse.Namespace) -> int:
    letters = await queue.dead_letters(args.limit)
    for letter in letters:
        if args.json:
            print(json.dumps(_as_dict(letter), sort_keys=True))
        else:
            print(_line(letter))
    if not letters and not args.json:
        print("no dead letters")
    return 0


async def _retry(queue: JobQueue, args: argparse.Namespace) -> int:
    ids = [d.entry_id for d in await queue.dead_letters(10_000)] if args.all else args.ids
    malformed = [i for i in ids if not STREAM_ID.fullmatch(i)]
    if malformed:
        print(
            f"denpex: {', '.join(malformed)}: not a dead-letter entry id; they look like "
            "1712345678901-0 (`denpex jobs dead-letter list` shows them)",
            file=sys.stderr,
        )
        return 2
    missing = 0
    for entry_id in ids:
        new_id = await queue.retry_dead(entry_id)
        if new_id is None:
            print(f"{entry_id}: no such dead letter", file=sys.stderr)
            missing += 1
        else:
            print(f"{entry_id}: queued again as {new_id}")
    return 1 if missing else 0


def _as_dict(letter: DeadLetter) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": letter.entry_id,
        "reason": letter.reason,
        "deliveries": letter.deliveries,
        "failed_at": letter.failed_at,
        "original_id": letter.original_id,
    }
    try:
        job = Job.from_json(letter.payload)
    except JobFormatError as exc:
        out["job"] = None
        out["job_error"] = str(exc)
    else:
        out["job"] = {
            "id": job.id,
            "kind": job.kind,
            "source": job.source,
            "channel": job.channel,
            "thread_ts": job.thread_ts,
        }
    return out


def _line(letter: DeadLetter) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(letter.failed_at))
    try:
        job = Job.from_json(letter.payload)
        what = f"{job.kind} from {job.source}" + (f" in {job.channel}" if job.channel else "")
    except JobFormatError:
        what = "unreadable job"
    return f"{letter.entry_id}  {when}Z  {what}  ({letter.deliveries} deliveries): {letter.reason}"
