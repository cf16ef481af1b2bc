"""The worker end to end: real Redis, the real engine in a process pool, the Slack stand-in."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from bot.jobs.limits import WorkerLimits
from bot.jobs.worker import JobContext
from bot.slack.render import render_diagnosis
from handlers.jobs import Job, LogRef
from signatures import Source, Status, diagnose
from signatures.diagnosis import Diagnosis
from tests.conftest import WorkerStack

LOG = (
    b"2026-11-02 10:00:01 [rank1]: step 118 loss 2.31\n"
    b"[rank0]: Traceback (most recent call last):\n"
    b'[rank0]:   File "train.py", line 3, in <module>\n'
    b"[rank0]:     import flash_attn\n"
    b"[rank0]: ModuleNotFoundError: No module named 'flash_attn'\n"
    b"E1102 10:00:02 torch/distributed/elastic/multiprocessing/api.py:881] failed (exitcode: 1)\n"
)


def _expected(data: bytes = LOG, name: str = "rank0.log") -> Diagnosis:
    return diagnose([Source.from_bytes(name, data)])


def _file_job(stack: WorkerStack, data: bytes = LOG, name: str = "rank0.log", **kw: Any) -> Job:
    f = stack.slack.add_file(name, data)
    kw.setdefault("channel", "C1")
    kw.setdefault("thread_ts", "1700.000001")
    return Job(
        source="file",
        dedupe_key=f["id"],
        logs=[LogRef("slack_file", name, file_id=f["id"], size=len(data))],
        **kw,
    )


def _replies(stack: WorkerStack, thread_ts: str = "1700.000001", channel: str = "C1") -> list[Any]:
    return stack.slack.thread(channel, thread_ts)


def hanging_engine(files: list[tuple[str, str]], max_text_bytes: int) -> dict[str, Any]:
    """An engine stuck in Python code (the alarm in the pool process stops it)."""
    time.sleep(600)
    return {}


async def test_file_job_is_diagnosed_answered_stored_and_acknowledged(
    stack: WorkerStack, engine_pool: Any
) -> None:
    job = _file_job(stack)
    assert await stack.queue.enqueue(job)
    worker = stack.worker(executor=engine_pool)
    assert await worker.drain() == 1

    expected = _expected()
    [reply] = _replies(stack)
    assert reply.blocks == render_diagnosis(expected, job_meta={}).blocks
    stored = await stack.store.by_thread("C1", "1700.000001")
    assert stored is not None and stored.diagnosis == expected.to_dict()
    assert stored.reply_ts == reply.ts
    assert [d.id for d in await stack.store.history("C1")] == [job.id]
    # The download carried the bot token, and the job is gone from the queue.
    [download] = stack.slack.calls_to("download")
    assert download.headers["Authorization"] == f"Bearer {stack.slack.token}"
    assert await stack.queue.idle()
    assert (await stack.queue.stats())["length"] == 0


async def test_slash_job_opens_a_thread_and_puts_the_headline_on_it(
    stack: WorkerStack, engine_pool: Any
) -> None:
    job = Job(
        source="slash",
        dedupe_key="trigger-1",
        channel="C1",
        header="Job 4242 failed on 16 nodes",
        logs=[LogRef("inline", "rank0.log", text=LOG.decode())],
    )
    await stack.queue.enqueue(job)
    await stack.worker(executor=engine_pool).drain()
    parent, reply = stack.slack.messages
    assert reply.thread_ts == parent.ts
    assert "Job 4242 failed on 16 nodes" in parent.text
    assert _expected().headline in parent.text  # updated with chat.update
    assert await stack.store.by_thread("C1", parent.ts) is not None


async def test_precomputed_diagnosis_skips_the_engine(stack: WorkerStack) -> None:
    expected = _expected()
    job = Job(
        source="report",
        dedupe_key="report-1",
        channel="C1",
        thread_ts="1700.000001",
        precomputed=expected.to_dict(),
    )
    await stack.queue.enqueue(job)
    worker = stack.worker()
    await worker.drain()
    [reply] = _replies(stack)
    assert reply.blocks == render_diagnosis(expected, job_meta={}).blocks
    assert not worker.engine_pool.started  # no engine process was started
    assert stack.slack.calls_to("download") == []


async def test_invalid_precomputed_report_gets_an_error_reply(stack: WorkerStack) -> None:
    job = Job(source="report", dedupe_key="r", channel="C1", thread_ts="1.0", precomputed={})
    await stack.queue.enqueue(job)
    await stack.worker().drain()
    [reply] = _replies(stack, "1.0")
    assert "not a Denpex diagnosis" in reply.text


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("core.bin", b"\x7fELF\x00\x00\x01\x02" * 4096, "binary"),
        ("logs.gz", gzip.compress(LOG)[:40] + b"\x00garbage", ""),
        ("logs.zip", b"PK\x03\x04" + b"\x00" * 64, ""),
    ],
    ids=["binary", "truncated-gzip", "corrupt-zip"],
)
async def test_unreadable_logs_get_the_engine_s_message(
    stack: WorkerStack, engine_pool: Any, name: str, data: bytes, says: str
) -> None:
    with pytest.raises(Exception) as raised:
        diagnose([Source.from_bytes(name, data)])
    message = str(raised.value)
    await stack.queue.enqueue(_file_job(stack, data, name))
    await stack.worker(executor=engine_pool).drain()
    [reply] = _replies(stack)
    assert message in reply.text
    assert says in message.lower()
    assert await stack.queue.idle()


async def test_file_over_the_size_limit_is_refused_before_download(stack: WorkerStack) -> None:
    await stack.queue.enqueue(_file_job(stack, LOG * 100))
    await stack.worker(limits=WorkerLimits(max_log_bytes=1024)).drain()
    [reply] = _replies(stack)
    assert "larger than" in reply.text
    assert stack.slack.calls_to("download") == []


async def test_download_cut_off_past_the_size_limit(stack: WorkerStack) -> None:
    # The event did not say how big the file is; the stream is cut past the limit.
    f = stack.slack.add_file("big.log", LOG * 100)
    job = Job(
        source="file",
        dedupe_key="F-big",
        channel="C1",
        thread_ts="1.0",
        logs=[LogRef("slack_file", "big.log", url=f["url_private_download"])],
    )
    await stack.queue.enqueue(job)
    await stack.worker(limits=WorkerLimits(max_log_bytes=1024)).drain()
    [reply] = _replies(stack, "1.0")
    assert "big.log is larger than" in reply.text


async def test_login_page_instead_of_the_file_is_an_error(stack: WorkerStack) -> None:
    stack.slack.download_token = "xoxb-someone-else"
    await stack.queue.enqueue(_file_job(stack))
    await stack.worker().drain()
    [reply] = _replies(stack)
    assert "files:read" in reply.text


async def test_missing_slack_file_is_an_error(stack: WorkerStack) -> None:
    job = Job(
        source="file",
        dedupe_key="F404",
        channel="C1",
        thread_ts="1.0",
        logs=[LogRef("slack_file", "gone.log", file_id="F404")],
    )
    await stack.queue.enqueue(job)
    await stack.worker().drain()
    [reply] = _replies(stack, "1.0")
    assert "file_not_found" in reply.text


async def test_time_limit_stops_the_engine_with_a_clear_reply(stack: WorkerStack) -> None:
    await stack.queue.enqueue(_file_job(stack))
    worker = stack.worker(engine=hanging_engine, limits=WorkerLimits(job_timeout_s=0.5))
    await worker.drain()
    [reply] = _replies(stack)
    assert "took longer than 0.5 s" in reply.text
    assert await stack.queue.idle()


async def test_downloads_go_to_a_temporary_directory_that_is_removed(
    stack: WorkerStack, engine_pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    await stack.queue.enqueue(_file_job(stack))
    await stack.queue.enqueue(_file_job(stack, b"\x00\x01" * 5000, "bad.bin"))
    await stack.worker(executor=engine_pool).drain()
    assert len(_replies(stack)) == 2
    assert os.listdir(tmp_path) == []


async def test_recurrence_is_told_on_the_second_diagnosis(stack: WorkerStack, engine_pool: Any) -> None:
    assert _expected().status is Status.FAILURE
    await stack.queue.enqueue(_file_job(stack, thread_ts="1.0"))
    await stack.queue.enqueue(_file_job(stack, thread_ts="2.0"))
    await stack.worker(executor=engine_pool).drain()
    [first] = _replies(stack, "1.0")
    [second] = _replies(stack, "2.0")
    assert "time this week" not in str(first.blocks)
    assert "2nd time this week in this channel" in str(second.blocks)


async def test_jobs_of_other_kinds_go_to_registered_handlers(stack: WorkerStack) -> None:
    seen: list[tuple[Job, int]] = []

    async def followup(job: Job, ctx: JobContext) -> None:
        seen.append((job, ctx.delivery.deliveries))
        from bot.slack.render import render_text

        await ctx.replier.post(job, render_text(f"answer to {job.text}"), thread_ts=job.thread_ts)

    worker = stack.worker()
    worker.register_handler("followup", followup)
    job = Job(source="thread", dedupe_key="q1", channel="C1", thread_ts="1.0", kind="followup", text="why")
    await stack.queue.enqueue(job)
    await stack.queue.enqueue(Job(source="thread", dedupe_key="q2", channel="C1",
                                  thread_ts="2.0", kind="no-such-kind"))  # fmt: skip
    await worker.drain()
    assert seen == [(job, 1)]
    [answer] = _replies(stack, "1.0")
    assert answer.text == "answer to why"
    [refused] = _replies(stack, "2.0")
    assert "no-such-kind" in refused.text


async def test_unreadable_payload_is_dead_lettered_with_a_reply(stack: WorkerStack) -> None:
    # A job written by a newer Denpex: this worker cannot read it, but can say so.
    payload = Job(source="slash", dedupe_key="v2", channel="C1", thread_ts="1.0").to_dict()
    payload["version"] = 99

    await stack.redis.xadd(stack.keys.jobs, {"job": json.dumps(payload)})
    await stack.worker().drain()
    [reply] = _replies(stack, "1.0")
    assert "version 99" in reply.text
    [letter] = await stack.queue.dead_letters()
    assert "version 99" in letter.reason


async def test_stop_finishes_the_job_in_flight(stack: WorkerStack, engine_pool: Any) -> None:
    stack.slack.hold_downloads = asyncio.Event()
    await stack.queue.enqueue(_file_job(stack))
    worker = stack.worker(executor=engine_pool, poll_block_ms=50)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    while not stack.slack.calls_to("download"):
        await asyncio.sleep(0.01)
    stop.set()  # what SIGTERM does
    stack.slack.hold_downloads.set()
    await running
    assert len(_replies(stack)) == 1
    assert await stack.queue.idle()


async def test_stop_hands_back_a_job_that_does_not_finish(stack: WorkerStack) -> None:
    stack.slack.hold_downloads = asyncio.Event()
    await stack.queue.enqueue(_file_job(stack))
    worker = stack.worker(poll_block_ms=50, shutdown_grace_s=0.1)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    while not stack.slack.calls_to("download"):
        await asyncio.sleep(0.01)
    stop.set()
    await running
    assert _replies(stack) == []
    # Not lost, and claimable by the next worker without waiting for the visibility timeout.
    [claimed] = await stack.queue.claim_stale("next-worker")
    assert claimed.job().logs[0].name == "rank0.log"


async def test_embedded_fakeredis_runs_the_same_worker(
    fake_redis: Any, slack_api: Any, engine_pool: Any
) -> None:
    # Without REDIS_URL, `denpex serve` runs queue, worker and store on an in-process fakeredis.
    from bot.jobs.keys import Keys
    from bot.jobs.queue import JobQueue
    from bot.jobs.store import Store
    from bot.kinds.registry import make_worker
    from bot.slack.reply import SlackReplier, make_client

    keys = Keys("embedded")
    queue = JobQueue(fake_redis, keys=keys)
    replier = SlackReplier(make_client(slack_api.token, slack_api.api_url))
    worker = make_worker(
        queue, Store(fake_redis, keys=keys), replier, executor=engine_pool, retry_backoff_ms=0
    )
    job = Job(source="webhook", dedupe_key="j1", channel="C1", thread_ts="1.0",
              logs=[LogRef("inline", "rank0.log", text=LOG.decode())])  # fmt: skip
    try:
        assert await queue.enqueue(job)
        assert not await queue.enqueue(job)
        assert await worker.drain() == 1
    finally:
        await worker.close()
    [reply] = slack_api.thread("C1", "1.0")
    assert reply.blocks == render_diagnosis(_expected(), job_meta={}).blocks
    assert await queue.idle()


async def test_refused_download_is_an_error(stack: WorkerStack) -> None:
    stack.slack.fail_next("download", 403)
    await stack.queue.enqueue(_file_job(stack))
    await stack.worker().drain()
    [reply] = _replies(stack)
    assert "refused the download of rank0.log (HTTP 403)" in reply.text


async def test_url_logs_without_a_fetcher_are_an_error(stack: WorkerStack) -> None:
    job = Job(
        source="webhook",
        dedupe_key="hook-1",
        channel="C1",
        thread_ts="1.0",
        logs=[LogRef("url", "rank0.log", url="https://logs.example/rank0.log")],
    )
    await stack.queue.enqueue(job)
    await stack.worker().drain()
    [reply] = _replies(stack, "1.0")
    assert "URL is not enabled" in reply.text


def test_log_names_cannot_leave_the_job_directory() -> None:
    from bot.fetch.logs import safe_file_name as _file_name

    assert _file_name("../../etc/passwd") == "passwd"
    assert _file_name("..") == "log"
    assert _file_name("C:\\logs\\rank 3.log.gz") == "rank_3.log.gz"
    assert "/" not in _file_name("a/b/../c.zip")
