"""What a request gets while Redis is away or the queue is full: 503 with Retry-After, never 500.

Every route touches Redis somewhere (the webhook's rate limit and queue, Slack listeners that
enqueue, the health check). Rather than guard each call, one aiohttp middleware turns an outage
raised anywhere in a request into a 503 the sender knows to retry, and Bolt's error handler does
the same for listeners run before Slack gets its answer (``process_before_response``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from redis.exceptions import RedisError
from slack_bolt.response import BoltResponse

from bot.jobs.queue import QueueFull
from bot.ops import metrics
from handlers.webhook import PATH as WEBHOOK_PATH

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
# Redis down, restarting or out of pooled connections; the queue at its limit. Built-in
# ConnectionError / TimeoutError cover a socket that failed before redis-py could wrap it.
UNAVAILABLE: tuple[type[BaseException], ...] = (RedisError, QueueFull, ConnectionError, TimeoutError)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def unavailable(reason: str) -> web.Response:
    """A 503 that tells the sender when to come back."""
    return web.json_response({"error": reason}, status=503, headers={"Retry-After": str(RETRY_AFTER_S)})


def reason_of(exc: BaseException) -> str:
    """What the 503 says: the queue's own words when it is full, else that Redis is away."""
    if isinstance(exc, QueueFull):
        return str(exc)
    return "Denpex's job queue (Redis) is unavailable; retry later"


@web.middleware
async def outage_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer 503 + Retry-After for an outage raised anywhere while handling ``request``."""
    try:
        return await handler(request)
    except UNAVAILABLE as exc:
        log.warning(
            "%s %s answered 503: %s", request.method, request.path, type(exc).__name__,
            extra={"reason": str(exc)[:200]},
        )  # fmt: skip
        if request.path == WEBHOOK_PATH:
            metrics.webhook_answered(503)  # the route's own counter never saw this answer
        return unavailable(reason_of(exc))


def bolt_unavailable(error: BaseException) -> BoltResponse | None:
    """The Bolt answer for a listener that raised an outage (None: not an outage)."""
    if not isinstance(error, UNAVAILABLE):
        return None
    return BoltResponse(
        status=503,
        body={"error": reason_of(error)},
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )
