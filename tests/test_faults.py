"""Faults a job must survive: a worker killed mid-job, Redis restarted, Slack answering 429 and
500, a poison job, and two worker processes sharing the group. Every accepted job ends in
exactly one reply."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions

from bot.cli import main as cli
from bot.jobs.connection import connect
from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from bot.jobs.store import Store
from bot.kinds.registry import make_worker
from bot.slack.reply import SlackReplier, make_client
from handlers.jobs import Job, LogRef
from tests.conftest import WorkerStack
from tests.redis_server import RedisProcess, own_redis
from tests.slack_standin import SlackStandin

__all__ = ["own_redis"]  # fixtures

ROOT = Path(__file__).resolve().parent.parent
LOG = "[rank0]: Traceback (most recent call last):\n[rank0]: ModuleNotFoundError: No module named 'apex'\n"


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60) -> None:
    """Poll ``check`` until it holds; the deadline only keeps a broken build from hanging."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)


def _inline_job(n: int, channel: str = "C1") -> Job:
    return Job(
        source="webhook",
        dedupe_key=f"job-{n}",
        channel=channel,
        thread_ts=f"1700.{n:06d}",
        logs=[LogRef("inline", f"job{n}.log", text=LOG)],
    )


def _file_job(slack: SlackStandin, n: int, **kw: Any) -> Job:
    f = slack.add_file(f"rank{n}.log", LOG.encode())
    kw.setdefault("thread_ts", f"1700.{n:06d}")
    return Job(
        source="file",
        dedupe_key=f["id"],
        channel="C1",
        logs=[LogRef("slack_file", f"rank{n}.log", file_id=f["id"])],
        **kw,
    )


def _answers(slack: SlackStandin, job: Job) -> list[Any]:
    return slack.thread(job.channel or "", job.thread_ts or "")


def _spawn_worker(
    redis_url: str, prefix: str, slack: SlackStandin, name: str, log_dir: Path, *extra: str
) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SLACK_BOT_TOKEN=slack.token,
        SLACK_SIGNING_SECRET="test-signing-secret",
        SLACK_API_URL=slack.api_url,
        PYTHONPATH=str(ROOT),
    )
    env.pop("SLACK_APP_TOKEN", None)
    cmd = [sys.executable, "-m", "bot.cli.worker", "--prefix", prefix, "--name", name, *extra]
    with (log_dir / f"{name}.log").open("wb") as out:  # the child keeps its own copy
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out)


def crashing_engine(files: list[tuple[str, str]], max_text_bytes: int) -> dict[str, Any]:
    """A poison input: the engine's process dies on it, every time."""
    os._exit(3)


# -- a worker killed in the middle of a job --------------------------------------------------


async def test_worker_killed_mid_job_is_finished_by_another_with_one_reply(
    stack: WorkerStack, redis_url: str, key_prefix: str, tmp_path: Path, engine_pool: Any
) -> None:
    slack = stack.slack
    slack.hold_downloads = asyncio.Event()
    # A slash command: the doomed worker opens the thread before it dies.
    job = _file_job(slack, 1, thread_ts=None, header="Job 77 failed")
    await stack.queue.enqueue(job)
    doomed = _spawn_worker(redis_url, key_prefix, slack, "doomed", tmp_path, "--visibility-ms", "500")
    try:
        await until(lambda: _true(slack.calls_to("download")), "the doomed worker to start the job")
        doomed.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(doomed.wait, 30) == -signal.SIGKILL
    finally:
        if doomed.poll() is None:
            doomed.kill()
    slack.hold_downloads.set()
    pending = await stack.redis.xpending(stack.keys.jobs, stack.keys.group)
    assert pending["pending"] == 1  # the job is not lost: it waits in the dead worker's PEL

    survivor = make_worker(
        JobQueue(stack.redis, keys=stack.keys, visibility_timeout_ms=500),
        stack.store,
        stack.replier,
        name="survivor",
        executor=engine_pool,
        retry_backoff_ms=0,
    )
    try:
        assert await survivor.drain(timeout_s=60) == 1
    finally:
        await survivor.close()

    [parent] = [m for m in slack.messages if m.thread_ts is None]
    assert "Job 77 failed" in parent.text  # the parent the dead worker posted is reused
    [reply] = slack.thread("C1", parent.ts)
    stored = await stack.store.by_thread("C1", parent.ts)
    assert stored is not None and stored.reply_ts == reply.ts
    assert (await stack.queue.progress(job.id))["worker"] == "survivor"
    assert await stack.queue.idle()
    assert await stack.queue.dead_letters() == []


