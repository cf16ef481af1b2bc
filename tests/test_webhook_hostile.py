"""Malformed and hostile webhook requests over real HTTP: 400, 401 or 503 with a reason, never 500."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from handlers.webhook import TokenBucket, WebhookConfig, register, sign
from tests.test_webhook import SECRET, Endpoint, check_log_url, post, report, route, signed, start

ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


@pytest.fixture
async def endpoint(fake_redis: Any, key_prefix: str) -> AsyncIterator[Endpoint]:
    """The webhook with a 1 MiB body limit, so nesting is refused for its depth, not its size."""
    queue = JobQueue(fake_redis, keys=Keys(key_prefix))
    answers: list[int] = []
    config = WebhookConfig(
        secrets={"default": SECRET},
        max_body_bytes=1024 * 1024,
        route=route,
        check_log_url=check_log_url,
        on_answer=answers.append,
    )
    app = web.Application()
    limiter = TokenBucket(fake_redis, rate=100, burst=100, prefix=f"{key_prefix}:rate")
    register(app, queue=queue, config=config, limiter=limiter)
    runner, url = await start(app)
    try:
        yield Endpoint(url, queue, fake_redis, answers)
    finally:
        await runner.cleanup()


def stamped(timestamp: str, body: bytes) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-Denpex-Timestamp": timestamp,
        "X-Denpex-Signature": sign(SECRET, timestamp, body),
    }


@pytest.mark.parametrize(
    "timestamp",
    [
        "²",  # str.isdigit() says yes, int() says no
        str(int(time.time())).translate(ARABIC_INDIC),  # int() reads it; it is not ASCII
        "9" * 5000,  # int() of it is slow, then refused by the 4300-digit limit
        "1" + "0" * 12,  # 13 digits: no Unix time in seconds before the year 33658
        "-1700000000",
        "1.7e9",
    ],
    ids=["superscript-two", "arabic-indic-digits", "5000-digits", "13-digits", "negative", "float"],
)
async def test_malformed_timestamp_is_refused_as_unauthenticated(endpoint: Endpoint, timestamp: str) -> None:
    raw = json.dumps(report()).encode()
    status, answer = await post(endpoint.url, raw, stamped(timestamp, raw))
    assert status == 401
    assert "X-Denpex-Timestamp" in answer["error"]
    assert endpoint.answers == [401]
    assert await endpoint.jobs() == []


async def test_overlong_signature_header_is_refused(endpoint: Endpoint) -> None:
    raw = json.dumps(report()).encode()
    headers = signed(raw)
    headers["X-Denpex-Signature"] = ",".join([headers["X-Denpex-Signature"]] * 40)
    status, answer = await post(endpoint.url, raw, headers)
    assert status == 401
    assert "X-Denpex-Signature" in answer["error"]


@pytest.mark.parametrize("depth", [200_000, 1_000, 33])
async def test_deeply_nested_body_is_a_bad_request(endpoint: Endpoint, depth: int) -> None:
    raw = b"[" * depth + b"]" * depth
    status, answer = await post(endpoint.url, raw)
    assert status == 400
    assert "nests deeper than 32 levels" in answer["error"]


async def test_deep_nesting_inside_a_valid_report_is_a_bad_request(endpoint: Endpoint) -> None:
    body = json.dumps(report()).encode()
    raw = body[:-1] + b', "extra": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    status, answer = await post(endpoint.url, raw)
    assert status == 400
    assert "nests deeper than 32 levels" in answer["error"]
    assert await endpoint.jobs() == []


async def test_nesting_within_the_bound_is_accepted(endpoint: Endpoint) -> None:
    nested: Any = "deep"
    for _ in range(30):  # the report is level 1, "extra" holds levels 2..31
        nested = [nested]
    status, _ = await post(endpoint.url, report(extra=nested))
    assert status == 202


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("exit_code", "9" * 5000, "exit_code"),
        ("exit_code", "-" + "1" * 19, "exit_code"),
        ("links", '{"grafana": ' + "7" * 5000 + "}", "links.grafana"),
        ("extra", "[1, 2, " + "3" * 5000 + "]", "extra[2]"),
    ],
)
async def test_oversized_integer_is_a_bad_request_naming_its_field(
    endpoint: Endpoint, field: str, value: str, named: str
) -> None:
    body = json.dumps(report(exit_code=None)).encode()
    raw = body[:-1] + f', "{field}": {value}}}'.encode()
    status, answer = await post(endpoint.url, raw)
    assert status == 400
    assert answer["error"].startswith(named + " ")
    assert "at most 18 digits" in answer["error"]
    assert await endpoint.jobs() == []


async def test_an_ordinary_exit_code_is_still_accepted(endpoint: Endpoint) -> None:
    status, _ = await post(endpoint.url, report(exit_code=-9))
    assert status == 202
    [job] = await endpoint.jobs()
    assert job.meta["exit_code"] == "-9"
