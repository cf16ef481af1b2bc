"""Redis away or out of connections: every route answers 503 with Retry-After, never 500.

The app runs against a redis-server of the test's own, which the test kills; Slack listeners run
before the answer (``process_before_response``), so an outage inside one reaches the HTTP answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from bot.jobs import connection
from bot.jobs.keys import Keys
from bot.ops.settings import load_settings
from bot.web.app import create_app
from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from tests.redis_server import RedisProcess, own_redis
from tests.slack_requests import SIGNING_SECRET, event, file_share_message, slash_command
from tests.slack_standin import SlackStandin

__all__ = ["own_redis"]  # fixtures

WEBHOOK_SECRET = "whsec-outage-test-0123456789"


def webhook_request(job_id: str, channel: str = "C1") -> tuple[bytes, dict[str, str]]:
    """A signed job-failure report."""
    body = json.dumps({"job_id": job_id, "channel": channel, "log": "step 1\nKilled\n"}).encode()
    ts = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: ts,
        SIGNATURE_HEADER: sign(WEBHOOK_SECRET, ts, body),
    }
    return body, headers


@dataclass
class App:
    http: TestClient
    redis: aioredis.Redis


async def _serve(slack: SlackStandin, redis: aioredis.Redis) -> TestClient:
    settings = load_settings(
        {
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": slack.api_url,
            "DENPEX_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "DENPEX_WEBHOOK_BURST": "1000",
            "DENPEX_WEBHOOK_RATE": "1000",
        }
    )
    app = create_app(
        settings, redis=redis, keys=Keys("outage"), start_workers=False, process_before_response=True
    )
    http = TestClient(TestServer(app, host="127.0.0.1"))
    await http.start_server()
    return http


@pytest.fixture
async def app_on_own_redis(own_redis: RedisProcess, slack_api: SlackStandin) -> AsyncIterator[App]:
    await own_redis.wait_ready()
    redis = connection.client(own_redis.url)
    http = await _serve(slack_api, redis)
    try:
        yield App(http, redis)
    finally:
        await http.close()
        await redis.aclose()


def _assert_503(status: int, headers: Any) -> None:
    assert status == 503
    assert int(headers["Retry-After"]) > 0


async def test_redis_down_every_route_answers_503_with_retry_after(
    app_on_own_redis: App, own_redis: RedisProcess, slack_api: SlackStandin
) -> None:
    http = app_on_own_redis.http
    body, headers = webhook_request("before-outage")
    resp = await http.post(PATH, data=body, headers=headers)
    assert resp.status == 202  # the same request works while Redis is up

    own_redis.kill()

    body, headers = webhook_request("during-outage")
    resp = await http.post(PATH, data=body, headers=headers)
    _assert_503(resp.status, resp.headers)
    assert "retry" in (await resp.json())["error"]

    resp = await http.get("/healthz")
    _assert_503(resp.status, resp.headers)

    # A slash command and a dropped file: their listeners enqueue before Slack gets its answer.
    req = slash_command("diagnose Traceback (most recent call last):\nRuntimeError: boom")
    resp = await http.post("/slack/events", data=req.body.encode(), headers=req.headers)
    _assert_503(resp.status, resp.headers)
    f = slack_api.add_file("rank0.log", b"step 1\nKilled\n", channel="C1", ts="1700.000001")
    req = event(file_share_message("C1", "1700.000001", [f]))
    resp = await http.post("/slack/events", data=req.body.encode(), headers=req.headers)
    _assert_503(resp.status, resp.headers)


async def test_a_burst_past_the_pool_waits_for_a_connection(own_redis: RedisProcess) -> None:
    await own_redis.wait_ready()
    redis = connection.client(own_redis.url, max_connections=4, pool_timeout_s=5.0)
    try:
        # 100 commands at once on 4 connections: they queue for a connection, none fails.
        results = await asyncio.gather(*(redis.incr("burst") for _ in range(100)))
        assert sorted(results) == list(range(1, 101))
        assert len(redis.connection_pool._in_use_connections) == 0
        assert len(redis.connection_pool._available_connections) <= 4
    finally:
        await redis.aclose()


async def test_no_free_connection_in_time_answers_503(
    own_redis: RedisProcess, slack_api: SlackStandin
) -> None:
    await own_redis.wait_ready()
    redis = connection.client(own_redis.url, max_connections=2, pool_timeout_s=0.2)
    http = await _serve(slack_api, redis)
    try:
        # Both connections are taken by commands that block for a second.
        blockers = [asyncio.create_task(redis.blpop([f"never-{i}"], timeout=1)) for i in range(2)]
        await asyncio.sleep(0.1)
        body, headers = webhook_request("no-connection")
        resp = await http.post(PATH, data=body, headers=headers)
        _assert_503(resp.status, resp.headers)
        await asyncio.gather(*blockers)
        resp = await http.post(PATH, data=body, headers=headers)
        assert resp.status == 202  # once a connection is free again, the same report is taken
    finally:
        await http.close()
        await redis.aclose()


def test_pool_size_comes_from_the_settings() -> None:
    base = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    settings = load_settings(
        {**base, "DENPEX_REDIS_MAX_CONNECTIONS": "37", "DENPEX_REDIS_POOL_TIMEOUT_S": "0.5"}
    )
    assert (settings.redis_max_connections, settings.redis_pool_timeout_s) == (37, 0.5)
    assert load_settings(base).redis_max_connections == 200
    client = connection.client(
        "redis://127.0.0.1:1/0",
        max_connections=settings.redis_max_connections,
        pool_timeout_s=settings.redis_pool_timeout_s,
    )
    pool = client.connection_pool
    assert isinstance(pool, aioredis.BlockingConnectionPool)
    assert (pool.max_connections, pool.timeout) == (37, 0.5)


async def test_embedded_mode_is_unchanged() -> None:
    import fakeredis

    client = connection.client(None, server=fakeredis.FakeServer())
    assert isinstance(client, fakeredis.FakeAsyncRedis)
    assert await client.ping()
    await client.aclose()
