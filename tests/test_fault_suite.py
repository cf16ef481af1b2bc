"""The fault suite: the real app and workers on a redis-server of their own (AOF on), while
everything that can go wrong does, at once.

One run: a worker process is SIGKILLed in the middle of a job; 200 signed webhooks arrive at
once; Slack answers some posts 429, some 500 after posting, some only after the client gave up;
Redis is killed while jobs run and restarted from its append-only file, with reports arriving
during the outage. Then it holds that:

- no request was answered 500 (a report during the outage gets 503 with Retry-After);
- every report answered 202, and the killed worker's job, ends with exactly one parent message
  and one reply;
- no planted secret is in any Slack call, any Redis key or value, or the AOF file.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from bot.jobs.connection import client as redis_client
from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from bot.jobs.store import Store
from bot.kinds.registry import make_worker
from bot.ops.settings import load_settings
from bot.slack.reply import make_client
from bot.slack.thread import ThreadEvidence, ThreadReplier
from bot.web.app import create_app
from handlers.jobs import Job, LogRef
from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from tests.redis_server import RedisProcess, own_redis
from tests.secret_scan import Planted, leaks
from tests.slack_requests import SIGNING_SECRET
from tests.slack_standin import SlackStandin

__all__ = ["own_redis"]  # fixtures

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "faults"
CHANNEL = "CFAULTS"
WEBHOOK_SECRET = "whsec-fault-suite-0123456789abcdef"
BURST = 200
SLACK_TIMEOUT_S = 1.0


async def until(check: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.05)


def report(job_id: str, p: Planted) -> tuple[bytes, dict[str, str]]:
    """A signed job-failure report whose log and fields leak the planted secrets."""
    body = json.dumps(
        {
            "job_id": job_id,
            "channel": CHANNEL,
            "cluster": f"gpu-{p.aws}",
            "log": p.log(),
        }
    ).encode()
    ts = str(int(time.time()))
    headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: ts}
    headers[SIGNATURE_HEADER] = sign(WEBHOOK_SECRET, ts, body)
    return body, headers


def spawn_worker(redis_url: str, slack: SlackStandin, log_dir: Path) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SLACK_BOT_TOKEN=slack.token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.api_url,
        DENPEX_SLACK_TIMEOUT_S=str(SLACK_TIMEOUT_S),
        PYTHONPATH=str(ROOT),
    )
    env.pop("SLACK_APP_TOKEN", None)
    cmd = [
        sys.executable,
        "-m",
        "bot.cli.worker",
        "--prefix",
        PREFIX,
        "--name",
        "doomed",
        "--visibility-ms",
        "500",
    ]
    with (log_dir / "doomed.log").open("wb") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out)


async def test_fault_suite(
    own_redis: RedisProcess, slack_api: SlackStandin, engine_pool: Any, tmp_path: Path
) -> None:
    started = time.monotonic()
    p = Planted.fresh()
    await own_redis.wait_ready()
    redis = redis_client(own_redis.url)
    settings = load_settings(
        {
            "SLACK_BOT_TOKEN": slack_api.token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": slack_api.api_url,
            "DENPEX_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "DENPEX_WEBHOOK_RATE": "1000",
            "DENPEX_WEBHOOK_BURST": "1000",
            "DENPEX_SLACK_TIMEOUT_S": str(SLACK_TIMEOUT_S),
            "DENPEX_REDIS_POOL_TIMEOUT_S": "5",
        }
    )
    keys = Keys(PREFIX)
    app = create_app(settings, redis=redis, keys=keys, start_workers=False)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url(PATH))
    statuses: list[int] = []
    accepted: list[str] = []

    async def send(http: aiohttp.ClientSession, job_id: str) -> int:
        body, headers = report(job_id, p)
        async with http.post(url, data=body, headers=headers) as resp:
            statuses.append(resp.status)
            if resp.status == 202:
                accepted.append(job_id)
            elif resp.status == 503:
                assert int(resp.headers["Retry-After"]) > 0
            return resp.status

    # -- a worker process killed in the middle of a job ------------------------------------------
    slack_api.hold_downloads = asyncio.Event()
    f = slack_api.add_file("rank0.log", p.log().encode())
    file_job = Job(
        source="file",
        dedupe_key=f["id"],
        channel=CHANNEL,
        thread_ts="1700.999999",
        logs=[LogRef("slack_file", "rank0.log", file_id=f["id"])],
    )
    queue = JobQueue(redis, keys=keys, visibility_timeout_ms=1_000)
    assert await queue.enqueue(file_job)
    doomed = spawn_worker(own_redis.url, slack_api, tmp_path)
    try:
        await until(lambda: _true(slack_api.calls_to("download")), "the doomed worker to start its job")
        doomed.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(doomed.wait, 30) == -signal.SIGKILL
    finally:
        if doomed.poll() is None:
            doomed.kill()
    slack_api.hold_downloads.set()

    # -- Slack misbehaves for the first posts ------------------------------------------------------
    slack_api.fail_next("chat.postMessage", 429, times=3, retry_after=1)
    slack_api.fail_next("chat.postMessage", 500, times=3, landed=True)
    slack_api.answer_late("chat.postMessage", SLACK_TIMEOUT_S + 0.5, times=3)

    # -- 200 signed webhooks at once ----------------------------------------------------------------
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        burst = await asyncio.gather(*(send(http, f"fault-{n:03d}") for n in range(BURST)))
        by_status = collections.Counter(burst)
        print(f"\n{BURST} concurrent webhooks: {dict(sorted(by_status.items()))}")

        # -- workers run; Redis dies under them and comes back from its AOF -------------------------
        evidence = ThreadEvidence(redis, keys)
        store = Store(redis, keys=keys)
        replier = ThreadReplier(
            make_client(slack_api.token, slack_api.api_url, timeout=SLACK_TIMEOUT_S), evidence, store=store
        )
        worker = make_worker(
            queue,
            store,
            replier,
            executor=engine_pool,
            evidence=evidence,
            concurrency=2,
            retry_backoff_ms=200,
            poll_block_ms=100,
            name="survivor",
        )
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        try:
            await until(lambda: _true(len(slack_api.top_level(CHANNEL)) >= 20), "the first parents")
            own_redis.kill()
            during = [await send(http, f"outage-{n}") for n in range(5)]
            assert set(during) == {503}, during
            own_redis.start()
            await own_redis.wait_ready()
            # Sent again, as a scheduler does after a 503 (a pooled connection may still be
            # finding out that its server restarted): each is taken within a few tries.
            for n in range(5):
                tries = [await send(http, f"outage-{n}")]
                while tries[-1] == 503 and len(tries) < 5:
                    await asyncio.sleep(0.2)
                    tries.append(await send(http, f"outage-{n}"))
                assert tries[-1] == 202, tries

            async def all_answered() -> bool:
                answered = _answered(slack_api)
                return all(job_id in answered for job_id in accepted) and file_job.thread_ts in answered

            await until(all_answered, "every accepted report to be answered", 90)
            await until(queue.idle, "the queue to drain")
        finally:
            stop.set()
            await running
            await server.close()

    elapsed = time.monotonic() - started
    answers = dict(collections.Counter(statuses))
    print(f"fault suite: {len(accepted)} reports answered in {elapsed:.1f} s; every answer: {answers}")

    # -- what must hold ------------------------------------------------------------------------------
    assert 500 not in statuses and set(statuses) <= {202, 429, 503}
    assert by_status[202] > 0 and len(accepted) == by_status[202] + 5, by_status
    for job_id in accepted:
        parents = _parents(slack_api, job_id)
        assert len(parents) == 1, (job_id, [m.ts for m in parents])
        assert len(slack_api.thread(CHANNEL, parents[0].ts)) == 1, job_id
    assert len(slack_api.thread(CHANNEL, file_job.thread_ts or "")) == 1  # the killed worker's job
    assert {c.status for c in slack_api.calls_to("chat.postMessage")} >= {429, 500, 200}
    # Posts whose answers were lost were looked for, found, and never posted twice.
    assert slack_api.calls_to("conversations.history") and slack_api.deleted == []
    assert await queue.dead_letters() == []
    found = await leaks(p, redis=redis, aof=own_redis.aof_bytes(), slack=slack_api)
    await redis.aclose()
    assert found == []
    assert elapsed < 120


def _parents(slack: SlackStandin, job_id: str) -> list[Any]:
    return [m for m in slack.top_level(CHANNEL) if m.text.startswith(f"Job {job_id} ")]


def _answered(slack: SlackStandin) -> set[str]:
    """Report job ids (and bare thread ts) with a reply in their thread; one pass over Slack."""
    threads = {m.thread_ts for m in slack.messages if m.channel == CHANNEL and m.thread_ts}
    out = {ts for ts in threads if ts}
    for m in slack.top_level(CHANNEL):
        if m.ts in threads and m.text.startswith("Job "):
            out.add(m.text.split(" ", 2)[1])
    return out


async def _true(value: object) -> bool:
    return bool(value)
