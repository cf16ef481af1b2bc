"""``GET /jobs/{job_id}`` over real HTTP against the running app: a job reported through the
webhook, then its diagnosis and advice read back, signed like the webhook."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.jobs.store import Store
from bot.web.jobs_api import jobs_handler
from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from signatures import Source, diagnose
from tests.corpus.cases import load_cases
from tests.slack_requests import Denpex, redis_for_app

__all__ = ["redis_for_app"]  # fixture

ROOT = Path(__file__).resolve().parent.parent
SECRET = "webhook-secret-for-jobs"
NODE_FAILURE = next(c for c in load_cases() if c.id == "extra2b-070")  # Node failure on worker-1


def signed_get(
    job_id: str, *, secret: str = SECRET, at: int | None = None, path_id: str | None = None
) -> dict:
    ts = str(int(time.time()) if at is None else at)
    return {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign(secret, ts, f"GET /jobs/{job_id}".encode())}


@pytest.fixture
async def app(slack_api: Any, redis_for_app: object) -> AsyncIterator[Denpex]:
    env = {"DENPEX_WEBHOOK_SECRET": SECRET, "DENPEX_DEFAULT_CHANNEL": "CJOBS"}
    async with Denpex(slack_api, redis_for_app, env=env) as running:
        yield running


async def report(app: Denpex, job_id: str) -> None:
    """What `denpex report` sends: the diagnosis of a real node-failure log, signed."""
    d = diagnose([Source.from_bytes(NODE_FAILURE.path.name, NODE_FAILURE.data)])
    body = json.dumps({"job_id": job_id, "job_name": "llama", "diagnosis": d.to_dict()}).encode()
    ts = str(int(time.time()))
    headers = {
        TIMESTAMP_HEADER: ts,
        SIGNATURE_HEADER: sign(SECRET, ts, body),
        "Content-Type": "application/json",
    }
    resp = await app.http.post(PATH, data=body, headers=headers)
    assert resp.status == 202, await resp.text()
    assert await app.drain() == 1


async def test_a_reported_job_answers_with_its_diagnosis_and_advice(app: Denpex) -> None:
    await report(app, "prod/4242")
    resp = await app.http.get("/jobs/prod/4242", headers=signed_get("prod/4242"))
    assert resp.status == 200
    assert resp.headers["Cache-Control"] == "no-store"
    data = await resp.json()
    assert data["job_id"] == "prod/4242"
    assert data["diagnosis"]["signature"]["id"] == "slurm-node-failure"
    assert data["advice"]["decision"] == "restart-excluding"
    assert data["advice"]["exclude_hosts"] == ["worker-1"]


async def test_a_bad_or_stale_signature_is_401(app: Denpex) -> None:
    await report(app, "4243")
    refused = [
        {},  # no headers
        signed_get("4243", secret="another-secret"),
        signed_get("4244"),  # signed for another job
        signed_get("4243", at=int(time.time()) - 600),  # replayed ten minutes later
        {**signed_get("4243"), TIMESTAMP_HEADER: "１７"},  # non-ASCII digits
    ]
    for headers in refused:
        resp = await app.http.get("/jobs/4243", headers=headers)
        assert resp.status == 401, headers
        assert "error" in await resp.json()


async def test_an_unknown_job_is_404(app: Denpex) -> None:
    resp = await app.http.get("/jobs/never-reported", headers=signed_get("never-reported"))
    assert resp.status == 404


async def test_without_a_webhook_secret_the_route_is_503(slack_api: Any, redis_for_app: object) -> None:
    async with Denpex(slack_api, redis_for_app) as running:
        resp = await running.http.get("/jobs/1", headers=signed_get("1"))
        assert resp.status == 503


class _DownRedis:
    async def get(self, key: str) -> None:
        raise RedisConnectionError("Connection refused")


async def test_redis_away_is_503_with_retry_after_never_500() -> None:
    app = web.Application()
    app.router.add_get("/jobs/{job_id:.+}", jobs_handler({"default": SECRET}, Store(_DownRedis())))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        resp = await client.get("/jobs/4245", headers=signed_get("4245"))
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "5"


def test_the_shell_recipe_in_the_docs_signs_the_same() -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to run the recipe")
    recipe = (
        'printf \'v1:%s:GET /jobs/%s\' "$ts" "prod-4242"'
        " | openssl dgst -sha256 -hmac \"$secret\" | sed 's/^.*= //'"
    )
    assert recipe in (ROOT / "docs" / "webhooks.md").read_text(encoding="utf-8")
    out = subprocess.run(
        ["sh", "-c", recipe],
        env={"ts": "1700000000", "secret": SECRET, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert f"v1={out}" == sign(SECRET, "1700000000", b"GET /jobs/prod-4242")


class _BrokenEntry:
    async def get(self, key: str) -> str:
        return "diag-1"

    async def hgetall(self, key: str) -> dict[str, str]:
        return {"diagnosis": "{not json", "created_at": "1"}


async def test_an_unreadable_stored_diagnosis_is_503_not_500() -> None:
    app = web.Application()
    app.router.add_get("/jobs/{job_id:.+}", jobs_handler({"default": SECRET}, Store(_BrokenEntry())))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        resp = await client.get("/jobs/4246", headers=signed_get("4246"))
        assert resp.status == 503
        assert await resp.json() == {"error": "the stored diagnosis cannot be read"}
