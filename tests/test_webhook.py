"""``POST /webhooks/job-failure`` over real HTTP: signatures, replay, size, rate, fields, dedupe."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web

from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from handlers.jobs import Job
from handlers.webhook import PATH, TokenBucket, WebhookConfig, register, sign

SECRET = "whsec-test-0123456789abcdef"
LOG = "step 10\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


@dataclass
class Endpoint:
    url: str
    queue: JobQueue
    redis: Any
    answers: list[int]

    async def jobs(self) -> list[Job]:
        entries = await self.redis.xrange(self.queue.keys.jobs)
        return [Job.from_json(fields["job"]) for _, fields in entries]


def route(cluster: str | None, job_name: str | None, user: str | None) -> str | None:
    if cluster == "prod":
        return "C0PROD"
    if user == "carol@example.com":
        return "C0CAROL"
    return "C0DEFAULT" if user != "nobody" else None


def check_log_url(url: str) -> None:
    if "allowed.example" not in url:
        raise ValueError("log_url host is not on DENPEX_LOG_URL_ALLOWLIST")


async def start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}{PATH}"


@pytest.fixture
async def endpoint(fake_redis: Any, key_prefix: str) -> AsyncIterator[Endpoint]:
    queue = JobQueue(fake_redis, keys=Keys(key_prefix))
    answers: list[int] = []
    config = WebhookConfig(
        secrets={"default": SECRET},
        max_body_bytes=64 * 1024,
        route=route,
        check_log_url=check_log_url,
        on_answer=answers.append,
    )
    limiter = TokenBucket(fake_redis, rate=0.001, burst=5, prefix=f"{key_prefix}:rate")
    app = web.Application()
    register(app, queue=queue, config=config, limiter=limiter)
    runner, url = await start(app)
    try:
        yield Endpoint(url, queue, fake_redis, answers)
    finally:
        await runner.cleanup()


def report(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": "slurm-4242",
        "job_name": "llama-70b",
        "cluster": "prod",
        "user": "alice",
        "status": "failed",
        "exit_code": 137,
        "log": LOG,
    }
    body.update(fields)
    return {k: v for k, v in body.items() if v is not None}


def signed(body: bytes, *, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    timestamp = str(int(time.time() if at is None else at))
    return {
        "Content-Type": "application/json",
        "X-Denpex-Timestamp": timestamp,
        "X-Denpex-Signature": sign(secret, timestamp, body),
    }


async def post(
    url: str, body: bytes | dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=raw, headers=signed(raw) if headers is None else headers) as resp,
    ):
        return resp.status, await resp.json()


async def test_valid_report_is_queued_with_its_header_and_log(endpoint: Endpoint) -> None:
    status, answer = await post(endpoint.url, report())
    assert (status, answer) == (202, {"job": "slurm-4242", "duplicate": False})
    [job] = await endpoint.jobs()
    assert job.source == "webhook"
    assert job.channel == "C0PROD"
    assert job.thread_ts is None  # the worker posts the header, then answers in its thread
    assert job.header == "Job llama-70b (slurm-4242) failed on prod with exit code 137"
    assert [(log.kind, log.text) for log in job.logs] == [("inline", LOG)]
    assert job.meta["cluster"] == "prod"
    assert job.meta["exit_code"] == "137"
    assert endpoint.answers == [202]


async def test_same_job_id_is_queued_once(endpoint: Endpoint) -> None:
    first = await post(endpoint.url, report())
    second = await post(endpoint.url, report(log="a different log, same job"))
    assert first == (202, {"job": "slurm-4242", "duplicate": False})
    assert second == (202, {"job": "slurm-4242", "duplicate": True})
    assert len(await endpoint.jobs()) == 1


async def test_unsigned_request_is_refused(endpoint: Endpoint) -> None:
    status, answer = await post(endpoint.url, report(), headers={})
    assert status == 401
    assert "X-Denpex-Signature" in answer["error"]
    assert await endpoint.jobs() == []


async def test_wrong_secret_is_refused(endpoint: Endpoint) -> None:
    raw = json.dumps(report()).encode()
    status, answer = await post(endpoint.url, raw, signed(raw, secret="not-the-secret"))
    assert (status, answer) == (401, {"error": "bad signature"})
    assert await endpoint.jobs() == []


async def test_body_changed_after_signing_is_refused(endpoint: Endpoint) -> None:
    raw = json.dumps(report()).encode()
    headers = signed(raw)
    status, _ = await post(endpoint.url, raw.replace(b"137", b"0"), headers)
    assert status == 401


@pytest.mark.parametrize("offset_s", [-301, 301, -3600])
async def test_stale_or_future_timestamp_is_refused(endpoint: Endpoint, offset_s: int) -> None:
    raw = json.dumps(report()).encode()
    status, answer = await post(endpoint.url, raw, signed(raw, at=time.time() + offset_s))
    assert status == 401
    assert "minutes" in answer["error"]
    assert await endpoint.jobs() == []


async def test_malformed_json_is_a_bad_request(endpoint: Endpoint) -> None:
    status, answer = await post(endpoint.url, b'{"job_id": "x", ')
    assert status == 400
    assert "JSON" in answer["error"]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"job_id": None}, "job_id"),
        ({"job_id": "has spaces in it"}, "job_id"),
        ({"exit_code": "137"}, "exit_code"),
        ({"cluster": ["prod"]}, "cluster"),
        ({"log": None}, "one of log, log_url or diagnosis"),
        ({"log": 12}, "log must be"),
        ({"links": {"grafana": "javascript:alert(1)"}}, "links.grafana"),
        ({"diagnosis": {"summary": "no status"}}, "diagnosis"),
        ({"log_url": "https://evil.example/x.log"}, "log_url"),
        ({"channel": None, "user": "nobody", "cluster": "dev"}, "channel"),
    ],
)
async def test_bad_field_is_named(endpoint: Endpoint, fields: dict[str, Any], named: str) -> None:
    body = report()
    for key, value in fields.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    status, answer = await post(endpoint.url, body)
    assert status == 400
    assert named in answer["error"]
    assert await endpoint.jobs() == []


async def test_log_url_on_the_allow_list_is_queued_for_the_worker(endpoint: Endpoint) -> None:
    url = "https://logs.allowed.example/jobs/4242/stdout.log"
    status, _ = await post(endpoint.url, report(log=None, log_url=url))
    assert status == 202
    [job] = await endpoint.jobs()
    assert [(log.kind, log.url, log.name) for log in job.logs] == [("url", url, "stdout.log")]


async def test_explicit_channel_wins_and_routing_applies_without_one(endpoint: Endpoint) -> None:
    await post(endpoint.url, report(job_id="a", channel="C0MINE"))
    await post(endpoint.url, report(job_id="b", cluster="dev"))
    await post(endpoint.url, report(job_id="c", cluster="dev", user="carol@example.com"))
    jobs = {job.meta["job_id"]: job for job in await endpoint.jobs()}
    assert {k: job.channel for k, job in jobs.items()} == {"a": "C0MINE", "b": "C0DEFAULT", "c": "C0CAROL"}
    # Routed on the address as sent; stored redacted.
    assert jobs["c"].meta["user"] == "[EMAIL]"


async def test_precomputed_diagnosis_is_validated_and_redacted(endpoint: Endpoint) -> None:
    diagnosis = {
        "status": "failure",
        "signature": {"id": "cuda-oom", "title": "CUDA OOM", "category": "gpu", "role": "cause"},
        "confidence": 0.9,
        "initiating": {
            "file": "out.log",
            "line": 2,
            "text": "OOM HF_TOKEN=hf_abcdefghijklmnopqrstuv",
        },
        "summary": "Out of memory",
    }
    status, _ = await post(endpoint.url, report(log=None, diagnosis=diagnosis))
    assert status == 202
    [job] = await endpoint.jobs()
    assert job.logs == []
    assert job.precomputed is not None
    assert job.precomputed["signature"]["id"] == "cuda-oom"
    assert "hf_abcdefghijklmnopqrstuv" not in json.dumps(job.precomputed)


async def test_body_over_the_limit_is_refused_by_its_length(endpoint: Endpoint) -> None:
    status, answer = await post(endpoint.url, report(log="x" * 70_000))
    assert status == 413
    assert "65536" in answer["error"]
    assert await endpoint.jobs() == []


async def test_body_over_the_limit_is_refused_without_a_length(endpoint: Endpoint) -> None:
    raw = json.dumps(report(log="y" * 70_000)).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 8192):
            yield raw[start : start + 8192]

    async with (
        aiohttp.ClientSession() as session,
        session.post(endpoint.url, data=chunks(), headers=signed(raw)) as resp,
    ):
        assert resp.status == 413
    assert await endpoint.jobs() == []


async def test_flood_past_the_rate_limit_gets_429(endpoint: Endpoint) -> None:
    statuses = [(await post(endpoint.url, report(job_id=f"job-{i}")))[0] for i in range(8)]
    assert statuses == [202] * 5 + [429] * 3
    assert len(await endpoint.jobs()) == 5
    raw = json.dumps(report(job_id="job-9")).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(endpoint.url, data=raw, headers=signed(raw)) as resp,
    ):
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "1000"  # one token per 1000 s at rate 0.001/s


async def test_disabled_without_a_secret(fake_redis: Any, key_prefix: str) -> None:
    app = web.Application()
    config = WebhookConfig(secrets={}, max_body_bytes=1024, route=route)
    limiter = TokenBucket(fake_redis, rate=1, burst=1, prefix=f"{key_prefix}:rate")
    register(app, queue=JobQueue(fake_redis, keys=Keys(key_prefix)), config=config, limiter=limiter)
    runner, url = await start(app)
    try:
        status, answer = await post(url, report())
    finally:
        await runner.cleanup()
    assert status == 503
    assert "DENPEX_WEBHOOK_SECRET" in answer["error"]


async def test_token_bucket_is_shared_through_real_redis(redis_client: Any, key_prefix: str) -> None:
    clock = [1000.0]
    # Two buckets stand for two web processes: they share one budget per sender.
    a = TokenBucket(redis_client, rate=1.0, burst=2, prefix=f"{key_prefix}:rate", clock=lambda: clock[0])
    b = TokenBucket(redis_client, rate=1.0, burst=2, prefix=f"{key_prefix}:rate", clock=lambda: clock[0])
    assert [await a.allow("s"), await b.allow("s"), await a.allow("s")] == [True, True, False]
    assert await b.allow("other-sender")
    clock[0] += 1.0  # one token back after a second at 1/s
    assert [await b.allow("s"), await a.allow("s")] == [True, False]


def test_openssl_recipe_signs_like_the_server(tmp_path: Any) -> None:
    """The recipe in docs/webhooks.md and deploy/integrations/curl gives the same signature."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    body = json.dumps(report()).encode()
    (tmp_path / "body.json").write_bytes(body)
    script = (
        '{ printf "v1:%s:" "$TS"; cat body.json; } | openssl dgst -sha256 -hmac "$SECRET" | sed "s/^.*= //"'
    )
    out = subprocess.run(
        ["sh", "-c", script],
        cwd=tmp_path,
        env={"TS": "1700000000", "SECRET": SECRET, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "v1=" + out.stdout.strip() == sign(SECRET, 1700000000, body)


class BrokenQueue:
    """A queue whose Redis is gone."""

    async def enqueue(self, job: Job) -> bool:
        raise ConnectionError("Error 111 connecting to redis:6379. Connection refused.")


async def test_queue_outage_answers_503_so_the_sender_retries(fake_redis: Any, key_prefix: str) -> None:
    app = web.Application()
    config = WebhookConfig(secrets={"default": SECRET}, max_body_bytes=64 * 1024, route=route)
    limiter = TokenBucket(fake_redis, rate=1, burst=5, prefix=f"{key_prefix}:rate")
    register(app, queue=BrokenQueue(), config=config, limiter=limiter)
    runner, url = await start(app)
    try:
        raw = json.dumps(report()).encode()
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=signed(raw)) as resp,
        ):
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "5"
            assert "retry later" in (await resp.json())["error"]
    finally:
        await runner.cleanup()


