"""One way to get a Redis client: a real server from ``REDIS_URL``, or an in-process fakeredis."""

from __future__ import annotations

import fakeredis
import redis.asyncio as aioredis

# Reply shapes change with the protocol (RESP3 nests stream replies one level deeper), and
# fakeredis ignores ``legacy_responses``: pin RESP2 so the parsers in bot/jobs/queue.py see one shape.
PROTOCOL = 2
# Blocking reads must end well before the socket times out (redis-py raises TimeoutError).
SOCKET_TIMEOUT_S = 30.0
MAX_BLOCK_MS = 5_000
# redis-py's default pool raises "Too many connections" past its size: a burst of requests
# then fails. A blocking pool makes the burst wait briefly for a free connection instead.
MAX_CONNECTIONS = 200
POOL_TIMEOUT_S = 2.0

_embedded_server: fakeredis.FakeServer | None = None


def embedded_server() -> fakeredis.FakeServer:
    """The in-process server shared by every embedded client of this process."""
    global _embedded_server
    if _embedded_server is None:
        _embedded_server = fakeredis.FakeServer()
    return _embedded_server


def client(
    url: str | None,
    *,
    server: fakeredis.FakeServer | None = None,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout_s: float = POOL_TIMEOUT_S,
) -> aioredis.Redis:
    """A client for ``url`` (no round trip yet); without one, fakeredis on ``server`` (default: shared).

    At most ``max_connections`` are open at once; a caller finding none free waits up to
    ``pool_timeout_s`` and then gets ``redis.exceptions.ConnectionError``.
    """
    if url:
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=pool_timeout_s,
            decode_responses=True,
            protocol=PROTOCOL,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=5.0,
            health_check_interval=30,
        )
        # from_pool: the client owns the pool, so aclose() closes its connections too.
        return aioredis.Redis.from_pool(pool)
    fake: aioredis.Redis = fakeredis.FakeAsyncRedis(
        server=server or embedded_server(), decode_responses=True, protocol=PROTOCOL
    )
    return fake


async def connect(
    url: str | None,
    *,
    server: fakeredis.FakeServer | None = None,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout_s: float = POOL_TIMEOUT_S,
) -> aioredis.Redis:
    """``client(url)``, checked with a PING so a wrong REDIS_URL fails at start-up."""
    redis = client(url, server=server, max_connections=max_connections, pool_timeout_s=pool_timeout_s)
    if url:
        await redis.ping()
    return redis
