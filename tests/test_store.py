"""The store: diagnoses by thread, channel history, recurrence, feedback and retention."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.jobs.keys import Keys
from bot.jobs.store import Recurrence, Store, fingerprint, ordinal, recurrence_text
from handlers.jobs import Job

DAY = 24 * 3600
NOW = 1_800_000_000.0


def _diag(sig: str | None = "cuda-oom", captures: dict[str, str] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "status": "failure" if sig else "unrecognized",
        "signature": {"id": sig, "title": sig, "category": "gpu", "role": "initiating"} if sig else None,
        "initiating": {"file": "r0.log", "line": 3, "text": "token=[REDACTED] boom"},
    }
    if captures:
        d["captures"] = captures
    return d


def _job(source: str = "file") -> Job:
    return Job(source=source, dedupe_key="k", channel="C1")


@pytest.fixture
def store(fake_redis: Any) -> Store:
    return Store(fake_redis, keys=Keys("st"), retention_s=3 * DAY, history_len=3)


async def test_saved_diagnosis_is_found_by_its_thread(store: Store) -> None:
    job = _job("slash")
    await store.save("d1", _diag(), job=job, channel="C1", thread_ts="1.5", now=NOW)
    found = await store.by_thread("C1", "1.5")
    assert found is not None
    assert found.id == "d1"
    assert found.diagnosis == _diag()
    assert (found.channel, found.thread_ts, found.source) == ("C1", "1.5", "slash")
    assert found.signature_id == "cuda-oom"
    assert await store.by_thread("C1", "9.9") is None
    await store.set_reply("d1", "1.6")
    assert (await store.get("d1")).reply_ts == "1.6"  # type: ignore[union-attr]


async def test_history_is_newest_first_and_bounded(store: Store) -> None:
    for i in range(5):
        await store.save(f"d{i}", _diag(), job=_job(), channel="C1", thread_ts=f"{i}.0", now=NOW + i)
    ids = [d.id for d in await store.history("C1", limit=10)]
    assert ids == ["d4", "d3", "d2"]
    assert await store.history("C2") == []


async def test_saving_again_counts_once(store: Store) -> None:
    # A retried job stores the same diagnosis twice.
    for _ in range(2):
        await store.save("d1", _diag(), job=_job(), channel="C1", thread_ts="1.0", now=NOW)
    assert [d.id for d in await store.history("C1")] == ["d1"]
    assert (await store.signature_stats("cuda-oom")).diagnoses == 1
    fp = fingerprint(_diag())
    assert fp is not None
    assert (await store.recurrence(fp, "C1", now=NOW)).in_channel == 1


async def test_recurrence_counts_signature_and_captures_in_a_window(store: Store) -> None:
    oom0 = _diag(captures={"device": "0"})
    oom1 = _diag(captures={"device": "1"})
    await store.save("a", oom0, job=_job(), channel="C1", thread_ts="1", now=NOW - 8 * DAY)
    await store.save("b", oom0, job=_job(), channel="C1", thread_ts="2", now=NOW - DAY)
    await store.save("c", oom0, job=_job(), channel="C2", thread_ts="3", now=NOW - 1)
    await store.save("d", oom0, job=_job(), channel="C1", thread_ts="4", now=NOW)
    await store.save("e", oom1, job=_job(), channel="C1", thread_ts="5", now=NOW)
    fp = fingerprint(oom0)
    assert fp is not None and fp != fingerprint(oom1)
    rec = await store.recurrence(fp, "C1", now=NOW)
    assert (rec.in_channel, rec.everywhere) == (2, 3)  # "a" is older than a week
    assert recurrence_text(rec) == "2nd time this week in this channel (3 across all channels)"


def test_fingerprint_uses_facts_not_text() -> None:
    a = _diag(captures={"device": "0"})
    b = json.loads(json.dumps(a))
    b["initiating"]["text"] = "a completely different line"
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(_diag(sig=None)) is None  # unrecognized: only text to key on
    assert fingerprint(_diag()) == "cuda-oom"


async def test_feedback_once_per_user_feeds_signature_counts(store: Store) -> None:
    await store.save("d1", _diag(), job=_job(), channel="C1", thread_ts="1", now=NOW)
    assert await store.record_feedback("d1", "U1", "correct", at=NOW + 1)
    assert not await store.record_feedback("d1", "U1", "wrong", at=NOW + 2)
    assert await store.record_feedback("d1", "U2", "wrong", at=NOW + 3)
    given = await store.feedback("d1")
    assert [(f.user, f.verdict, f.at) for f in given] == [
        ("U1", "correct", NOW + 1),
        ("U2", "wrong", NOW + 3),
    ]
    stats = await store.signature_stats("cuda-oom")
    assert (stats.diagnoses, stats.confirmed, stats.disputed) == (1, 1, 1)
    with pytest.raises(ValueError):
        await store.record_feedback("d1", "U3", "maybe")


async def test_everything_about_a_diagnosis_expires_with_retention(store: Store, fake_redis: Any) -> None:
    await store.save("d1", _diag(), job=_job(), channel="C1", thread_ts="1", now=NOW)
    await store.record_feedback("d1", "U1", "correct")
    keys = Keys("st")
    fp = fingerprint(_diag())
    assert fp is not None
    expiring = [
        keys.diagnosis("d1"),
        keys.thread("C1", "1"),
        keys.history("C1"),
        keys.occurrences(fp),
        keys.occurrences(fp, "C1"),
        keys.feedback("d1"),
    ]
    for key in expiring:
        ttl = await fake_redis.ttl(key)
        assert 0 < ttl <= 3 * DAY, key
    # Counters hold no user text and are kept.
    assert await fake_redis.ttl(keys.signature_stats("cuda-oom")) == -1


def test_ordinals_and_quiet_first_time() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 102)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "102nd",
    ]  # fmt: skip
    assert recurrence_text(Recurrence(1, 1, 7 * DAY)) is None
    assert recurrence_text(Recurrence(3, 3, 7 * DAY)) == "3rd time this week in this channel"
    assert recurrence_text(Recurrence(1, 4, 7 * DAY)) == "4th time this week across channels"


async def test_store_on_a_real_redis(redis_client: Any, key_prefix: str) -> None:
    store = Store(redis_client, keys=Keys(key_prefix))
    await store.save("d1", _diag(), job=_job(), channel="C1", thread_ts="1", now=NOW)
    assert (await store.by_thread("C1", "1")).diagnosis == _diag()  # type: ignore[union-attr]
    assert await store.record_feedback("d1", "U1", "wrong")
    assert (await store.signature_stats("cuda-oom")).disputed == 1
