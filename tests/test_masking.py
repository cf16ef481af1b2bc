"""Masking at ingress: no planted secret reaches Redis, its append-only file, Slack or the logs.

The end-to-end test runs jobs of every way in (a webhook report, a pasted log, a Slack file, a
follow-up question, more evidence in a thread, a job that dies every time) through a real
worker on a redis-server of its own with AOF fsynced on every write, then reads back every key
and value, every byte of the AOF, every call the Slack stand-in got and every log line.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

from bot.jobs.connection import connect
from bot.jobs.deadletters import DeadLetters
from bot.jobs.keys import Keys
from bot.jobs.masking import mask_job, masked_key, redact_in_pieces
from bot.jobs.queue import Delivery, JobQueue
from bot.jobs.store import Store
from bot.kinds.registry import make_worker
from bot.ops.logs import configure_logging
from bot.slack.reply import make_client
from bot.slack.thread import ThreadEvidence, ThreadReplier
from handlers.jobs import Job, LogRef
from signatures.redact import redact
from tests.redis_server import RedisProcess, own_redis
from tests.secret_scan import Planted, leaks
from tests.slack_standin import SlackStandin

__all__ = ["own_redis"]  # fixtures


def crashing_engine(files: list[tuple[str, str]], max_text_bytes: int) -> dict[str, Any]:
    """A log that kills the engine's process every time: its job ends in the dead letters."""
    import os

    os._exit(3)


def _jobs(p: Planted, slack: SlackStandin) -> dict[str, Job]:
    f = slack.add_file("rank3.log", p.log().encode())
    return {
        "webhook": Job(
            source="webhook",
            dedupe_key=f"webhook:{p.hf}",
            channel="CWEBHOOK",
            logs=[LogRef("inline", f"{p.hf}.log", text=p.log())],
            header=f"Job {p.hf} failed on cluster {p.aws}",
            meta={"job_id": p.hf, "cluster": p.aws, "user": p.slack, f"link:{p.aws}": "https://ci/1"},
        ),
        "slash": Job(
            source="slash",
            dedupe_key=f"slash:{p.slack}",
            channel="CSLASH",
            user="UALICE",
            logs=[LogRef("inline", "pasted.log", text=p.log())],
            header=f"Diagnosis of a log pasted by <@UALICE> ({p.slack})",
        ),
        "file": Job(
            source="file",
            dedupe_key=f["id"],
            channel="CFILE",
            thread_ts="1700.000100",
            logs=[LogRef("slack_file", "rank3.log", file_id=f["id"])],
            meta={"message_ts": "1700.000100"},
        ),
    }


async def test_no_planted_secret_reaches_redis_aof_slack_or_logs(
    own_redis: RedisProcess, slack_api: SlackStandin, engine_pool: Any
) -> None:
    p = Planted.fresh()
    log_stream = io.StringIO()
    handler = configure_logging(logging.DEBUG, stream=log_stream)
    await own_redis.wait_ready()
    redis = await connect(own_redis.url)
    keys = Keys("mask")
    queue = JobQueue(redis, keys=keys, visibility_timeout_ms=1_000)
    store = Store(redis, keys=keys)
    evidence = ThreadEvidence(redis, keys)
    replier = ThreadReplier(make_client(slack_api.token, slack_api.api_url), evidence, store=store)
    worker = make_worker(queue, store, replier, executor=engine_pool, evidence=evidence, retry_backoff_ms=0)
    doomed = make_worker(queue, store, replier, engine=crashing_engine, evidence=evidence, retry_backoff_ms=0)
    try:
        jobs = _jobs(p, slack_api)
        for job in jobs.values():
            assert await queue.enqueue(job)
        assert await worker.drain(timeout_s=60) == 3

        # In the diagnosis thread of the file: a question, then more evidence pasted.
        thread = ("CFILE", "1700.000100")
        question = Job(
            source="thread",
            kind="followup",
            dedupe_key="q:CFILE:1700.000200",
            channel=thread[0],
            thread_ts=thread[1],
            user="UBOB",
            text=f"why did it fail? my token is {p.hf}",
        )
        more = Job(
            source="thread",
            kind="rediagnose",
            dedupe_key="msg:CFILE:1700.000300",
            channel=thread[0],
            thread_ts=thread[1],
            logs=[LogRef("inline", "pasted-1700.000300.txt", text=p.log())],
            meta={"message_ts": "1700.000300"},
        )
        for job in (question, more):
            assert await queue.enqueue(job)
        assert await worker.drain(timeout_s=60) == 2

        # A job whose log kills the engine every time ends in the dead-letter stream.
        poison = Job(
            source="webhook",
            dedupe_key="webhook:poison",
            channel="CPOISON",
            thread_ts="1700.000400",
            logs=[LogRef("inline", "poison.log", text=p.log())],
            header=f"Job poison {p.aws}",
        )
        assert await queue.enqueue(poison)
        await doomed.drain(timeout_s=60)
        [letter] = await queue.dead_letters()
        assert "[REDACTED]" in letter.payload
    finally:
        await worker.close()
        await doomed.close()
        logging.getLogger().removeHandler(handler)

    # Every job was answered, so the test did exercise what it scans.
    assert len([m for m in slack_api.messages if m.thread_ts is None]) == 2  # webhook, slash parents
    assert len(slack_api.thread(*thread)) == 3  # diagnosis, answer to the question, re-diagnosis
    assert slack_api.thread("CPOISON", "1700.000400")
    assert (await redis.xlen(keys.jobs)) == 0 or await queue.idle()
    found = await leaks(
        p, redis=redis, aof=own_redis.aof_bytes(), slack=slack_api, logs=log_stream.getvalue()
    )
    await redis.aclose()
    assert found == []


