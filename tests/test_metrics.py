"""``GET /metrics``: the counters move when a webhook job goes through the worker to Slack."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from bot.jobs.store import Store
from bot.jobs.worker import Worker
from bot.kinds.registry import make_worker
from bot.ops import metrics
from bot.ops.settings import Settings
from bot.slack.reply import SlackReplier, make_client
from bot.web.routing import mount_webhook
from handlers.webhook import PATH, sign
from tests.slack_standin import SlackStandin

SECRET = "whsec-metrics-test-42"
DIAGNOSIS = {
    "status": "failure",
    "signature": {
        "id": "cuda-oom-allocator",
        "title": "CUDA out of memory",
        "category": "gpu-memory",
        "role": "initiating",
    },
    "confidence": 0.9,
    "initiating": {"file": "out.log", "line": 7, "text": "torch.OutOfMemoryError: CUDA out of memory"},
    "summary": "Rank 3 ran out of GPU memory.",
}


@dataclass
class Stack:
    base: str
    worker: Worker
    slack: SlackStandin


def settings(slack: SlackStandin) -> Settings:
    return Settings(
        slack_bot_token=slack.token,
        slack_signing_secret="signing",
        slack_api_url=slack.api_url,
        webhook_secret=SECRET,
        default_channel="C0FAILURES",
    )


@pytest.fixture
async def stack(fake_redis: Any, key_prefix: str, slack_api: SlackStandin) -> AsyncIterator[Stack]:
    keys = Keys(key_prefix)
    queue = JobQueue(fake_redis, keys=keys)
    app = web.Application()
    mount_webhook(app, settings(slack_api), queue=queue, redis=fake_redis)
    metrics.mount(app, metrics.queue_probe(queue))
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    replier = SlackReplier(make_client(slack_api.token, slack_api.api_url))
    worker = make_worker(queue, Store(fake_redis, keys=keys), replier)
    try:
        yield Stack(f"http://127.0.0.1:{runner.addresses[0][1]}", worker, slack_api)
    finally:
        await worker.close()
        await runner.cleanup()


async def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with aiohttp.ClientSession() as session, session.get(f"{base}/metrics") as resp:
        assert resp.status == 200
        assert resp.content_type == "text/plain"
        text = await resp.text()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def post_report(base: str, job_id: str) -> int:
    body = json.dumps({"job_id": job_id, "cluster": "prod", "diagnosis": DIAGNOSIS}).encode()
    ts = str(int(time.time()))
    headers = {"X-Denpex-Timestamp": ts, "X-Denpex-Signature": sign(SECRET, ts, body)}
    async with (
        aiohttp.ClientSession() as session,
        session.post(base + PATH, data=body, headers=headers) as resp,
    ):
        return resp.status


def delta(after: dict[Any, float], before: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def test_metrics_count_a_webhook_job_from_enqueue_to_post(stack: Stack) -> None:
    before = await scrape(stack.base)
    assert await post_report(stack.base, "metrics-1") == 202
    assert await post_report(stack.base, "metrics-1") == 202  # a duplicate
    queued = await scrape(stack.base)
    assert queued[("denpex_queue_lag", ())] == 1.0
    assert await stack.worker.drain(timeout_s=30) == 1
    after = await scrape(stack.base)

    assert delta(after, before, "denpex_jobs_enqueued_total", source="webhook") == 1
    assert delta(after, before, "denpex_jobs_duplicate_total", source="webhook") == 1
    assert delta(after, before, "denpex_jobs_completed_total", source="webhook") == 1
    assert delta(after, before, "denpex_event_to_post_seconds_count", source="webhook") == 1
    assert (
        delta(
            after,
            before,
            "denpex_diagnoses_total",
            signature="cuda-oom-allocator",
            status="failure",
        )
        == 1
    )
    assert delta(after, before, "denpex_webhook_requests_total", status="202") == 2
    assert after[("denpex_queue_lag", ())] == 0.0
    # The diagnosis reached Slack: a parent message, then the answer in its thread.
    posts = stack.slack.calls_to("chat.postMessage")
    assert posts[0].args["channel"] == "C0FAILURES"
    assert any(call.args.get("thread_ts") for call in posts[1:])


async def test_slack_retries_and_errors_are_counted(stack: Stack) -> None:
    before = await scrape(stack.base)
    stack.slack.fail_next("chat.postMessage", 429, times=1, retry_after=0)
    stack.slack.channel_errors["C0GONE"] = "channel_not_found"
    client = make_client(stack.slack.token, stack.slack.api_url)
    await client.chat_postMessage(channel="C0FAILURES", text="hello")
    with pytest.raises(Exception, match="channel_not_found"):
        await client.chat_postMessage(channel="C0GONE", text="hello")
    after = await scrape(stack.base)
    assert delta(after, before, "denpex_slack_api_retries_total", reason="rate_limited") == 1
    assert (
        delta(
            after,
            before,
            "denpex_slack_api_errors_total",
            method="chat.postMessage",
            error="channel_not_found",
        )
        == 1
    )


async def test_worker_health_and_metrics_server() -> None:
    metrics.job_dead_lettered("slash")
    alive = [True]
    runner = await metrics.serve_for_worker("127.0.0.1", 0, alive=lambda: alive[0])
    try:
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 200
            async with session.get(f"{base}/metrics") as resp:
                text = await resp.text()
            alive[0] = False  # the worker loop ended: the probe must fail so the pod restarts
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 503
    finally:
        await runner.cleanup()
    assert 'denpex_jobs_dead_lettered_total{source="slash"}' in text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_denpex_worker_process_serves_health_and_metrics(
    redis_url: str, slack_api: SlackStandin
) -> None:
    """What the Kubernetes probes and Prometheus see from `denpex worker`."""
    port = free_port()
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SLACK_BOT_TOKEN=slack_api.token,
        SLACK_SIGNING_SECRET="signing",
        SLACK_API_URL=slack_api.api_url,
        HOST="127.0.0.1",
        PORT=str(port),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "worker", env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        status, text = 0, ""
        async with aiohttp.ClientSession() as session:
            for _ in range(200):  # until the process listens (a few seconds at most)
                try:
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        status = resp.status
                    async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
                        text = await resp.text()
                    break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
        assert status == 200
        assert "# TYPE denpex_jobs_completed_total counter" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    # Its logs are JSON lines.
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert lines and all(json.loads(line)["level"] for line in lines)
