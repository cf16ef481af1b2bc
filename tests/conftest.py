"""Shared fixtures: the Slack stand-in, a real Redis per test, an in-process fakeredis."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

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
    from bot.jobs.connection import connect

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
    from bot.jobs.connection import connect

    client = await connect(None)
    try:
        yield client
    finally:
        await client.flushall()
        await client.aclose()


@pytest.fixture(scope="session")
def engine_pool() -> Iterator[ProcessPoolExecutor]:
    """One process pool for the engine, shared by the tests' workers (spawning is slow)."""
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class WorkerStack:
    """A queue, a store and a replier on this test's Redis prefix and the Slack stand-in."""

    redis: Any
    keys: Any
    queue: Any
    store: Any
    replier: Any
    slack: SlackStandin
    workers: list[Any] = field(default_factory=list)

    def worker(self, **kwargs: Any) -> Any:
        """A worker on this stack; closed when the test ends."""
        from bot.kinds.registry import make_worker

        kwargs.setdefault("retry_backoff_ms", 0)
        w = make_worker(self.queue, self.store, self.replier, **kwargs)
        self.workers.append(w)
        return w


@pytest.fixture
async def stack(redis_client: Any, key_prefix: str, slack_api: SlackStandin) -> AsyncIterator[WorkerStack]:
    """Everything a worker needs, on a real Redis (skipped without ``REDIS_URL``)."""
    from bot.jobs.keys import Keys
    from bot.jobs.queue import JobQueue
    from bot.jobs.store import Store
    from bot.slack.reply import SlackReplier, make_client

    keys = Keys(key_prefix)
    queue = JobQueue(redis_client, keys=keys, visibility_timeout_ms=2_000)
    client = make_client(slack_api.token, slack_api.api_url)
    built = WorkerStack(
        redis_client, keys, queue, Store(redis_client, keys=keys), SlackReplier(client), slack_api
    )
    try:
        yield built
    finally:
        for w in built.workers:
            await w.close()


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Compiled-library caches of the many test libraries go to a folder of this run, not ~/.cache."""
    saved = os.environ.get("DENPEX_CACHE_DIR")
    os.environ["DENPEX_CACHE_DIR"] = str(tmp_path_factory.mktemp("denpex-cache"))
    yield
    if saved is None:
        os.environ.pop("DENPEX_CACHE_DIR", None)
    else:
        os.environ["DENPEX_CACHE_DIR"] = saved
