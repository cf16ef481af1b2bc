"""Structured logs: JSON lines, the job id on each, and no secret or token anywhere in them."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from bot.jobs.store import Store
from bot.kinds.registry import make_worker
from bot.ops.logs import bind_job, configure_from_settings, configure_logging, secrets_of
from bot.ops.settings import Settings
from bot.slack.reply import SlackReplier, make_client
from bot.web.routing import mount_webhook
from handlers.webhook import PATH, sign
from tests.slack_standin import SlackStandin

WEBHOOK_SECRET = "whsec-logging-test-5c1e2d9a7b"
SIGNING_SECRET = "signing-logging-test-8f3a"
HF_TOKEN = "hf_QwErTyUiOpAsDfGhJkLzXcVb"
AWS_KEY = "AKIAABCDEFGHIJKLMNOP"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging(
        "DEBUG", secrets=[WEBHOOK_SECRET, SIGNING_SECRET, "xoxb-denpex-test"], stream=out
    )
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def test_records_are_json_with_the_job_id(stream: io.StringIO) -> None:
    log = logging.getLogger("denpex.test")
    with bind_job("job-123"):
        log.info("fetched %d logs", 2, extra={"channel": "C1"})
    log.info("outside any job")
    first, second = lines(stream)
    assert first["message"] == "fetched 2 logs"
    assert first["job_id"] == "job-123"
    assert first["channel"] == "C1"
    assert first["level"] == "info"
    assert second["job_id"] is None


def test_secrets_are_masked_in_messages_extras_and_tracebacks(stream: io.StringIO) -> None:
    log = logging.getLogger("denpex.test")
    log.warning("token %s and key %s", "xoxb-denpex-test", AWS_KEY)
    log.info("request", extra={"signature": "v1=abc", "detail": f"HF_TOKEN={HF_TOKEN}"})
    try:
        raise RuntimeError(f"could not verify with {WEBHOOK_SECRET}")
    except RuntimeError:
        log.exception("webhook failed")
    text = stream.getvalue()
    for secret in ("xoxb-denpex-test", AWS_KEY, HF_TOKEN, WEBHOOK_SECRET, "v1=abc"):
        assert secret not in text
    records = lines(stream)
    assert "RuntimeError" in records[-1]["traceback"]
    assert "[REDACTED]" in records[-1]["traceback"]


def test_long_messages_are_cut(stream: io.StringIO) -> None:
    logging.getLogger("denpex.test").info("log dump: %s", "x" * 10_000)
    [record] = lines(stream)
    assert len(record["message"]) < 2100
    assert record["message"].endswith("[truncated]")


def test_secrets_of_settings_include_the_redis_password() -> None:
    settings = Settings(
        slack_bot_token="xoxb-1-abc",
        slack_signing_secret="sign",
        webhook_secret="whsec",
        redis_url="rediss://:redis-pass-123@redis.example.com:6380/0",
    )
    assert set(secrets_of(settings)) == {"xoxb-1-abc", "sign", "whsec", "redis-pass-123"}


async def test_a_webhook_job_with_secrets_in_its_log_leaves_none_in_the_logs(
    stream: io.StringIO, fake_redis: Any, key_prefix: str, slack_api: SlackStandin
) -> None:
    settings = Settings(
        slack_bot_token=slack_api.token,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack_api.api_url,
        webhook_secret=WEBHOOK_SECRET,
        default_channel="C0FAIL",
    )
    keys = Keys(key_prefix)
    queue = JobQueue(fake_redis, keys=keys)
    app = web.Application()
    mount_webhook(app, settings, queue=queue, redis=fake_redis)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}{PATH}"
    diagnosis = {
        "status": "unrecognized",
        "signature": None,
        "confidence": 0.4,
        "initiating": {"file": "o.log", "line": 1, "text": f"boom HF_TOKEN={HF_TOKEN} {AWS_KEY}"},
        "summary": f"export HF_TOKEN={HF_TOKEN}",
    }
    body = json.dumps({"job_id": "log-1", "diagnosis": diagnosis}).encode()
    ts = str(int(time.time()))
    worker = make_worker(
        queue, Store(fake_redis, keys=keys), SlackReplier(make_client(slack_api.token, slack_api.api_url))
    )
    try:
        async with aiohttp.ClientSession() as session:
            headers = {"X-Denpex-Timestamp": ts, "X-Denpex-Signature": sign(WEBHOOK_SECRET, ts, body)}
            async with session.post(url, data=body, headers=headers) as resp:
                assert resp.status == 202
            bad = {"X-Denpex-Timestamp": ts, "X-Denpex-Signature": "v1=" + "0" * 64}
            async with session.post(url, data=body, headers=bad) as resp:
                assert resp.status == 401
        assert await worker.drain(timeout_s=30) == 1
    finally:
        await worker.close()
        await runner.cleanup()
    text = stream.getvalue()
    assert text, "the run should have logged something"
    # The webhook's line and the worker's lines about the job carry its id.
    records = lines(stream)
    [queued] = [r for r in records if "webhook job log-1 enqueued" in r["message"]]
    assert queued["job_id"]
    assert any(r["job_id"] == queued["job_id"] for r in records if r["logger"] != "handlers.webhook")
    for secret in (WEBHOOK_SECRET, SIGNING_SECRET, HF_TOKEN, AWS_KEY, slack_api.token):
        assert secret not in text
    # What reached Slack is redacted too.
    posted = json.dumps([call.args for call in slack_api.calls])
    assert HF_TOKEN not in posted and AWS_KEY not in posted


def test_configure_from_settings_masks_every_secret_setting(capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(
        slack_bot_token="xoxb-77-abcdefgh",
        slack_signing_secret="sign-secret-77",
        webhook_secret="whsec-77",
        redis_url="redis://:redis-pass-77@redis:6379/0",
    )
    root = logging.getLogger()
    level = root.level
    handler = configure_from_settings(settings)
    try:
        logging.getLogger("denpex.test").error(
            "connect %s with %s, %s, %s", settings.redis_url, "sign-secret-77", "whsec-77", "xoxb-77-abcdefgh"
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    err = capsys.readouterr().err
    assert json.loads(err)["level"] == "error"
    for secret in ("redis-pass-77", "sign-secret-77", "whsec-77", "xoxb-77-abcdefgh"):
        assert secret not in err
