"""The real Denpex web app served on a free local port, for tests that talk to it over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from bot.jobs.keys import Keys
from bot.ops.settings import Settings
from bot.web.app import RUNTIME, create_app
from tests.slack_standin import SlackStandin


@asynccontextmanager
async def served_app(
    redis: Any, key_prefix: str, slack_api: SlackStandin, *, signing_secret: str, webhook_secret: str
) -> AsyncIterator[tuple[str, Any]]:
    """Yield ``(base_url, runtime)`` of an app whose Slack calls go to ``slack_api``; no workers run."""
    settings = Settings(
        slack_bot_token=slack_api.token,
        slack_signing_secret=signing_secret,
        slack_api_url=slack_api.api_url,
        webhook_secret=webhook_secret,
        default_channel="C0TRAINING",
    )
    app = create_app(settings, redis=redis, keys=Keys(key_prefix), start_workers=False)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", app[RUNTIME]
    finally:
        await runner.cleanup()
