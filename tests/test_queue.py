"""The job queue: payloads, key names, enqueue/read/ack, dedupe, bounds, claims, dead letters."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bot.jobs.keys import GROUP, Keys
from bot.jobs.queue import JobQueue, QueueFull
from handlers.jobs import JOB_VERSION, Job, JobFormatError, LogRef, UnknownJobVersion


def _job(key: str = "ev-1", **kwargs: Any) -> Job:
    kwargs.setdefault("channel", "C1")
    kwargs.setdefault("logs", [LogRef("inline", "rank0.log", text="hello")])
    return Job(source="slash", dedupe_key=key, **kwargs)


# -- payloads and key names (no server needed) -----------------------------------------------


def test_job_round_trips_through_json() -> None:
    job = _job(
        thread_ts="1700.1",
        logs=[LogRef("slack_file", "r.log", file_id="F1", size=12), LogRef("url", "u", url="https://x/y")],
        meta={"job": "42"},
        precomputed={"status": "clean"},
        kind="followup",
        text="why?",
    )
    again = Job.from_json(job.to_json())
    assert again == job
    assert json.loads(job.to_json())["version"] == JOB_VERSION


def test_unknown_version_is_rejected_with_its_own_exception() -> None:
    data = json.loads(_job().to_json())
    data["version"] = JOB_VERSION + 1
    with pytest.raises(UnknownJobVersion) as caught:
        Job.from_json(json.dumps(data))
    assert caught.value.version == JOB_VERSION + 1
    del data["version"]
    with pytest.raises(UnknownJobVersion):
        Job.from_json(json.dumps(data))


@pytest.mark.parametrize(
    "change",
    [
        {"source": "carrier-pigeon"},
        {"dedupe_key": ""},
        {"logs": [{"kind": "ftp", "name": "x"}]},
        {"meta": {"a": 1}},
        {"channel": 5},
        {"precomputed": "not an object"},
    ],
)
def test_malformed_payloads_are_rejected(change: dict[str, Any]) -> None:
    data = json.loads(_job().to_json())
    data.update(change)
    with pytest.raises(JobFormatError):
        Job.from_json(json.dumps(data))


def test_payload_that_is_not_json_is_rejected() -> None:
    with pytest.raises(JobFormatError):
        Job.from_json(b"\x80\x04pickle")


def test_every_key_lives_under_the_prefix() -> None:
    keys = Keys("p1")
    names = [
        keys.jobs,
        keys.dead,
        keys.dedupe("Ev1"),
        keys.job_progress("j"),
        keys.diagnosis("d"),
        keys.thread("C1", "1.2"),
        keys.history("C1"),
        keys.occurrences("sig", "C1"),
        keys.occurrences("sig"),
        keys.feedback("d"),
        keys.signature_stats("sig"),
    ]
    assert all(n.startswith("p1:") for n in names)
    assert len(set(names)) == len(names)
    assert keys.group == GROUP
    # A dedupe key from outside cannot make an unbounded or odd key name.
    assert len(keys.dedupe("x " * 500)) < 100


# -- against a real redis-server -------------------------------------------------------------


@pytest.fixture
def queue(redis_client: Any, key_prefix: str) -> JobQueue:
    return JobQueue(redis_client, keys=Keys(key_prefix), visibility_timeout_ms=50)


async def test_enqueue_read_ack(queue: JobQueue) -> None:
    job = _job()
    assert await queue.enqueue(job)
    [delivery] = await queue.read("w1", count=10)
    assert delivery.job() == job
    assert delivery.deliveries == 1
    assert (await queue.stats())["pending"] == 1
    assert await queue.ack(delivery.entry_id)
    stats = await queue.stats()
    assert stats["pending"] == 0
    assert stats["length"] == 0  # acknowledged entries are trimmed
    assert await queue.read("w1") == []


async def test_same_dedupe_key_makes_one_job(queue: JobQueue) -> None:
    assert await queue.enqueue(_job("Ev-retry"))
    # Slack's retry of the same event, and the second file event of one upload.
    assert not await queue.enqueue(_job("Ev-retry"))
    assert not await queue.enqueue(_job("Ev-retry", channel="C2"))
    assert await queue.enqueue(_job("Ev-other"))
    assert (await queue.stats())["length"] == 2


async def test_full_backlog_refuses_and_releases_the_dedupe_key(redis_client: Any, key_prefix: str) -> None:
    queue = JobQueue(redis_client, keys=Keys(key_prefix), max_backlog=2)
    assert await queue.enqueue(_job("a"))
    assert await queue.enqueue(_job("b"))
    with pytest.raises(QueueFull, match="2 jobs waiting"):
        await queue.enqueue(_job("c"))
    # Once a job is done there is room, and "c" was not remembered as a duplicate.
    [first] = await queue.read("w1")
    await queue.ack(first.entry_id)
    assert await queue.enqueue(_job("c"))
    assert (await queue.stats())["length"] == 2


async def test_trim_never_drops_undelivered_or_unacknowledged_entries(queue: JobQueue) -> None:
    for i in range(5):
        await queue.enqueue(_job(f"k{i}"))
    delivered = await queue.read("w1", count=3)
    # Ack the second and third: the first is still pending, so nothing may be trimmed yet.
    await queue.ack(delivered[1].entry_id)
    await queue.ack(delivered[2].entry_id)
    stats = await queue.stats()
    assert stats["length"] == 5
    assert stats["pending"] == 1
    await queue.ack(delivered[0].entry_id)
    stats = await queue.stats()
    assert stats["length"] == 2  # the two never delivered
    rest = await queue.read("w1", count=10)
    assert [d.job().dedupe_key for d in rest] == ["k3", "k4"]


async def test_stale_entries_are_claimed_and_counted(queue: JobQueue) -> None:
    await queue.enqueue(_job())
    [first] = await queue.read("dead-worker")
    # The visibility timeout (50 ms) passes with the entry unacknowledged.
    claimed: list[Any] = []
    while not claimed:
        claimed = await queue.claim_stale("w2", min_idle_ms=50)
    assert claimed[0].entry_id == first.entry_id
    assert claimed[0].deliveries == 2
    again = await queue.reclaim_own("w2", min_idle_ms=0)
    assert [d.deliveries for d in again] == [3]


async def test_touch_keeps_a_running_job_from_being_claimed(queue: JobQueue) -> None:
    await queue.enqueue(_job())
    [mine] = await queue.read("w1")
    assert await queue.touch(mine.entry_id, "w1")
    assert await queue.claim_stale("w2", min_idle_ms=60_000) == []
    assert not await queue.touch(mine.entry_id, "someone-else")


async def test_dead_letter_then_retry(queue: JobQueue) -> None:
    job = _job()
    await queue.enqueue(job)
    [delivery] = await queue.read("w1")
    await queue.set_progress(job.id, replied="error", reply_ts="1.1", parent_ts="1.0")
    await queue.dead_letter(delivery, "failed 3 times")
    stats = await queue.stats()
    assert (stats["pending"], stats["dead"]) == (0, 1)
    [letter] = await queue.dead_letters()
    assert (letter.reason, letter.original_id) == ("failed 3 times", delivery.entry_id)
    assert Job.from_json(letter.payload) == job

    assert await queue.retry_dead(letter.entry_id) is not None
    assert await queue.retry_dead(letter.entry_id) is None
    [again] = await queue.read("w1")
    assert again.job() == job
    progress = await queue.progress(job.id)
    # The retry may post its answer, in the thread the first attempt opened.
    assert "replied" not in progress
    assert progress["parent_ts"] == "1.0"


async def test_hand_back_makes_an_entry_claimable_at_once(redis_client: Any, key_prefix: str) -> None:
    queue = JobQueue(redis_client, keys=Keys(key_prefix), visibility_timeout_ms=60_000)
    await queue.enqueue(_job())
    [delivery] = await queue.read("stopping-worker")
    assert await queue.claim_stale("w2") == []
    await queue.hand_back(delivery.entry_id, "stopping-worker")
    [claimed] = await queue.claim_stale("w2")
    assert claimed.entry_id == delivery.entry_id


async def test_embedded_fakeredis_runs_the_same_queue(fake_redis: Any) -> None:
    queue = JobQueue(fake_redis, keys=Keys("embedded"))
    assert await queue.enqueue(_job())
    assert not await queue.enqueue(_job())
    [delivery] = await queue.read("w1")
    await queue.ack(delivery.entry_id)
    assert await queue.idle()


async def test_own_retries_back_off_with_each_delivery(queue: JobQueue) -> None:
    await queue.enqueue(_job())
    await queue.read("w1")
    # Delivered once: ready after 50 ms. Delivered twice: only after 50 * 4 ms.
    first: list[Any] = []
    while not first:
        claimed_at = time.monotonic()  # no later than the server's claim
        first = await queue.reclaim_own("w1", min_idle_ms=50, backoff=4)
    assert first[0].deliveries == 2
    second: list[Any] = []
    while not second:
        second = await queue.reclaim_own("w1", min_idle_ms=50, backoff=4)
    assert second[0].deliveries == 3
    assert time.monotonic() - claimed_at >= 0.2