async def _true(value: object) -> bool:
    return bool(value)


# -- Redis restarted with AOF on -------------------------------------------------------------


async def test_redis_restart_loses_no_accepted_job(
    own_redis: RedisProcess, slack_api: SlackStandin, engine_pool: Any
) -> None:
    await until(own_redis.ready, "redis-server to start")
    redis = await connect(own_redis.url)
    keys = Keys("restart")
    queue = JobQueue(redis, keys=keys, visibility_timeout_ms=1_000)
    worker = make_worker(
        queue,
        Store(redis, keys=keys),
        SlackReplier(make_client(slack_api.token, slack_api.api_url)),
        executor=engine_pool,
        retry_backoff_ms=200,
        poll_block_ms=100,
    )
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        before = [_inline_job(n) for n in range(3)]
        for job in before:
            assert await queue.enqueue(job)
        await until(lambda: _true(all(_answers(slack_api, j) for j in before)), "first replies")

        # A job in the middle of its download when Redis dies, and two more queued behind it.
        slack_api.hold_downloads = asyncio.Event()
        in_flight = _file_job(slack_api, 10)
        queued = [_inline_job(11), _inline_job(12)]
        for job in (in_flight, *queued):
            assert await queue.enqueue(job)
        await until(lambda: _true(slack_api.calls_to("download")), "the download to start")
        own_redis.kill()
        slack_api.hold_downloads.set()  # the worker finishes the engine run with Redis down
        own_redis.start()
        await until(own_redis.ready, "redis-server to restart")

        after = _inline_job(13)
        assert await queue.enqueue(after)
        # Dedupe keys survived the restart too.
        assert not await queue.enqueue(_inline_job(11))
        everything = [*before, in_flight, *queued, after]
        await until(lambda: _true(all(_answers(slack_api, j) for j in everything)), "every reply", 90)
        await until(queue.idle, "the queue to be empty")
    finally:
        stop.set()
        await running
        await redis.aclose()
    for job in everything:
        assert len(_answers(slack_api, job)) == 1, job.dedupe_key


# -- Slack answering 429 and 500 -------------------------------------------------------------


async def test_reply_arrives_through_429_and_500(stack: WorkerStack, engine_pool: Any) -> None:
    slack = stack.slack
    job = _inline_job(1)
    await stack.queue.enqueue(job)
    # One 429 (Retry-After: 1), then more 500s than the client retries: the first delivery
    # fails, the job stays pending, and the second delivery gets the reply through.
    slack.fail_next("chat.postMessage", 429)
    slack.fail_next("chat.postMessage", 500, times=4)
    await stack.worker(executor=engine_pool).drain(timeout_s=60)
    statuses = [c.status for c in slack.calls_to("chat.postMessage")]
    assert statuses == [429, 500, 500, 500, 500, 200]
    [reply] = _answers(slack, job)
    assert "apex" in str(reply.blocks)
    assert await stack.queue.dead_letters() == []


# -- a poison job ----------------------------------------------------------------------------