async def test_rate_limit_store_outage_answers_503_so_the_sender_retries(
    fake_redis: Any, key_prefix: str, unused_tcp_port: int
) -> None:
    """The limiter's Redis refuses connections: 503 with Retry-After, not 500 (and not 429)."""
    gone = aioredis.Redis(host="127.0.0.1", port=unused_tcp_port, socket_connect_timeout=1)
    answers: list[int] = []
    config = WebhookConfig(
        secrets={"default": SECRET}, max_body_bytes=64 * 1024, route=route, on_answer=answers.append
    )
    queue = JobQueue(fake_redis, keys=Keys(key_prefix))
    app = web.Application()
    register(app, queue=queue, config=config, limiter=TokenBucket(gone, rate=1, burst=5, prefix="r"))
    runner, url = await start(app)
    raw = json.dumps(report()).encode()
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=signed(raw)) as resp,
        ):
            status, answer, retry_after = resp.status, await resp.json(), resp.headers.get("Retry-After")
    finally:
        await runner.cleanup()
        await gone.aclose()
    assert (status, retry_after) == (503, "5")
    assert "retry" in answer["error"]
    assert answers == [503]
    assert await fake_redis.xlen(queue.keys.jobs) == 0


class StuckLimiter:
    """A limiter whose Redis has stopped answering (until released)."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()

    async def allow(self, sender: str) -> bool:
        self.calls += 1
        await self.release.wait()
        return True


async def test_report_that_waits_too_long_for_redis_gets_503(fake_redis: Any, key_prefix: str) -> None:
    """One request may talk to Redis at a time here; the next waits 0.2 s for its turn, then 503."""
    limiter = StuckLimiter()
    config = WebhookConfig(
        secrets={"default": SECRET},
        max_body_bytes=64 * 1024,
        route=route,
        redis_concurrency=1,
        redis_wait_s=0.2,
    )
    app = web.Application()
    register(app, queue=JobQueue(fake_redis, keys=Keys(key_prefix)), config=config, limiter=limiter)
    runner, url = await start(app)
    try:
        first = asyncio.create_task(post(url, report(job_id="first")))
        while limiter.calls == 0:
            await asyncio.sleep(0.01)
        raw = json.dumps(report(job_id="second")).encode()
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=signed(raw)) as resp,
        ):
            assert (resp.status, resp.headers["Retry-After"]) == (503, "5")
        limiter.release.set()
        assert (await first)[0] == 202
    finally:
        await runner.cleanup()
