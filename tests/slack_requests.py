"""Requests signed exactly as Slack signs them, for tests that POST into the real Bolt app.

Slack signs ``v0:{timestamp}:{raw body}`` with HMAC-SHA256 and the app's signing secret, and sends
the result in ``X-Slack-Signature`` with the timestamp in ``X-Slack-Request-Timestamp``. Slash
commands and button clicks are form-encoded; events are JSON.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

SIGNING_SECRET = "denpex-test-signing-secret"
TEAM_ID = "TDENPEX"
APP_ID = "ADENPEX"
_event_ids = itertools.count(1)


def sign(body: str, timestamp: int, secret: str = SIGNING_SECRET) -> str:
    """The ``X-Slack-Signature`` for ``body`` sent at ``timestamp``."""
    base = f"v0:{timestamp}:{body}".encode()
    ours = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    # Same answer as slack_sdk's own verifier, so the helper cannot drift from Slack's scheme.
    assert ours == SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    return ours


@dataclass(frozen=True)
class SignedRequest:
    body: str
    headers: dict[str, str]


def signed(
    body: str,
    content_type: str,
    *,
    timestamp: int | None = None,
    secret: str = SIGNING_SECRET,
    retry_num: int | None = None,
) -> SignedRequest:
    """Headers Slack would send with ``body``; ``retry_num`` adds X-Slack-Retry-Num."""
    ts = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sign(body, ts, secret),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    return SignedRequest(body, headers)


def slash_command(
    text: str,
    *,
    channel: str = "CINCIDENT",
    user: str = "UALICE",
    response_url: str = "https://hooks.slack.invalid/commands/1",
    trigger_id: str | None = None,
    **kw: Any,
) -> SignedRequest:
    """A signed ``/denpex`` slash command."""
    form = {
        "token": "deprecated",
        "team_id": TEAM_ID,
        "team_domain": "denpex",
        "channel_id": channel,
        "channel_name": "incidents",
        "user_id": user,
        "user_name": "alice",
        "command": "/denpex",
        "text": text,
        "response_url": response_url,
        "trigger_id": trigger_id or f"trig-{next(_event_ids)}",
        "api_app_id": APP_ID,
    }
    return signed(urlencode(form), "application/x-www-form-urlencoded", **kw)


def event(inner: dict[str, Any], *, event_id: str | None = None, **kw: Any) -> SignedRequest:
    """A signed Events API ``event_callback`` wrapping ``inner``."""
    body = {
        "token": "deprecated",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": inner,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": TEAM_ID, "user_id": "UDENPEXBOT", "is_bot": True, "enterprise_id": None}
        ],
    }
    return signed(json.dumps(body), "application/json", **kw)


def file_share_message(
    channel: str,
    ts: str,
    files: list[dict[str, Any]],
    *,
    thread_ts: str | None = None,
    user: str = "UALICE",
    text: str = "",
) -> dict[str, Any]:
    """The inner ``message``/``file_share`` event for ``files`` (file objects)."""
    inner: dict[str, Any] = {
        "type": "message",
        "subtype": "file_share",
        "text": text,
        "files": files,
        "user": user,
        "upload": True,
        "display_as_bot": False,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": "channel",
    }
    if thread_ts:
        inner["thread_ts"] = thread_ts
    return inner


def file_shared(channel: str, file_id: str, *, user: str = "UALICE") -> dict[str, Any]:
    """The inner ``file_shared`` event: no ts, no thread, no URLs."""
    return {
        "type": "file_shared",
        "channel_id": channel,
        "file_id": file_id,
        "user_id": user,
        "file": {"id": file_id},
        "event_ts": f"{time.time():.6f}",
    }


def thread_message(
    channel: str, ts: str, thread_ts: str, text: str, *, user: str = "UALICE", **extra: Any
) -> dict[str, Any]:
    """A plain message posted in a thread."""
    return {
        "type": "message",
        "text": text,
        "user": user,
        "ts": ts,
        "thread_ts": thread_ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": "channel",
        **extra,
    }


def block_action(
    action_id: str,
    value: str,
    *,
    channel: str,
    message_ts: str,
    thread_ts: str | None,
    user: str = "UALICE",
    response_url: str = "https://hooks.slack.invalid/actions/1",
    **kw: Any,
) -> SignedRequest:
    """A signed button click (``block_actions``) on a message in a thread."""
    message: dict[str, Any] = {"type": "message", "ts": message_ts, "user": "UDENPEXBOT"}
    if thread_ts:
        message["thread_ts"] = thread_ts
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM_ID, "domain": "denpex"},
        "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "deprecated",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
            "thread_ts": thread_ts,
        },
        "trigger_id": f"trig-{next(_event_ids)}",
        "channel": {"id": channel, "name": "incidents"},
        "message": message,
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": "denpex_diagnosis_actions",
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)})
    return signed(body, "application/x-www-form-urlencoded", **kw)


class Denpex:
    """The real app on a local port, its Web API client pointed at the Slack stand-in.

    Listeners run before the HTTP answer (``process_before_response``) so a test can post an
    event, then ``drain()`` the worker and assert on what the stand-in recorded, without sleeps.
    """

    def __init__(
        self, standin: Any, redis: Any, *, prefix: str | None = None, env: dict[str, str] | None = None
    ):
        from bot.ops.settings import load_settings

        self.standin = standin
        self.redis = redis
        # Keys of its own, deleted on exit, so tests can share a real Redis and run again.
        self.prefix = prefix or f"denpex-test-{uuid.uuid4().hex[:10]}"
        self.settings = load_settings(
            {
                "SLACK_BOT_TOKEN": standin.token,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_URL": standin.api_url,
                **(env or {}),
            }
        )
        self.server: Any = None
        self.http: Any = None
        self.app: Any = None

    async def __aenter__(self) -> Denpex:
        from aiohttp.test_utils import TestClient, TestServer

        from bot.jobs.keys import Keys
        from bot.web.app import create_app

        self.app = create_app(
            self.settings,
            redis=self.redis,
            keys=Keys(self.prefix),
            start_workers=False,
            process_before_response=True,
        )
        self.server = TestServer(self.app, host="127.0.0.1")
        self.http = TestClient(self.server)
        await self.http.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.close()
        async for key in self.redis.scan_iter(match=f"{self.prefix}:*", count=500):
            await self.redis.delete(key)

    @property
    def runtime(self) -> Any:
        from bot.web.app import RUNTIME

        return self.app[RUNTIME]

    async def send(self, req: SignedRequest, path: str = "/slack/events") -> tuple[int, str]:
        """POST a signed request; returns (status, body)."""
        resp = await self.http.post(path, data=req.body.encode(), headers=req.headers)
        return resp.status, await resp.text()

    async def drain(self) -> int:
        """Run the worker until the queue is empty."""
        count: int = await self.runtime.worker.drain(timeout_s=120)
        return count


@pytest.fixture
async def redis_for_app() -> AsyncIterator[object]:
    """A real Redis when REDIS_URL is set, else a private in-process fakeredis."""
    import fakeredis

    from bot.jobs.connection import connect

    url = os.environ.get("REDIS_URL")
    client = await connect(url) if url else await connect(None, server=fakeredis.FakeServer())
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def denpex(slack_api: Any, redis_for_app: object) -> AsyncIterator[Denpex]:
    """The app under test, with its own key prefix."""
    async with Denpex(slack_api, redis_for_app) as app:
        yield app
