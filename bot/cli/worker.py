"""``python -m bot.cli.worker``: one worker process on a shared Redis, with its own key prefix.

``denpex worker`` is the command operators run; this entry point adds what tests and benchmarks
need (a key prefix, a consumer name, a short visibility timeout, ``--drain``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from bot.jobs.connection import connect
from bot.jobs.keys import Keys
from bot.kinds.registry import build_worker
from bot.ops.settings import load_settings

log = logging.getLogger(__name__)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bot.cli.worker", description=__doc__)
    parser.add_argument("--prefix", default="denpex", help="key prefix (tests use their own)")
    parser.add_argument("--name", default=None, help="consumer name (default: host-pid-random)")
    parser.add_argument("--visibility-ms", type=int, default=60_000)
    parser.add_argument("--max-deliveries", type=int, default=3)
    parser.add_argument("--drain", action="store_true", help="process what is queued, then exit")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    settings = load_settings()
    if not settings.redis_url:
        log.error("REDIS_URL is not set: a separate worker process needs a shared Redis")
        return 2
    redis = await connect(
        settings.redis_url,
        max_connections=settings.redis_max_connections,
        pool_timeout_s=settings.redis_pool_timeout_s,
    )
    worker = build_worker(
        settings,
        redis,
        keys=Keys(args.prefix),
        name=args.name,
        visibility_timeout_ms=args.visibility_ms,
        max_deliveries=args.max_deliveries,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if args.drain:
            await worker.drain()
        else:
            await worker.run(stop)
    finally:
        await worker.close()
        await redis.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one worker process until SIGTERM (or, with --drain, until the queue is empty)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return asyncio.run(_main(_parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
