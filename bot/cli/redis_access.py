"""Reaching the shared Redis from a one-off command, with one-line errors instead of tracebacks."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.jobs.connection import connect

NO_REDIS = (
    "no Redis to read: set REDIS_URL or pass --redis-url (without it, `denpex serve` keeps its "
    "queue and store in its own process, where no other command can read them)"
)


class RedisUnreachable(Exception):
    """The configured Redis did not answer; the message names it with its password masked."""


def masked(url: str) -> str:
    """``redis://:***@host:6379/0``: a Redis URL safe to print."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


async def connect_or_explain(url: str) -> Any:
    """A connected client (PING answered), or RedisUnreachable with a one-line reason."""
    try:
        return await connect(url)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RedisUnreachable(f"cannot reach Redis at {masked(url)}: {reason}") from None
