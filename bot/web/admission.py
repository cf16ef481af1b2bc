"""Where jobs are accepted: the daily allowances, checked on the queue the handlers are given.

Handlers only see an object with ``enqueue(job)``. ``AllowanceQueue`` is that object: it counts
the job against its allowances (``bot.jobs.allowance``) before queueing it, gives the count back
when the job turns out to be a duplicate or cannot be queued, and raises ``AllowanceExceeded``
when a scope has used its allowance. The Slack side turns that into a polite answer to the
person who asked; the webhook route answers it with 429 and Retry-After until midnight UTC.

The webhook key a report was signed with is not part of the job. ``admission_middleware`` puts
the request's key id in a context variable for the queue to read; ``enqueue`` is only called
after the route checked the signature made with that key's secret.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.jobs.allowance import AllowanceCounter, AllowanceExceeded
from bot.jobs.queue import JobQueue
from bot.ops import metrics
from handlers.jobs import Job
from handlers.webhook import DEFAULT_KEY_ID, KEY_ID_HEADER
from handlers.webhook import PATH as WEBHOOK_PATH

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

webhook_key_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "denpex_webhook_key", default=None
)
# The refusals of the current webhook request, for the middleware to answer them with 429.
_refusals: contextvars.ContextVar[list[AllowanceExceeded] | None] = contextvars.ContextVar(
    "denpex_refusals", default=None
)


class AllowanceQueue:
    """A job queue that counts new diagnoses against the daily allowances first."""

    def __init__(self, queue: JobQueue, counter: AllowanceCounter) -> None:
        self.queue = queue
        self.counter = counter

    async def enqueue(self, job: Job) -> bool:
        """Queue ``job`` once (False: a duplicate); ``AllowanceExceeded`` when out of allowance."""
        try:
            taken = await self.counter.take(job, webhook_key=webhook_key_var.get())
        except AllowanceExceeded as exc:
            if await self.queue.seen(job):
                # A retry of a job counted when it was queued: a duplicate, not a new diagnosis.
                metrics.job_duplicate(job.source)
                return False
            metrics.allowance_refused(exc.scope)
            log.info("job refused: %s allowance used", exc.scope, extra={"source": job.source})
            refusals = _refusals.get()
            if refusals is not None:
                refusals.append(exc)
            raise
        try:
            fresh = await self.queue.enqueue(job)
        except BaseException:
            await self.counter.refund(taken)
            raise
        if not fresh:
            await self.counter.refund(taken)  # a retry of a job already counted
        return fresh


async def tell_refused(client: AsyncWebClient, job: Job, exc: AllowanceExceeded) -> None:
    """Say politely, to the person who asked, why their job was not started."""
    text = str(exc)
    try:
        if job.response_url:
            await AsyncWebhookClient(job.response_url).send(text=text, response_type="ephemeral")
        elif job.channel and job.user:
            await client.chat_postEphemeral(
                channel=job.channel, user=job.user, text=text, thread_ts=job.thread_ts
            )
        elif job.channel:
            await client.chat_postMessage(channel=job.channel, thread_ts=job.thread_ts, text=text)
    except Exception as err:  # a courtesy: the refusal stands whether or not it could be told
        log.warning("could not tell about a refused job: %s", type(err).__name__)


def count_answer(status: int) -> None:
    """The webhook route's answer counter: a refusal it answered 5xx is counted as the 429 the
    middleware turns it into."""
    refused = bool(_refusals.get()) and status >= 500
    metrics.webhook_answered(429 if refused else status)


def too_many(exc: AllowanceExceeded) -> web.Response:
    """429 with Retry-After until the allowance resets."""
    return web.json_response(
        {"error": str(exc), "scope": exc.scope}, status=429, headers={"Retry-After": str(exc.retry_after_s)}
    )


@web.middleware
async def admission_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """For the webhook route: give the queue the request's key id; a report refused by an
    allowance is answered 429 with Retry-After (whatever the route made of the refusal)."""
    if request.path != WEBHOOK_PATH:
        return await handler(request)
    refusals: list[AllowanceExceeded] = []
    key_token = webhook_key_var.set(request.headers.get(KEY_ID_HEADER, DEFAULT_KEY_ID))
    refusal_token = _refusals.set(refusals)
    try:
        response = await handler(request)
    except AllowanceExceeded as exc:
        metrics.webhook_answered(429)
        return too_many(exc)
    finally:
        _refusals.reset(refusal_token)
        webhook_key_var.reset(key_token)
    if refusals and response.status >= 500:
        # The route answers any enqueue failure with 503 ("retry later"); an allowance refusal
        # is not an outage: retrying before midnight UTC is pointless.
        return too_many(refusals[0])
    return response
