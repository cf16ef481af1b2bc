"""`denpex watch` against the server's own webhook handler: every report it sends is accepted,
queued once, and headed as a person should read it (still running, or failed with its code)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from handlers.jobs import Job
from handlers.webhook import TokenBucket, WebhookConfig, register
from tests.test_watch import WAIT_S, tell, watch

SECRET = "whsec-watch-0123456789abcdef"


class Server:
    def __init__(self, redis: Any, queue: JobQueue, url: str, answers: list[int]) -> None:
        self.redis, self.queue, self.url, self.answers = redis, queue, url, answers

    async def jobs(self, count: int) -> list[Job]:
        """The first ``count`` queued jobs, once they are there."""
        deadline = time.monotonic() + WAIT_S
        while True:
            entries = await self.redis.xrange(self.queue.keys.jobs)
            if len(entries) >= count:
                return [Job.from_json(fields["job"]) for _, fields in entries]
            assert time.monotonic() < deadline, f"waited for job {count}; answers {self.answers}"
            await asyncio.sleep(0.05)


@pytest.fixture
async def server(fake_redis: Any, key_prefix: str) -> AsyncIterator[Server]:
    queue = JobQueue(fake_redis, keys=Keys(key_prefix))
    answers: list[int] = []
    config = WebhookConfig(
        secrets={"default": SECRET},
        max_body_bytes=1 << 20,
        route=lambda cluster, job_name, user: "C0TRAINING",
        check_log_url=lambda url: None,
        on_answer=answers.append,
    )
    app = web.Application()
    register(
        app, queue=queue, config=config, limiter=TokenBucket(fake_redis, rate=10, burst=10, prefix=key_prefix)
    )
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield Server(fake_redis, queue, f"http://127.0.0.1:{runner.addresses[0][1]}", answers)
    finally:
        await runner.cleanup()


async def test_the_server_queues_each_report_once_with_a_header_that_says_the_job_still_runs(
    server: Server, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    args = ["--url", server.url, "--secret-file", str(secret), "--job-id", "prod-4242"]
    args += ["--job-name", "llama-70b", "--cluster", "prod", "--settle", "0.3"]
    proc = await watch(
        str(log),
        *args,
        "--",
        sys.executable,
        "-m",
        "tests.watch_writer",
        str(log),
        stdin=asyncio.subprocess.PIPE,
    )
    await tell(proc, "burst warmup")
    await tell(proc, "burst degraded")
    await server.jobs(1)
    await tell(proc, "burst failure")
    await server.jobs(2)
    await tell(proc, "exit 1")
    _, stderr = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 1, stderr.decode()
    jobs = await server.jobs(3)
    assert server.answers == [202, 202, 202]
    assert [j.header for j in jobs] == [
        "Job llama-70b (prod-4242:degraded-1) degraded (still running) on prod",
        "Job llama-70b (prod-4242:failure-2) failing (still running) on prod",
        "Job llama-70b (prod-4242) failed on prod with exit code 1",
    ]
    assert [j.dedupe_key for j in jobs] == [
        "webhook:prod-4242:degraded-1",
        "webhook:prod-4242:failure-2",
        "webhook:prod-4242",
    ]
    assert all(j.precomputed and j.precomputed["signature"]["id"] == "dynamo-recompile-limit" for j in jobs)
    assert [j.precomputed["status"] for j in jobs if j.precomputed] == ["degraded", "failure", "failure"]
