"""``GET /reports/{id}``: the full report of a stored diagnosis, behind a signed, expiring link.

A forged or tampered link gets 403 before the store is read, so a link says nothing about which
ids exist; a genuine link to a diagnosis past its retention gets 404. Every answer, the refusals
too, carries the report headers (no script, no referrer, no caching).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from bot.jobs.store import Store, StoredDiagnosis
from bot.ops.settings import Settings
from bot.pages.links import LinkExpired, LinkForged, ReportLinks, links_from_settings
from bot.pages.report import render_refusal, render_report, response_headers
from bot.pages.view import ReportInfo
from bot.slack.render import ACTION_REPORT
from bot.slack.thread import label
from signatures.diagnosis import Diagnosis

log = logging.getLogger(__name__)

REPORT_ROUTE = "/reports/{diagnosis_id}"
SOURCES = {
    "file": "a log dropped in Slack",
    "slash": "/denpex",
    "thread": "a Slack thread",
    "webhook": "the job-failure webhook",
    "report": "denpex report",
}


def mount_reports(app: web.Application, settings: Settings, *, store: Store, bolt: Any) -> None:
    """Serve reports when a report secret is set; always acknowledge the report button's clicks."""

    # Slack sends a click for link buttons too; unacknowledged, it shows the user a warning.
    @bolt.action(ACTION_REPORT)
    async def opened_report(ack: Any) -> None:
        await ack()

    links = links_from_settings(settings)
    if links is not None:
        app.router.add_get(REPORT_ROUTE, report_handler(links, store, retention_days=settings.retention_days))


def report_handler(links: ReportLinks, store: Store, *, retention_days: int) -> Any:
    """The request handler of ``REPORT_ROUTE``."""
    days = max(1, links.lifetime_s // 86400)

    async def report(request: web.Request) -> web.Response:
        diagnosis_id = request.match_info["diagnosis_id"]
        expires, sig = request.query.get("exp"), request.query.get("sig")
        try:
            links.check(diagnosis_id, expires, sig)
        except LinkExpired:
            return refusal(
                403,
                "This report link has expired",
                f"Report links work for {days} day{'s' if days != 1 else ''}. Post the log again in the "
                "incident's Slack thread: the new diagnosis comes with a fresh link.",
            )
        except LinkForged as exc:
            log.info("report link refused: %s", exc)
            return refusal(
                403,
                "This report link is not valid",
                "It was changed or cut short. Open the report from the button in Slack again.",
            )
        stored = await store.get(diagnosis_id)
        if stored is None:
            return refusal(
                404,
                "This report is gone",
                f"Diagnoses are kept for {retention_days} days; this one has expired or never existed.",
            )
        try:
            diagnosis = Diagnosis.from_dict(stored.diagnosis)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("stored diagnosis %s cannot be read: %r", diagnosis_id, exc)
            return refusal(500, "This report cannot be shown", "Its stored diagnosis could not be read.")
        assert expires is not None  # links.check refused a link without one
        info = ReportInfo(
            generated_at=datetime.now(UTC),
            diagnosis_id=diagnosis_id,
            origin=origin(stored),
            expires_at=datetime.fromtimestamp(int(expires), UTC),
        )
        # Off the event loop: a page takes tens of milliseconds, and Slack events must not wait.
        return page(200, await asyncio.to_thread(render_report, diagnosis, info))

    return report


def origin(stored: StoredDiagnosis) -> str:
    """'job llama-pretrain, 2024-05-01 10:20 UTC, from /denpex': where the diagnosis came from."""
    source = SOURCES.get(stored.source, stored.source)
    return f"{label(stored)}, from {source}" if source else label(stored)


def refusal(status: int, title: str, message: str) -> web.Response:
    return page(status, render_refusal(status, title, message))


def page(status: int, html: str) -> web.Response:
    return web.Response(
        status=status, text=html, content_type="text/html", charset="utf-8", headers=response_headers()
    )
