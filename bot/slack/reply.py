"""Posting answers in Slack: the parent message, the diagnosis or error in its thread, and the
``response_url`` fallback when the bot cannot post in the channel."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.jobs.outcomes import PostedReply, ReplyFailed
from bot.ops import metrics
from bot.slack.render import (
    RenderedMessage,
    render_diagnosis,
    render_error,
    render_headline,
    render_parent,
)
from handlers.jobs import Job
from signatures.diagnosis import Diagnosis

log = logging.getLogger(__name__)

SLACK_API_URL = "https://slack.com/api/"
TIMEOUT_S = 30.0  # one Web API call
RETRIES = 3  # per call, for each of: connection errors, 429 (after Retry-After), 500/503
# chat.postMessage errors that mean "the bot cannot post here": answer through response_url.
CANNOT_POST_HERE = frozenset(
    {"not_in_channel", "channel_not_found", "is_archived", "restricted_action", "access_denied"}
)
# Slack message metadata on a job's final reply (event_payload: {"job_id": ...}).
REPLY_EVENT = "denpex_reply"
# Errors about the blocks themselves: the text-only form still gets the answer across.
BAD_BLOCKS = frozenset({"invalid_blocks", "msg_blocks_too_long", "invalid_blocks_format"})


def make_client(
    token: str, base_url: str | None = None, *, retries: int = RETRIES, timeout: float = TIMEOUT_S
) -> AsyncWebClient:
    """A Web API client that retries 429 (honouring Retry-After), 500/503 and lost connections."""
    client = AsyncWebClient(
        token=token,
        base_url=base_url or SLACK_API_URL,
        timeout=timeout,  # type: ignore[arg-type]  # an int in the stubs; aiohttp takes seconds
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=retries),
            AsyncRateLimitErrorRetryHandler(max_retry_count=retries),
            AsyncServerErrorRetryHandler(max_retry_count=retries),
        ],
    )
    return metrics.observe_slack_client(client)


class SlackReplier:
    """Posts a job's answer in its Slack thread."""

    def __init__(self, client: AsyncWebClient, *, retries: int = RETRIES) -> None:
        self.client = client
        self.retries = retries

    async def deliver(
        self,
        job: Job,
        diagnosis: Diagnosis | None,
        error: str | None,
        *,
        job_meta: dict[str, str] | None = None,
    ) -> PostedReply:
        """Post the diagnosis (or the error) in the job's thread, opening the thread if needed."""
        if diagnosis is not None:
            message = render_diagnosis(diagnosis, job_meta=job_meta or job.meta)
        else:
            message = render_error(error or "Something went wrong.")
        thread_ts = job.thread_ts
        if job.channel and thread_ts is None:
            parent = await self.post_parent(job)
            if parent.ts is None:
                # The bot cannot post in the channel: answer through response_url instead.
                return await self._respond(job, message)
            thread_ts = parent.ts
        posted = await self.post(job, message, thread_ts=thread_ts, final=True)
        if message.file_text and posted.ts and posted.channel:
            await self._attach(posted.channel, posted.thread_ts or posted.ts, message.file_text)
        return posted

    async def post_parent(self, job: Job) -> PostedReply:
        """Post the message a new thread hangs from; ``ts`` is None if the bot cannot post."""
        if not job.channel:
            return PostedReply(None, None, None)
        message = render_parent(job.header or "Denpex is looking at this failure")
        try:
            resp = await self.client.chat_postMessage(
                channel=job.channel, text=message.text, blocks=message.blocks
            )
        except SlackApiError as exc:
            if _error(exc) in CANNOT_POST_HERE and job.response_url:
                return PostedReply(job.channel, None, None)
            raise
        return PostedReply(str(resp["channel"]), str(resp["ts"]), None)

    async def post(
        self, job: Job, message: RenderedMessage, *, thread_ts: str | None, final: bool = False
    ) -> PostedReply:
        """Post ``message`` in the job's channel (in ``thread_ts``), else via response_url.

        ``final`` tags the message with the job id (Slack message metadata), so a retry of a
        job whose worker died right after posting finds it instead of posting again.
        """
        if not job.channel:
            return await self._respond(job, message)
        metadata = {"event_type": REPLY_EVENT, "event_payload": {"job_id": job.id}} if final else None
        try:
            resp = await self._post_message(job.channel, message, thread_ts, metadata)
        except SlackApiError as exc:
            if _error(exc) in CANNOT_POST_HERE and job.response_url:
                return await self._respond(job, message)
            if _error(exc) in CANNOT_POST_HERE:
                raise ReplyFailed(
                    f"cannot post in {job.channel} ({_error(exc)}) and the job has no response_url"
                ) from exc
            raise
        return PostedReply(str(resp["channel"]), str(resp["ts"]), thread_ts)

    async def find_reply(self, job: Job, channel: str, thread_ts: str) -> str | None:
        """The ts of this job's final reply if it is already in the thread, else None."""
        try:
            resp = await self.client.conversations_replies(
                channel=channel, ts=thread_ts, include_all_metadata=True, limit=200
            )
        except SlackApiError as exc:
            log.warning("could not read thread %s/%s: %s", channel, thread_ts, _error(exc))
            return None
        for message in resp.get("messages") or []:
            meta = message.get("metadata") or {}
            payload = meta.get("event_payload") or {}
            if meta.get("event_type") == REPLY_EVENT and payload.get("job_id") == job.id:
                return str(message["ts"])
        return None

    async def update_parent(self, channel: str, ts: str, diagnosis: Diagnosis, header: str | None) -> None:
        """Put the headline on the parent message; a failure here only costs the headline."""
        message = render_headline(diagnosis, header)
        try:
            await self.client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
        except SlackApiError as exc:
            log.warning("could not update the parent message %s/%s: %s", channel, ts, _error(exc))

    async def _post_message(
        self,
        channel: str,
        message: RenderedMessage,
        thread_ts: str | None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, object]:
        try:
            resp = await self.client.chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.blocks,
                thread_ts=thread_ts,
                unfurl_links=False,
                unfurl_media=False,
                metadata=metadata,
            )
        except SlackApiError as exc:
            if _error(exc) not in BAD_BLOCKS:
                raise
            log.warning("Slack refused the blocks (%s); posting the text alone", _error(exc))
            resp = await self.client.chat_postMessage(
                channel=channel, text=message.text, thread_ts=thread_ts, metadata=metadata
            )
        return dict(resp.data) if isinstance(resp.data, dict) else {}

    async def _respond(self, job: Job, message: RenderedMessage) -> PostedReply:
        if not job.response_url:
            raise ReplyFailed("the job has neither a channel the bot can post in nor a response_url")
        webhook = AsyncWebhookClient(
            job.response_url,
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(max_retry_count=self.retries),
                AsyncRateLimitErrorRetryHandler(max_retry_count=self.retries),
                AsyncServerErrorRetryHandler(max_retry_count=self.retries),
            ],
        )
        resp = await webhook.send(text=message.text, blocks=message.blocks, response_type="in_channel")
        if resp.status_code != 200:
            # Transient (the caller retries the job); response_url allows 5 uses in 30 minutes.
            raise RuntimeError(f"response_url answered HTTP {resp.status_code}: {resp.body[:200]}")
        return PostedReply(job.channel, None, None)

    async def _attach(self, channel: str, thread_ts: str, text: str) -> None:
        # The long evidence goes in a file in the thread; the answer is already posted.
        try:
            await self.client.files_upload_v2(
                channel=channel,
                thread_ts=thread_ts,
                content=text,
                filename="denpex-evidence.txt",
                title="Full evidence",
            )
        except SlackApiError as exc:
            log.warning("could not attach the evidence file in %s: %s", channel, _error(exc))


def _error(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""