async def test_poison_job_goes_to_dead_letters_with_an_error_reply(
    stack: WorkerStack, redis_url: str, key_prefix: str
) -> None:
    job = _inline_job(1)
    healthy = _inline_job(2)
    await stack.queue.enqueue(job)
    worker = stack.worker(engine=crashing_engine)
    await worker.drain(timeout_s=60)
    [reply] = _answers(stack.slack, job)
    assert "gave up" in reply.text and "denpex jobs dead-letter retry" in reply.text
    [letter] = await stack.queue.dead_letters()
    assert letter.reason == "failed 3 times"
    assert letter.deliveries == 4
    assert await stack.queue.idle()

    # The queue still works, and an operator can list and retry the dead letter.
    await stack.queue.enqueue(healthy)
    await stack.worker().drain(timeout_s=60)
    assert len(_answers(stack.slack, healthy)) == 1
    base = ["jobs", "--redis-url", redis_url, "--prefix", key_prefix, "dead-letter"]
    assert await asyncio.to_thread(cli.main, [*base, "list"]) == 0
    assert await asyncio.to_thread(cli.main, [*base, "retry", letter.entry_id]) == 0
    assert await stack.queue.dead_letters() == []
    assert (await stack.queue.stats())["lag"] == 1


# -- two worker processes share the group ----------------------------------------------------


async def test_two_worker_processes_split_the_load(
    stack: WorkerStack, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    await stack.queue.setup()
    procs = [
        _spawn_worker(redis_url, key_prefix, stack.slack, name, tmp_path) for name in ("worker-a", "worker-b")
    ]

    async def both_reading() -> bool:
        consumers = await stack.redis.xinfo_consumers(stack.keys.jobs, stack.keys.group)
        return {c["name"] for c in consumers} == {"worker-a", "worker-b"}

    try:
        await until(both_reading, "both workers to join the group")
        jobs = [_inline_job(n) for n in range(12)]
        for job in jobs:
            await stack.queue.enqueue(job)
        await until(lambda: _true(all(_answers(stack.slack, j) for j in jobs)), "every reply")
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [await asyncio.to_thread(p.wait, 60) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert codes == [0, 0]  # SIGTERM is a clean stop
    assert all(len(_answers(stack.slack, j)) == 1 for j in jobs)
    done_by = [(await stack.queue.progress(j.id))["worker"] for j in jobs]
    assert set(done_by) == {"worker-a", "worker-b"}
    assert await stack.queue.idle()


async def test_worker_survives_its_stream_being_deleted(stack: WorkerStack, engine_pool: Any) -> None:
    # Redis restarted without persistence (or FLUSHDB): the group is gone with the stream.
    worker = stack.worker(executor=engine_pool, poll_block_ms=50)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        first = _inline_job(1)
        await stack.queue.enqueue(first)
        await until(lambda: _true(_answers(stack.slack, first)), "the first reply")
        await stack.redis.delete(stack.keys.jobs)
        second = _inline_job(2)
        await stack.queue.enqueue(second)
        await until(lambda: _true(_answers(stack.slack, second)), "a reply after the stream was deleted")
    finally:
        stop.set()
        await running
    assert len(_answers(stack.slack, second)) == 1


async def test_reply_posted_but_not_recorded_is_not_posted_again(
    stack: WorkerStack, engine_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis fails right after Slack took the reply: the job stays pending and is retried.
    record = stack.queue.set_progress
    failures = []

    async def flaky(job_id: str, **fields: str) -> None:
        if "replied" in fields and not failures:
            failures.append(fields)
            raise redis.exceptions.ConnectionError("Redis went away")
        await record(job_id, **fields)

    monkeypatch.setattr(stack.queue, "set_progress", flaky)
    job = _inline_job(1)
    await stack.queue.enqueue(job)
    await stack.worker(executor=engine_pool).drain(timeout_s=60)
    assert failures  # the first attempt did post, then failed to record it
    [reply] = _answers(stack.slack, job)
    progress = await stack.queue.progress(job.id)
    assert (progress["replied"], progress["reply_ts"]) == ("found", reply.ts)
    assert await stack.queue.idle()
