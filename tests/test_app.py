"""The served app over real HTTP: Slack request verification, health, metrics."""

from __future__ import annotations

import json
import time

from tests.slack_requests import Denpex, denpex, event, redis_for_app, signed, slash_command

__all__ = ["denpex", "redis_for_app"]  # fixtures


async def test_unsigned_request_is_refused(denpex: Denpex) -> None:
    req = slash_command("help")
    headers = {k: v for k, v in req.headers.items() if not k.startswith("X-Slack")}
    resp = await denpex.http.post("/slack/events", data=req.body.encode(), headers=headers)
    assert resp.status == 401


async def test_stale_request_is_refused(denpex: Denpex) -> None:
    status, _ = await denpex.send(slash_command("help", timestamp=int(time.time()) - 600))
    assert status == 401


async def test_wrong_secret_is_refused(denpex: Denpex) -> None:
    status, _ = await denpex.send(slash_command("help", secret="not-the-secret"))
    assert status == 401


async def test_tampered_body_is_refused(denpex: Denpex) -> None:
    req = slash_command("help")
    resp = await denpex.http.post(
        "/slack/events", data=req.body.replace("help", "diagnose").encode(), headers=req.headers
    )
    assert resp.status == 401


async def test_signed_request_is_answered(denpex: Denpex) -> None:
    status, body = await denpex.send(slash_command("help"))
    assert status == 200
    assert "/denpex diagnose" in body
    # Bolt asks Slack who it is once, on the first request.
    assert len(denpex.standin.calls_to("auth.test")) == 1


async def test_url_verification_echoes_the_challenge(denpex: Denpex) -> None:
    body = json.dumps({"token": "x", "challenge": "c-123", "type": "url_verification"})
    status, text = await denpex.send(signed(body, "application/json"))
    assert status == 200
    assert json.loads(text)["challenge"] == "c-123"


async def test_unknown_event_types_are_still_acknowledged(denpex: Denpex) -> None:
    # Subscribed message subtypes we ignore must answer 200, or Slack retries them.
    edited = {
        "type": "message",
        "subtype": "message_changed",
        "channel": "C1",
        "ts": "1.2",
        "message": {"text": "x"},
    }
    status, _ = await denpex.send(event(edited))
    assert status == 200
    joined = {"type": "message", "subtype": "channel_join", "channel": "C1", "ts": "1.3"}
    status, _ = await denpex.send(event(joined))
    assert status == 200
    assert not denpex.standin.calls_to("chat.postMessage")


async def test_health_and_metrics(denpex: Denpex) -> None:
    resp = await denpex.http.get("/healthz")
    assert resp.status == 200
    assert (await resp.json())["ok"] is True
    resp = await denpex.http.get("/metrics")
    assert resp.status == 200
    assert "denpex_" in await resp.text()


async def test_webhook_route_is_mounted(denpex: Denpex) -> None:
    resp = await denpex.http.post("/webhooks/job-failure", data=b"{}")
    # No secret configured: the route exists and refuses to work unauthenticated.
    assert resp.status in (401, 403, 503)
