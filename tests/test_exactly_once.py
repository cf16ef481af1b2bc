"""Exactly one parent and one reply per job, whatever Slack or Redis do.

Slack may take a post and answer after the client gave up, or answer 500 to a post it made;
Redis may fail between the post and the record of it. Each case runs a real worker on a real
Redis against the Slack stand-in and counts what is left in the channel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis.exceptions

from bot.jobs.outcomes import ROLE_PARENT, ROLE_REPLY
from bot.slack.once import LEGACY_REPLY_EVENT, tag
from bot.slack.reply import SlackReplier, make_client
from handlers.jobs import Job, LogRef
from tests.conftest import WorkerStack
from tests.slack_standin import SlackStandin

LOG = "[rank0]: Traceback (most recent call last):\n[rank0]: ModuleNotFoundError: No module named 'apex'\n"
CLIENT_TIMEOUT_S = 1.0


def _job(n: int = 1, *, thread_ts: str | None = None) -> Job:
    return Job(
        source="webhook",
        dedupe_key=f"once-{n}",
        channel="C1",
        thread_ts=thread_ts,
        logs=[LogRef("inline", f"job{n}.log", text=LOG)],
        header=f"Job {n} failed",
    )


@pytest.fixture
def quick(stack: WorkerStack) -> Iterator[WorkerStack]:
    """The stack with a Slack client that gives up after a second (Slack answers later)."""
    stack.replier = SlackReplier(
        make_client(stack.slack.token, stack.slack.api_url, timeout=CLIENT_TIMEOUT_S), retry_delay_s=0.05
    )
    yield stack


def _parents(slack: SlackStandin) -> list[Any]:
    return slack.top_level("C1")


def _one_parent_one_reply(slack: SlackStandin, job: Job) -> tuple[Any, Any]:
    [parent] = _parents(slack)
    [reply] = slack.thread("C1", parent.ts)
    assert parent.metadata == tag(job.id, ROLE_PARENT)
    assert reply.metadata == tag(job.id, ROLE_REPLY)
    assert "apex" in str(reply.blocks)
    return parent, reply


async def test_parent_answered_after_the_client_timeout_is_posted_once(
    quick: WorkerStack, engine_pool: Any
) -> None:
    slack = quick.slack
    slack.answer_late("chat.postMessage", CLIENT_TIMEOUT_S + 1.0)  # the parent lands, unseen
    job = _job()
    await quick.queue.enqueue(job)
    await quick.worker(executor=engine_pool).drain(timeout_s=60)
    parent, _reply = _one_parent_one_reply(slack, job)
    assert len(slack.calls_to("chat.postMessage")) == 2  # the parent once, the reply once
    assert slack.calls_to("conversations.history")  # it looked before posting again
    progress = await quick.queue.progress(job.id)
    assert progress["parent_ts"] == parent.ts and slack.deleted == []


async def test_reply_answered_after_the_client_timeout_is_posted_once(
    quick: WorkerStack, engine_pool: Any
) -> None:
    slack = quick.slack
    slack.answer_late("chat.postMessage", CLIENT_TIMEOUT_S + 1.0)
    job = _job(thread_ts="1700.000001")
    await quick.queue.enqueue(job)
    await quick.worker(executor=engine_pool).drain(timeout_s=60)
    [reply] = slack.thread("C1", "1700.000001")
    assert len(slack.calls_to("chat.postMessage")) == 1
    assert (await quick.queue.progress(job.id))["reply_ts"] == reply.ts


async def test_a_post_that_landed_behind_a_500_is_not_posted_again(
    quick: WorkerStack, engine_pool: Any
) -> None:
    slack = quick.slack
    # Slack posts the parent, then answers 500: the client must not blindly post it again.
    slack.fail_next("chat.postMessage", 500, landed=True)
    job = _job()
    await quick.queue.enqueue(job)
    await quick.worker(executor=engine_pool).drain(timeout_s=60)
    _one_parent_one_reply(slack, job)
    assert [c.status for c in slack.calls_to("chat.postMessage")] == [500, 200]


async def test_redis_fails_between_posting_the_parent_and_recording_it(
    quick: WorkerStack, engine_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = _redis_fails_once_recording("parent_ts", quick, monkeypatch)
    job = _job()
    await quick.queue.enqueue(job)
    await quick.worker(executor=engine_pool).drain(timeout_s=60)
    assert failures  # the first attempt posted the parent, then could not record it
    parent, reply = _one_parent_one_reply(quick.slack, job)
    progress = await quick.queue.progress(job.id)
    assert (progress["parent_ts"], progress["reply_ts"]) == (parent.ts, reply.ts)
    assert await quick.queue.idle()


async def test_redis_fails_between_posting_the_reply_and_recording_it(
    quick: WorkerStack, engine_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = _redis_fails_once_recording("replied", quick, monkeypatch)
    job = _job()
    await quick.queue.enqueue(job)
    await quick.worker(executor=engine_pool).drain(timeout_s=60)
    assert failures
    _parent, reply = _one_parent_one_reply(quick.slack, job)
    progress = await quick.queue.progress(job.id)
    assert (progress["replied"], progress["reply_ts"]) == ("found", reply.ts)


async def test_a_duplicate_parent_that_slipped_through_is_deleted(
    quick: WorkerStack, engine_pool: Any
) -> None:
    slack = quick.slack
    job = _job()
    # Another attempt recorded its intent and posted the parent; this one cannot read the
    # channel's history at first, so it posts a second parent, then finds and deletes it.
    await quick.queue.mark_intent(job.id, "parent_intent")
    earlier = await quick.replier.client.chat_postMessage(
        channel="C1", text="Job 1 failed", metadata=tag(job.id, ROLE_PARENT)
    )
    slack.fail_next("conversations.history", error="missing_scope")
    await quick.queue.enqueue(job)
    await quick.worker(executor=engine_pool).drain(timeout_s=60)
    [parent] = _parents(slack)
    assert parent.ts == earlier["ts"]  # the earliest is kept
    [deleted] = slack.deleted
    assert float(deleted.ts) > float(parent.ts)
    assert len(slack.thread("C1", parent.ts)) == 1


async def test_a_reply_posted_by_an_older_denpex_is_recognised(stack: WorkerStack) -> None:
    job = _job(thread_ts="1700.000009")
    legacy = {"event_type": LEGACY_REPLY_EVENT, "event_payload": {"job_id": job.id}}
    posted = await stack.replier.client.chat_postMessage(
        channel="C1", thread_ts="1700.000009", text="answer", metadata=legacy
    )
    assert await stack.replier.find_reply(job, "C1", "1700.000009") == posted["ts"]
    assert await stack.replier.find_reply(_job(2), "C1", "1700.000009") is None


def crashing_engine(files: list[tuple[str, str]], max_text_bytes: int) -> dict[str, Any]:
    """A log that kills the engine's process every time."""
    import os

    os._exit(3)


