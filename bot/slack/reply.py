"""Posting answers in Slack: the parent message, the diagnosis or error in its thread, and the
``response_url`` fallback when the bot cannot post in the channel."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.jobs.outcomes import ROLE_PARENT, ROLE_REPLY, PostedReply, ReplyFailed
from bot.ops import metrics
from bot.slack.once import JobPosts, tag, transient
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
RETRY_DELAY_S = 0.5  # before the 1st re-post of a post that may have landed, then doubled
# Errors about the blocks themselves: the text-only form still gets the answer across.
BAD_BLOCKS = frozenset({"invalid_blocks", "msg_blocks_too_long", "invalid_blocks_format"})


def make_client(
    token: str, base_url: str | None = None, *, retries: int = RETRIES, timeout: float = TIMEOUT_S
) -> AsyncWebClient:
    """A Web API client that retries 429 (honouring Retry-After), 500/503 and lost connections;
    a ``chat.postMessage`` only after 429 (the replier retries its other failures itself)."""
    client = AsyncWebClient(
        token=token,
        base_url=base_url or SLACK_API_URL,
        timeout=timeout,  # type: ignore[arg-type]  # an int in the stubs; aiohttp takes seconds
        retry_handlers=[
            PostAwareConnectionErrorRetryHandler(max_retry_count=retries),
            AsyncRateLimitErrorRetryHandler(max_retry_count=retries),
            PostAwareServerErrorRetryHandler(max_retry_count=retries),
        ],
    )
    return metrics.observe_slack_client(client)


def _is_post(request: HttpRequest) -> bool:
    return request.url.rstrip("/").endswith("/chat.postMessage")


class _NeverRetriesPosts(AsyncRetryHandler):
    """Declines a ``chat.postMessage``: after a 500/503 or a lost connection it may have landed
    all the same, so ``SlackReplier`` looks for it before posting again."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if _is_post(request):
            return False
        return await super()._can_retry_async(state=state, request=request, response=response, error=error)


class PostAwareServerErrorRetryHandler(_NeverRetriesPosts, AsyncServerErrorRetryHandler):
    """Retries 500/503, except a ``chat.postMessage``."""


class PostAwareConnectionErrorRetryHandler(_NeverRetriesPosts, AsyncConnectionErrorRetryHandler):
    """Retries lost connections, except a ``chat.postMessage``."""


