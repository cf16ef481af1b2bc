"""Text that comes in through a handler is redacted before it is put in a job, so the queue (Redis)
never holds a secret: pasted slash text, thread messages and webhook bodies, over signed HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from handlers.jobs import Job
from handlers.webhook import PATH, sign
from tests.slack_requests import Denpex, event, redis_for_app, slash_command, thread_message

__all__ = ["redis_for_app"]  # fixture

CHANNEL = "CTRAINING"
THREAD_TS = "1700000500.000100"
WEBHOOK_SECRET = "whsec-ingress-0123456789"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
PLANTED = (HF, AWS, "hunter2pw", "s3cretpw", "alice.ml@example.org")
LOG = (
    "[2024-05-01 10:20:00] [rank0] step 100 loss 2.1034\n"
    f"[rank0] env HF_TOKEN={HF} AWS_ACCESS_KEY_ID={AWS}\n"
    "[rank0] connecting to postgres://trainer:hunter2pw@db.internal:5432/runs\n"
    "[rank0] mysql -uroot -ps3cretpw -e 'select 1' by alice.ml@example.org\n"
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)


def assert_no_secret(text: str | None) -> None:
    assert text is not None
    assert "[REDACTED]" in text
    for secret in PLANTED:
        assert secret not in text


@pytest.fixture
async def app(slack_api: Any, redis_for_app: Any) -> AsyncIterator[Denpex]:
    env = {"DENPEX_WEBHOOK_SECRET": WEBHOOK_SECRET, "DENPEX_DEFAULT_CHANNEL": CHANNEL}
    async with Denpex(slack_api, redis_for_app, env=env) as running:
        yield running


async def queued(app: Denpex) -> list[Job]:
    """The jobs on the queue, as the worker would read them (nothing has run them)."""
    entries = await app.redis.xrange(app.runtime.queue.keys.jobs)
    return [Job.from_json(fields["job"]) for _, fields in entries]


async def test_pasted_slash_text_is_queued_redacted(app: Denpex) -> None:
    status, _ = await app.send(slash_command(f"diagnose {LOG}", channel=CHANNEL))
    assert status == 200
    [job] = await queued(app)
    assert [ref.kind for ref in job.logs] == ["inline"]
    assert_no_secret(job.logs[0].text)
    assert "CUDA out of memory" in (job.logs[0].text or "")


async def test_log_pasted_in_a_diagnosis_thread_is_queued_redacted(app: Denpex) -> None:
    await app.redis.set(app.runtime.store.keys.thread(CHANNEL, THREAD_TS), "diagnosis-1")
    status, _ = await app.send(event(thread_message(CHANNEL, "1700000600.000001", THREAD_TS, f"```{LOG}```")))
    assert status == 200
    [job] = await queued(app)
    assert job.kind == "rediagnose"
    assert_no_secret(job.logs[0].text)


async def test_question_in_a_diagnosis_thread_is_queued_redacted(app: Denpex) -> None:
    await app.redis.set(app.runtime.store.keys.thread(CHANNEL, THREAD_TS), "diagnosis-1")
    question = f"why does it fail when I set HF_TOKEN={HF} and password=hunter2pw?"
    await app.send(event(thread_message(CHANNEL, "1700000600.000002", THREAD_TS, question)))
    [job] = await queued(app)
    assert job.kind == "followup"
    assert_no_secret(job.text)
    assert (job.text or "").startswith("why does it fail")


async def test_webhook_inline_log_is_queued_redacted(app: Denpex) -> None:
    body = json.dumps({"job_id": "slurm-77", "job_name": "llama", "log": LOG}).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Denpex-Timestamp": timestamp,
        "X-Denpex-Signature": sign(WEBHOOK_SECRET, timestamp, body),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(str(app.server.make_url(PATH)), data=body, headers=headers) as resp,
    ):
        assert resp.status == 202
    [job] = await queued(app)
    assert job.logs[0].name == "llama.log"
    assert_no_secret(job.logs[0].text)
    raw = await app.redis.xrange(app.runtime.queue.keys.jobs)
    assert all(secret not in json.dumps(raw) for secret in PLANTED)