async def test_the_given_up_note_is_posted_once_when_dead_lettering_fails(
    stack: WorkerStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    move = stack.queue.dead_letter
    failures: list[str] = []

    async def flaky(delivery: Any, reason: str) -> str:
        if not failures:
            failures.append(reason)
            raise redis.exceptions.ConnectionError("Redis went away")
        return await move(delivery, reason)

    monkeypatch.setattr(stack.queue, "dead_letter", flaky)
    job = _job(thread_ts="1700.000050")
    await stack.queue.enqueue(job)
    await stack.worker(engine=crashing_engine).drain(timeout_s=60)
    assert failures  # the note was posted, then the move to the dead letters failed once
    [note] = stack.slack.thread("C1", "1700.000050")
    assert "gave up" in note.text and note.metadata == tag(job.id, "gave_up")
    assert len(await stack.queue.dead_letters()) == 1


def _redis_fails_once_recording(
    field: str, quick: WorkerStack, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, str]]:
    """Make the first ``set_progress`` that records ``field`` fail as if Redis went away;
    the returned list holds the fields of that failed call."""
    record = quick.queue.set_progress
    failures: list[dict[str, str]] = []

    async def flaky(job_id: str, **fields: str) -> None:
        if field in fields and not failures:
            failures.append(fields)
            raise redis.exceptions.ConnectionError("Redis went away")
        await record(job_id, **fields)

    monkeypatch.setattr(quick.queue, "set_progress", flaky)
    return failures
