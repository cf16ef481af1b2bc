"""Webhooks under concurrency, through the real app over HTTP: no 500s, and no false 429s.

The app runs on a real redis-server when ``REDIS_URL`` is set, else on its embedded fakeredis;
the token bucket is checked on both, since the embedded mode must run its Lua script too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from handlers.jobs import Job
from handlers.webhook import PATH, TokenBucket, sign
from tests.slack_requests import Denpex, redis_for_app

__all__ = ["redis_for_app"]  # fixture

SECRET = "whsec-load-test-0123456789"


@pytest.fixture
async def webhook_app(slack_api: Any, redis_for_app: Any) -> AsyncIterator[Denpex]:
    """The real app with the webhook on, 1000 reports a second allowed per sender."""
    # The app keeps its buckets under its default key prefix, not the test's: start from a full one.
    async for key in redis_for_app.scan_iter(match="*:webhook:rate:*"):
        await redis_for_app.delete(key)
    env = {
        "DENPEX_WEBHOOK_SECRET": SECRET,
        "DENPEX_WEBHOOK_RATE": "1000",
        "DENPEX_WEBHOOK_BURST": "1000",
        "DENPEX_DEFAULT_CHANNEL": "C0LOAD",
    }
    async with Denpex(slack_api, redis_for_app, env=env) as app:
        yield app


async def report_all(app: Denpex, count: int) -> list[int]:
    """Send ``count`` signed reports at once; their statuses."""
    url = str(app.server.make_url(PATH))

    async def one(session: aiohttp.ClientSession, n: int) -> int:
        body = json.dumps({"job_id": f"load-{n}", "log": f"step {n}\nRuntimeError: boom {n}\n"}).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Denpex-Timestamp": timestamp,
            "X-Denpex-Signature": sign(SECRET, timestamp, body),
        }
        async with session.post(url, data=body, headers=headers) as resp:
            return resp.status

    # No client-side connection cap: every request is in flight at the same time.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        return list(await asyncio.gather(*(one(session, n) for n in range(count))))


async def queued(app: Denpex) -> list[Job]:
    entries = await app.redis.xrange(app.runtime.queue.keys.jobs)
    return [Job.from_json(fields["job"]) for _, fields in entries]


async def test_200_concurrent_signed_reports_are_all_queued_none_500(webhook_app: Denpex) -> None:
    statuses = await report_all(webhook_app, 200)
    assert Counter(statuses) == {202: 200}
    assert len(await queued(webhook_app)) == 200


async def test_60_simultaneous_reports_within_the_rate_get_no_429(webhook_app: Denpex) -> None:
    statuses = await report_all(webhook_app, 60)
    assert Counter(statuses) == {202: 60}


@pytest.fixture(params=["redis-server", "embedded"])
def bucket_redis(request: pytest.FixtureRequest) -> Any:
    """A real Redis (skipped without ``REDIS_URL``) or the embedded fakeredis."""
    return request.getfixturevalue("redis_client" if request.param == "redis-server" else "fake_redis")


async def test_token_bucket_grants_exactly_its_burst_under_concurrency(
    bucket_redis: Any, key_prefix: str
) -> None:
    """80 simultaneous takes from a bucket of 50 with the clock stopped: 50 yes, 30 no, none lost."""
    bucket = TokenBucket(bucket_redis, rate=1.0, burst=50, prefix=f"{key_prefix}:rate", clock=lambda: 5000.0)
    answers = await asyncio.gather(*(bucket.allow("sender") for _ in range(80)))
    assert Counter(answers) == {True: 50, False: 30}


async def test_token_bucket_refills_with_time_and_never_past_its_burst(
    bucket_redis: Any, key_prefix: str
) -> None:
    clock = [1000.0]
    bucket = TokenBucket(bucket_redis, rate=2.0, burst=3, prefix=f"{key_prefix}:rate", clock=lambda: clock[0])
    assert [await bucket.allow("s") for _ in range(4)] == [True, True, True, False]
    clock[0] += 1.0  # two tokens back at 2/s
    assert [await bucket.allow("s") for _ in range(3)] == [True, True, False]
    clock[0] += 3600.0  # an hour idle fills it to the burst, not past it
    assert [await bucket.allow("s") for _ in range(4)] == [True, True, True, False]
    clock[0] -= 10.0  # a process whose clock is behind gets no refill from the past...
    assert await bucket.allow("s") is False
    clock[0] += 10.0  # ...and does not move the stamp back to hand out those 10 s again
    assert await bucket.allow("s") is False
