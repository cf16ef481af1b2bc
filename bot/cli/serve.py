"""``denpex serve``, ``denpex worker`` and ``denpex stats``.

``serve`` runs one aiohttp server (Slack's endpoint, the job-failure webhook, health, metrics)
with workers in the same process unless ``--no-worker``; with ``SLACK_APP_TOKEN`` set it also
connects to Slack over Socket Mode. ``worker`` runs only workers. A bad setting stops start-up
with one line naming it and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from bot.cli.redis_access import NO_REDIS, RedisUnreachable, connect_or_explain, masked
from bot.ops.settings import Settings, SettingsError, load_redis_url, load_settings

EXIT_BAD_SETTINGS = 2

log = logging.getLogger("denpex")


def add_commands(sub: Any) -> None:
    """Register ``serve``, ``worker`` and ``stats``."""
    serve = sub.add_parser("serve", help="run the Slack app, webhook, health and metrics server")
    serve.add_argument("--no-worker", action="store_true", help="serve HTTP only; run workers elsewhere")
    serve.set_defaults(func=cmd_serve)
    worker = sub.add_parser("worker", help="run queue workers only (no HTTP server)")
    worker.set_defaults(func=cmd_worker)
    stats = sub.add_parser("stats", help="per-signature diagnoses and Correct/Wrong feedback")
    stats.add_argument("--redis-url", help="Redis to read (default: REDIS_URL)")
    stats.set_defaults(func=cmd_stats)


def settings_or_exit() -> Settings:
    """The settings, or exit 2 with one line naming the bad one."""
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"denpex: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_SETTINGS) from None


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM / Ctrl-C."""
    settings = settings_or_exit()
    from aiohttp import web

    from bot.ops.logs import configure_from_settings
    from bot.web.app import RUNTIME, create_app

    configure_from_settings(settings)
    try:
        app = create_app(settings, start_workers=not args.no_worker)
    except SettingsError as exc:  # e.g. a bad routing file: one line, not a traceback
        print(f"denpex: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    log.info("%s", banner(settings, workers_here=not args.no_worker))
    if settings.socket_mode:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        handler: dict[str, AsyncSocketModeHandler] = {}

        async def connect(_app: web.Application) -> None:
            rt = app[RUNTIME]
            handler["h"] = AsyncSocketModeHandler(rt.bolt, settings.slack_app_token)
            await handler["h"].connect_async()

        async def disconnect(_app: web.Application) -> None:
            if "h" in handler:
                await handler["h"].close_async()

        app.on_startup.append(connect)
        app.on_shutdown.append(disconnect)
    web.run_app(app, host=settings.host, port=settings.port, print=None)
    return 0


def banner(settings: Settings, *, workers_here: bool) -> str:
    """One line on what this process is: where it listens, its Redis, workers and library."""
    from bot.cli.main import version
    from bot.web.app import HEALTH_PATH, SLACK_PATH
    from handlers.webhook import PATH as WEBHOOK_PATH
    from signatures.engine import default_library

    host = "localhost" if settings.host in ("0.0.0.0", "::") else settings.host
    where = f"http://{host}:{settings.port}"
    slack = "Slack over Socket Mode" if settings.socket_mode else f"Slack events at {SLACK_PATH}"
    redis = (
        f"Redis {masked(settings.redis_url)}"
        if settings.redis_url
        else "Redis embedded in this process (jobs end with it; set REDIS_URL for a shared one)"
    )
    workers = f"{settings.workers} worker(s) in this process" if workers_here else "no workers here"
    count = len(default_library().signatures)
    model = (
        f"free-form follow-ups go to model {settings.llm_model} at {settings.llm_url} "
        "(redacted evidence only)"
        if settings.model_enabled
        else "no model (follow-ups answered from the library only)"
    )
    return (
        f"Denpex {version()} listening on {where} ({slack}, webhooks at {WEBHOOK_PATH}, "
        f"health at {HEALTH_PATH}); {redis}; {workers}; {count} signatures; {model}"
    )


def cmd_worker(args: argparse.Namespace) -> int:
    """Run workers until SIGTERM / Ctrl-C, finishing or handing back jobs in flight."""
    settings = settings_or_exit()
    from bot.ops.logs import configure_from_settings

    configure_from_settings(settings)
    try:
        asyncio.run(_workers(settings))
    except SettingsError as exc:
        print(f"denpex: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    return 0


async def _workers(settings: Settings) -> None:
    from aiohttp import web

    from bot.ops import metrics
    from bot.web.app import RUNTIME, create_app

    # The same app without a listening socket: its startup starts the workers, cleanup stops them.
    app = create_app(settings, start_workers=True)
    runner = web.AppRunner(app)
    await runner.setup()
    # Only /healthz and /metrics are served from a worker (probes and Prometheus need them).
    rt = app[RUNTIME]
    health = await metrics.serve_for_worker(
        settings.host, settings.port, alive=lambda: bool(rt.tasks) and not any(t.done() for t in rt.tasks)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await health.cleanup()
        await runner.cleanup()


def cmd_stats(args: argparse.Namespace) -> int:
    """Print diagnoses, confirmed and disputed counts per signature."""
    try:
        url = args.redis_url or load_redis_url()
    except SettingsError as exc:
        print(f"denpex: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    if not url:
        print(f"denpex: {NO_REDIS}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    try:
        rows = asyncio.run(_stats(url))
    except RedisUnreachable as exc:
        print(f"denpex: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    if not rows:
        print("No diagnoses or feedback recorded yet.")
        return 0
    width = max(len(r[0]) for r in rows)
    print(f"{'signature':<{width}}  diagnoses  correct  wrong")
    for sig_id, diagnoses, confirmed, disputed in rows:
        print(f"{sig_id:<{width}}  {diagnoses:>9}  {confirmed:>7}  {disputed:>5}")
    return 0


async def _stats(url: str) -> list[tuple[str, int, int, int]]:
    from bot.jobs.store import Store
    from bot.kinds.lookups import signature_counts

    redis = await connect_or_explain(url)
    try:
        return await signature_counts(Store(redis))
    finally:
        await redis.aclose()