class SlackReplier:
    """Posts a job's answer in its Slack thread, each message once (see ``bot.slack.once``)."""

    def __init__(
        self, client: AsyncWebClient, *, retries: int = RETRIES, retry_delay_s: float = RETRY_DELAY_S
    ) -> None:
        self.client = client
        self.retries = retries
        self.retry_delay_s = retry_delay_s
        self.posts = JobPosts(client)

    async def deliver(
        self,
        job: Job,
        diagnosis: Diagnosis | None,
        error: str | None,
        *,
        job_meta: dict[str, str] | None = None,
        retrying: bool = False,
        role: str = ROLE_REPLY,
    ) -> PostedReply:
        """Post the diagnosis (or the error) in the job's thread, opening the thread if needed.

        ``retrying``: an earlier attempt may have posted it already; look before posting.
        """
        if diagnosis is not None:
            message = render_diagnosis(diagnosis, job_meta=job_meta or job.meta)
        else:
            message = render_error(error or "Something went wrong.")
        thread_ts = job.thread_ts
        if job.channel and thread_ts is None:
            parent = await self.post_parent(job, retrying=retrying)
            if parent.ts is None:
                # The bot cannot post in the channel: answer through response_url instead.
                return await self._respond(job, message)
            thread_ts = parent.ts
        posted = await self.post(job, message, thread_ts=thread_ts, final=True, retrying=retrying, role=role)
        if message.file_text and posted.ts and posted.channel and not posted.found:
            await self._attach(posted.channel, posted.thread_ts or posted.ts, message.file_text)
        return posted

    async def post_parent(
        self, job: Job, *, retrying: bool = False, since: float | None = None
    ) -> PostedReply:
        """Post the message a new thread hangs from; ``ts`` is None if the bot cannot post.

        ``retrying``: look for an earlier attempt's parent (posted since ``since``) first.
        """
        if not job.channel:
            return PostedReply(None, None, None)
        message = render_parent(job.header or "Denpex is looking at this failure", mention=job.user)
        try:
            return await self._post_once(job.channel, message, None, job.id, ROLE_PARENT, retrying, since)
        except SlackApiError as exc:
            if _error(exc) in CANNOT_POST_HERE and job.response_url:
                return PostedReply(job.channel, None, None)
            raise

    async def post(
        self,
        job: Job,
        message: RenderedMessage,
        *,
        thread_ts: str | None,
        final: bool = False,
        retrying: bool = False,
        role: str = ROLE_REPLY,
    ) -> PostedReply:
        """Post ``message`` in the job's channel (in ``thread_ts``), else via response_url.

        ``final`` tags the message with the job id and ``role`` (Slack message metadata) and
        posts it once: a post that may have landed (a timeout, a 5xx) is looked for before it is
        posted again, and with ``retrying`` (an earlier attempt began posting) before the first.
        """
        if not job.channel:
            return await self._respond(job, message)
        try:
            if final:
                return await self._post_once(job.channel, message, thread_ts, job.id, role, retrying, None)
            resp = await self._post_message(job.channel, message, thread_ts)
        except SlackApiError as exc:
            if _error(exc) in CANNOT_POST_HERE and job.response_url:
                return await self._respond(job, message)
            if _error(exc) in CANNOT_POST_HERE:
                raise ReplyFailed(
                    f"cannot post in {job.channel} ({_error(exc)}) and the job has no response_url"
                ) from exc
            raise
        return PostedReply(str(resp["channel"]), str(resp["ts"]), thread_ts)

    async def find_parent(self, job: Job, channel: str, since: float | None) -> str | None:
        """The ts of this job's parent message if one was posted (since ``since``), else None."""
        found = await self.posts.find(channel, job.id, ROLE_PARENT, since=since)
        return found[0] if found else None

    async def find_reply(self, job: Job, channel: str, thread_ts: str) -> str | None:
        """The ts of this job's final reply if it is already in the thread, else None."""
        found = await self.posts.find(channel, job.id, ROLE_REPLY, thread_ts=thread_ts)
        return found[0] if found else None

    async def _post_once(
        self,
        channel: str,
        message: RenderedMessage,
        thread_ts: str | None,
        job_id: str,
        role: str,
        retrying: bool,
        since: float | None,
    ) -> PostedReply:
        since = time.time() if since is None else since

        async def earlier() -> PostedReply | None:
            ts = await self.posts.keep_first(channel, job_id, role, thread_ts=thread_ts, since=since)
            return PostedReply(channel, ts, thread_ts, found=True) if ts else None

        if retrying and (found := await earlier()):
            return found
        for attempt in range(self.retries + 1):
            try:
                resp = await self._post_message(channel, message, thread_ts, tag(job_id, role))
                break
            except Exception as exc:
                if not transient(exc) or attempt >= self.retries:
                    raise
                # Slack may have posted it though its answer never came back: look, then retry.
                log.warning(
                    "posting job %s's %s failed (%s); checking before posting again",
                    job_id,
                    role,
                    type(exc).__name__,
                )
                await asyncio.sleep(self.retry_delay_s * 2**attempt)
                retrying = True
                if found := await earlier():
                    return found
        posted = PostedReply(str(resp["channel"]), str(resp["ts"]), thread_ts)
        if retrying:
            # Another attempt's post slipped past the search: keep the earliest, drop the rest.
            first = await earlier()
            if first is not None and first.ts != posted.ts:
                return first
        return posted

    async def update_parent(
        self, channel: str, ts: str, diagnosis: Diagnosis, header: str | None, mention: str | None = None
    ) -> None:
        """Put the headline on the parent message; a failure here only costs the headline."""
        message = render_headline(diagnosis, header, mention=mention)
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