async def test_a_job_is_queued_with_its_text_redacted(fake_redis: Any, key_prefix: str) -> None:
    p = Planted.fresh()
    queue = JobQueue(fake_redis, keys=Keys(key_prefix))
    job = Job(
        source="webhook",
        dedupe_key=f"webhook:{p.hf}",
        channel="C1",
        logs=[
            LogRef("inline", f"{p.aws}.log", text=p.log()),
            LogRef("url", "a.log", url="https://logs.example.com/a.log?sig=abc"),
        ],
        header=f"Job {p.hf}",
        meta={"cluster": p.aws},
        text=f"why {p.slack}",
        precomputed={"headline": f"token {p.hf}", "evidence": [{"text": p.aws}]},
    )
    assert await queue.enqueue(job)
    [(_, fields)] = await fake_redis.xrange(queue.keys.jobs)
    assert p.found_in("entry", fields["job"]) == []
    queued = Job.from_json(fields["job"])
    # Ids and references are kept; the log is still there to diagnose, minus its secrets.
    assert (queued.id, queued.channel, queued.logs[1].url) == (job.id, "C1", job.logs[1].url)
    assert "CUDA out of memory" in (queued.logs[0].text or "")
    assert not await queue.enqueue(job)  # the dedupe key still recognises the same job
    assert [k for k in await fake_redis.keys(f"{key_prefix}:*") if p.hf in k] == []


async def test_large_pasted_logs_are_redacted_in_line_aligned_pieces() -> None:
    p = Planted.fresh()
    text = "".join(f"step {i} loss=2.{i % 10}\n" for i in range(40_000)) + p.log() * 3
    job = Job(source="webhook", dedupe_key="k", channel="C1", logs=[LogRef("inline", "big.log", text=text)])
    masked = await mask_job(job)
    assert masked.logs[0].text == redact(text)
    assert redact_in_pieces(text, piece_chars=1000) == redact(text)
    assert masked_key("webhook:42") == "webhook:42"
    assert masked_key(f"webhook:{p.hf}").startswith("h:")


async def test_dead_letters_are_redacted_bounded_and_expire(fake_redis: Any, key_prefix: str) -> None:
    p = Planted.fresh()
    queue = JobQueue(fake_redis, keys=Keys(key_prefix), dead_ttl_s=1)
    queue.dead = DeadLetters(fake_redis, queue.keys, ttl_s=1, max_payload_chars=64 * 1024)
    # Queued by an older Denpex, without masking, and huge: kept redacted and cut to its ends.
    raw = Job(
        source="webhook",
        dedupe_key="old",
        channel="C1",
        logs=[LogRef("inline", "huge.log", text=p.log() + "filler line\n" * 100_000 + p.log())],
    )
    await fake_redis.xadd(queue.keys.jobs, {"job": raw.to_json()})
    await queue.dead_letter(Delivery("1-1", raw.to_json(), 4), f"failed: token {p.hf} rejected")
    [letter] = await queue.dead_letters()
    assert p.found_in("dead letter", json.dumps(letter.__dict__)) == []
    assert len(letter.payload) <= 64 * 1024
    kept = Job.from_json(letter.payload)  # still a job an operator can retry
    assert "were not kept" in (kept.logs[0].text or "")
    assert kept.logs[0].text.count("CUDA out of memory") == 2  # its start and its end
    assert 0 < await fake_redis.ttl(queue.keys.dead) <= 1
    await asyncio.sleep(1.1)
    assert await queue.dead_letters() == []  # past the age limit: trimmed when listed


def test_dead_letter_expiry_comes_from_the_settings(fake_redis: Any) -> None:
    from bot.kinds.registry import build_worker
    from bot.ops.settings import load_settings

    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"})
    assert build_worker(settings, fake_redis).queue.dead.ttl_s == 14 * 24 * 3600
    settings = load_settings(
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "DENPEX_DEAD_LETTER_DAYS": "2"}
    )
    assert build_worker(settings, fake_redis).queue.dead.ttl_s == 2 * 24 * 3600
