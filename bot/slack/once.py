"""A job's messages, found again in Slack by their metadata, so none is ever posted twice.

Every parent message and every reply a job posts carries Slack message metadata:
``{"event_type": "denpex_job", "event_payload": {"job_id": ..., "role": "parent" | "reply"}}``.
When a post may have landed without Denpex knowing (Slack answered after the client's timeout,
a 5xx, a lost connection, or Redis failed before the ts was recorded), the retry first looks for
the earlier post: ``conversations.history`` for a parent, ``conversations.replies`` for a reply.
If two posts of one role slipped through anyway (two workers racing), the earliest is kept and
the later ones are deleted with ``chat.delete``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.jobs.outcomes import ROLE_REPLY

log = logging.getLogger(__name__)

JOB_EVENT = "denpex_job"
LEGACY_REPLY_EVENT = "denpex_reply"  # replies posted before roles existed: {"job_id": ...}
PAGE = 200
MAX_PAGES = 5  # a busy channel: the parent is among the newest messages since its intent
# Slack ts are the poster's clock; look a little before the recorded intent.
CLOCK_SLACK_S = 60.0


def tag(job_id: str, role: str) -> dict[str, Any]:
    """The metadata a job's post carries."""
    return {"event_type": JOB_EVENT, "event_payload": {"job_id": job_id, "role": role}}


def is_post_of(message: Mapping[str, Any], job_id: str, role: str) -> bool:
    """True when ``message`` is the ``role`` post of job ``job_id``."""
    meta = message.get("metadata") or {}
    payload = meta.get("event_payload") or {}
    if payload.get("job_id") != job_id:
        return False
    if meta.get("event_type") == JOB_EVENT:
        return bool(payload.get("role") == role)
    return meta.get("event_type") == LEGACY_REPLY_EVENT and role == ROLE_REPLY


def transient(exc: BaseException) -> bool:
    """A failure after which a post may or may not have landed, and a later try may work."""
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", 200)
        return bool(status == 429 or status >= 500)
    return isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError)


class JobPosts:
    """Finds a job's posts in a channel or a thread, and deletes duplicates."""

    def __init__(self, client: Any) -> None:
        self.client = client  # slack_sdk AsyncWebClient

    async def find(
        self,
        channel: str,
        job_id: str,
        role: str,
        *,
        thread_ts: str | None = None,
        since: float | None = None,
    ) -> list[str]:
        """The ts of every ``role`` post of the job, oldest first.

        A parent is searched in the channel's history (from ``since``, the intent's time), a
        reply in its thread. An outage raises (the caller must not post blind); a refusal
        (no access to the history) is logged and finds nothing.
        """
        found: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            try:
                resp = await self._page(channel, thread_ts, since, cursor)
            except SlackApiError as exc:
                if transient(exc):
                    raise
                log.warning("cannot look for job %s's %s in %s: %s", job_id, role, channel, _error(exc))
                return []
            found += [str(m["ts"]) for m in resp.get("messages") or [] if is_post_of(m, job_id, role)]
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor or not resp.get("has_more"):
                break
        return sorted(set(found), key=float)

    async def keep_first(
        self,
        channel: str,
        job_id: str,
        role: str,
        *,
        thread_ts: str | None = None,
        since: float | None = None,
    ) -> str | None:
        """The earliest ``role`` post of the job, after deleting any later ones; None if none."""
        found = await self.find(channel, job_id, role, thread_ts=thread_ts, since=since)
        for ts in found[1:]:
            log.warning("job %s posted its %s twice; deleting the later one (%s)", job_id, role, ts)
            try:
                await self.client.chat_delete(channel=channel, ts=ts)
            except SlackApiError as exc:
                log.warning("could not delete the duplicate %s in %s: %s", ts, channel, _error(exc))
        return found[0] if found else None

    async def _page(
        self, channel: str, thread_ts: str | None, since: float | None, cursor: str | None
    ) -> Any:
        kwargs: dict[str, Any] = {"channel": channel, "include_all_metadata": True, "limit": PAGE}
        if cursor:
            kwargs["cursor"] = cursor
        if thread_ts:
            return await self.client.conversations_replies(ts=thread_ts, **kwargs)
        if since is not None:
            kwargs["oldest"] = f"{max(0.0, since - CLOCK_SLACK_S):.6f}"
        return await self.client.conversations_history(**kwargs)


def _error(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""
