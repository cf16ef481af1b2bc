"""The served report, reached the way a person reaches it: a log dropped in Slack, the diagnosis
posted with an "Open full report" button, and that button's link opened against the running app."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.pages.links import ReportLinks
from bot.slack.render import ACTION_REPORT
from tests.report_dom import Dom
from tests.slack_requests import (
    Denpex,
    block_action,
    denpex,
    event,
    file_share_message,
    redis_for_app,
)
from tests.test_report_page import EXAMPLE
from tests.test_thread import CHANNEL as THREAD_CHANNEL
from tests.test_thread import MSG_TS, RANK0, RANK12

__all__ = ["denpex", "redis_for_app"]  # fixtures

CHANNEL = "CINCIDENT"
PUBLIC_URL = "https://denpex.example.com/"
SECRET = "report-secret-" + "x" * 32
REPORT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
}


@pytest.fixture
async def served(slack_api: Any, redis_for_app: object) -> AsyncIterator[Denpex]:
    """The app with report links on."""
    env = {"DENPEX_PUBLIC_URL": PUBLIC_URL, "DENPEX_REPORT_SECRET": SECRET}
    async with Denpex(slack_api, redis_for_app, env=env) as app:
        yield app


async def diagnose_in_slack(app: Denpex, ts: str = "1700000001.000100") -> dict[str, Any]:
    """Drop the 64-GPU example in a channel; return the posted diagnosis message's report button."""
    api = app.standin
    f = api.add_file("llama-64gpu-triton.log", EXAMPLE.read_bytes(), channel=CHANNEL, ts=ts)
    status, _ = await app.send(event(file_share_message(CHANNEL, ts, [f])))
    assert status == 200
    assert await app.drain() == 1
    buttons = [
        element
        for call in api.answered("chat.postMessage")
        for block in call.args.get("blocks") or []
        if block.get("type") == "actions"
        for element in block["elements"]
    ]
    report = [b for b in buttons if b["action_id"] == ACTION_REPORT]
    assert len(report) == 1, buttons
    return report[0]


def local(url: str) -> str:
    """The path and query of a public link: the test reaches the app directly, not via the proxy."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


async def get(app: Denpex, path: str) -> tuple[int, str, Any]:
    resp = await app.http.get(path)
    return resp.status, await resp.text(), resp.headers


def assert_report_headers(headers: Any) -> None:
    for name, value in REPORT_HEADERS.items():
        assert headers[name] == value, name
    policy = headers["Content-Security-Policy"]
    assert (
        "default-src 'none'" in policy and "script-src" not in policy and "frame-ancestors 'none'" in policy
    )
    assert headers["Content-Type"] == "text/html; charset=utf-8"


async def test_the_button_in_slack_opens_the_full_report(served: Denpex) -> None:
    button = await diagnose_in_slack(served)
    assert button["text"]["text"] == "Open full report"
    assert button["url"].startswith(f"{PUBLIC_URL}reports/")
    status, html, headers = await get(served, local(button["url"]))
    assert status == 200
    assert_report_headers(headers)
    dom = Dom(html)
    assert dom.one("h1").text == "Triton kernel failed to compile"
    assert "Triton compilation failed" in dom.one(id="initiating-line").text
    rows = {e.attrs["data-rank"] for e in dom.all("g", cls="rank-row")} - {"none"}
    assert rows == {str(r) for r in range(64)}
    footer = dom.one("footer").text
    assert "from a log dropped in Slack" in footer and "this link works until" in footer


async def test_a_tampered_link_gets_403_and_no_diagnosis(served: Denpex) -> None:
    url = local((await diagnose_in_slack(served))["url"])
    sig = url.rsplit("=", 1)[1]
    forged = url[: -len(sig)] + ("0" if sig[0] != "0" else "1") + sig[1:]
    longer = url.replace("exp=", "exp=9")
    for path in (forged, longer, url.split("?")[0]):
        status, html, headers = await get(served, path)
        assert status == 403, path
        assert_report_headers(headers)
        assert "not valid" in Dom(html).one("h1").text and "Triton" not in html


async def test_an_expired_link_gets_403(served: Denpex) -> None:
    url = local((await diagnose_in_slack(served))["url"])
    diagnosis_id = url.split("/")[2].split("?")[0]
    week_ago = ReportLinks(SECRET, lifetime_s=7 * 86400).path_for(
        diagnosis_id, now=time.time() - 7 * 86400 - 60
    )
    status, html, headers = await get(served, "/" + week_ago)
    assert status == 403
    assert_report_headers(headers)
    assert "expired" in Dom(html).one("h1").text and "Triton" not in html


async def test_a_genuine_link_to_an_unknown_diagnosis_gets_404(served: Denpex) -> None:
    path = ReportLinks(SECRET).path_for(uuid.uuid4().hex)
    status, html, headers = await get(served, "/" + path)
    assert status == 404
    assert_report_headers(headers)
    assert "gone" in Dom(html).one("h1").text


async def test_clicking_the_link_button_is_acknowledged(served: Denpex) -> None:
    # Slack sends the click of a link button too; Bolt answers 404 to a click nobody listens for.
    click = block_action(ACTION_REPORT, "x", channel=CHANNEL, message_ts="1.2", thread_ts="1.1")
    status, _ = await served.send(click)
    assert status == 200


async def test_without_a_public_url_there_is_no_button_and_no_report_route(denpex: Denpex) -> None:
    api = denpex.standin
    f = api.add_file("llama.log", EXAMPLE.read_bytes(), channel=CHANNEL, ts="1700000002.000100")
    await denpex.send(event(file_share_message(CHANNEL, "1700000002.000100", [f])))
    assert await denpex.drain() == 1
    posted = [c.args for c in api.answered("chat.postMessage") if "actions" in str(c.args.get("blocks"))]
    assert posted and ACTION_REPORT not in str(posted)
    status, _, _ = await get(denpex, "/" + ReportLinks(SECRET).path_for(uuid.uuid4().hex))
    assert status == 404


async def test_more_evidence_in_the_thread_keeps_the_button_and_the_page_follows(served: Denpex) -> None:
    api = served.standin
    f = api.add_file("rank0.log", RANK0, channel=THREAD_CHANNEL, ts=MSG_TS)
    await served.send(event(file_share_message(THREAD_CHANNEL, MSG_TS, [f])))
    await served.drain()
    g = api.add_file("rank12.log", RANK12, channel=THREAD_CHANNEL, ts="1700000600.000040")
    await served.send(event(file_share_message(THREAD_CHANNEL, "1700000600.000040", [g], thread_ts=MSG_TS)))
    await served.drain()
    first, update = api.thread(THREAD_CHANNEL, MSG_TS)
    updated_original = [c.args for c in api.answered("chat.update") if c.args.get("ts") == first.ts]
    links = {report_url(m.blocks) for m in (first, update)} | {report_url(updated_original[-1]["blocks"])}
    assert len({urlsplit(u).path for u in links}) == 1  # one diagnosis, one page
    status, html, _ = await get(served, local(report_url(update.blocks)))
    assert status == 200 and "CUDA out of memory" in Dom(html).one(id="initiating-line").text


def report_url(blocks: Any) -> str:
    """The link of the report button in a message's blocks (a JSON string when sent as a form)."""
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    (url,) = [
        e["url"]
        for b in blocks
        if b.get("type") == "actions"
        for e in b["elements"]
        if e["action_id"] == ACTION_REPORT
    ]
    return str(url)
