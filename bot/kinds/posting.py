"""How a job other than a diagnosis answers: in its thread, or privately to the person who asked.

Each answer records that it was posted (job progress), so a retried job never answers twice.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.jobs.outcomes import JobFailed, PostedReply
from bot.jobs.store import StoredDiagnosis
from bot.jobs.worker import JobContext
from bot.slack.render import RenderedMessage
from handlers.jobs import Job


async def in_thread(ctx: JobContext, job: Job, message: RenderedMessage) -> PostedReply:
    """Post ``message`` in the job's thread."""
    retrying = await ctx.worker.begin_reply(job)
    posted = await ctx.replier.post(job, message, thread_ts=job.thread_ts, final=True, retrying=retrying)
    await ctx.queue.set_progress(job.id, replied=job.kind, reply_ts=posted.ts or "")
    return posted


async def privately(ctx: JobContext, job: Job, message: RenderedMessage) -> None:
    """An ephemeral answer to the person who asked (slash commands, feedback)."""
    if job.response_url:
        resp = await AsyncWebhookClient(job.response_url).send(
            text=message.text, blocks=message.blocks, response_type="ephemeral"
        )
        if resp.status_code != 200:
            raise RuntimeError(f"response_url answered HTTP {resp.status_code}")
    elif job.channel and job.user:
        kwargs: dict[str, Any] = {"thread_ts": job.thread_ts} if job.thread_ts else {}
        await ctx.replier.client.chat_postEphemeral(
            channel=job.channel, user=job.user, text=message.text, blocks=message.blocks, **kwargs
        )
    else:
        raise JobFailed(message.text)
    await ctx.queue.set_progress(job.id, replied=job.kind)


async def answer_where_asked(ctx: JobContext, job: Job, message: RenderedMessage) -> None:
    """In the thread when the job came from one, privately otherwise."""
    if job.thread_ts and job.channel:
        await in_thread(ctx, job, message)
    else:
        await privately(ctx, job, message)


async def stored_of_thread(ctx: JobContext, job: Job) -> StoredDiagnosis:
    """The diagnosis the job's thread hangs from; JobFailed when it is gone."""
    stored = None
    if job.channel and job.thread_ts:
        stored = await ctx.store.by_thread(job.channel, job.thread_ts)
    if stored is None:
        raise JobFailed("I no longer have the diagnosis of this thread (it may have expired).")
    return stored
