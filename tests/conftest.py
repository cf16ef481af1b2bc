"""Shared fixtures: the Slack stand-in, a real Redis per test, an in-process fakeredis."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.slack_standin import SlackStandin


@pytest.fixture
async def slack_api() -> AsyncIterator[SlackStandin]:
    """A running stand-in for Slack's Web API; use ``slack_api.api_url`` as ``base_url``."""
    standin = SlackStandin()
    await standin.start()
    try:
        yield standin
    finally:
        await standin.close()


@pytest.fixture
def redis_url() -> str:
    """``REDIS_URL`` of a real redis-server; the test is skipped when it is unset."""
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is not set: this test needs a real redis-server")
    return url


@pytest.fixture
def key_prefix() -> str:
    """A key prefix of its own for each test, so tests never see each other's keys."""
    return f"denpex-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis_client(redis_url: str, key_prefix: str) -> AsyncIterator[object]:
    """A real Redis client; every key under this test's prefix is deleted afterwards."""
    from bot.redis_conn import connect

    client = await connect(redis_url)
    try:
        yield client
    finally:
        async for key in client.scan_iter(match=f"{key_prefix}:*", count=500):
            await client.delete(key)
        await client.aclose()


@pytest.fixture
async def fake_redis() -> AsyncIterator[object]:
    """An in-process fakeredis, for unit tests that need no real server."""
    from bot.redis_conn import connect

    client = await connect(None)
    try:
        yield client
    finally:
        await client.flushall()
        await client.aclose()
