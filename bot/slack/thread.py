"""A diagnosis thread's memory and manners: the logs it holds, the facts it asked, the emoji.

Raw log text never outlives its job: a thread keeps only Slack file ids and the redacted text of
pasted logs, enough to fetch and diagnose the whole thread again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError

from bot.jobs.keys import Keys
from bot.jobs.masking import excerpt
from bot.jobs.outcomes import ROLE_REPLY, PostedReply
from bot.jobs.store import DEFAULT_RETENTION_S, Store, StoredDiagnosis, fingerprint
from bot.slack.reply import SlackReplier
from handlers.jobs import Job, LogRef
from signatures import redact
from signatures.diagnosis import Diagnosis

log = logging.getLogger(__name__)

DONE_REACTION = "white_check_mark"
FAILED_REACTION = "warning"


class ThreadEvidence:
    """Per thread: the logs it holds (as references) and the missing facts already asked."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys | None = None,
        retention_s: int = DEFAULT_RETENTION_S,
    ) -> None:
        self.redis = redis
        self.keys = keys or Keys()
        self.retention_s = retention_s

    async def record(self, channel: str, thread_ts: str, logs: Iterable[LogRef]) -> None:
        """Remember where the thread's logs are; pasted text is kept only in redacted form."""
        key = self.keys.thread_logs(channel, thread_ts)
        known = {log_identity(r) for r in await self.logs(channel, thread_ts)}
        for ref in logs:
            if ref.kind == "inline":
                # Kept bounded (head and tail, where failures and their cascades are) and redacted,
                # off the event loop: the web process shares this loop when workers run in it.
                excerpt = _excerpt(ref.text or "")
                ref = replace(ref, text=await asyncio.to_thread(redact, excerpt))
            if log_identity(ref) in known:
                continue
            known.add(log_identity(ref))
            await self.redis.rpush(key, json.dumps(ref.to_dict()))
        await self.redis.expire(key, self.retention_s)

    async def logs(self, channel: str, thread_ts: str) -> list[LogRef]:
        """Every log reference recorded for the thread, oldest first."""
        raw = await self.redis.lrange(self.keys.thread_logs(channel, thread_ts), 0, -1)
        return [LogRef.from_dict(json.loads(r)) for r in raw]

    async def asked(self, channel: str, thread_ts: str) -> set[str]:
        """Missing facts already asked in the thread."""
        members = await self.redis.smembers(self.keys.thread_asked(channel, thread_ts))
        return {m.decode() if isinstance(m, bytes) else m for m in members}

    async def mark_asked(self, channel: str, thread_ts: str, facts: Sequence[str]) -> None:
        """Never ask these again in this thread."""
        if facts:
            key = self.keys.thread_asked(channel, thread_ts)
            await self.redis.sadd(key, *facts)
            await self.redis.expire(key, self.retention_s)


INLINE_HEAD = 64 * 1024
INLINE_TAIL = 448 * 1024


def _excerpt(text: str) -> str:
    """At most INLINE_HEAD + INLINE_TAIL characters of a pasted log, cut at line ends."""
    return excerpt(text, INLINE_HEAD, INLINE_TAIL)


def log_identity(ref: LogRef) -> tuple[str, str]:
    """What makes two references the same log (a Slack file, a URL, a pasted name)."""
    return (ref.kind, ref.file_id or ref.url or ref.name)


class ThreadReplier(SlackReplier):
    """The worker's replier, plus what a thread needs afterwards: the logs it was built from,
    the facts it asked, and the emoji on the file's message (working -> done)."""

    def __init__(
        self, client: Any, evidence: ThreadEvidence, *, store: Store | None = None, **kw: Any
    ) -> None:
        super().__init__(client, **kw)
        self.evidence = evidence
        self.store = store

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
        """Post as usual, then record the thread's logs and swap the working emoji."""
        if diagnosis is not None and job_meta and job_meta.get("recurrence"):
            last = await self._last_seen(job, diagnosis)
            if last:
                job_meta = {**job_meta, "recurrence": f"{job_meta['recurrence']}, last on {last}"}
        posted = await super().deliver(job, diagnosis, error, job_meta=job_meta, retrying=retrying, role=role)
        thread = job.thread_ts or posted.thread_ts or posted.ts
        if diagnosis is not None and job.channel and thread:
            await self.evidence.record(job.channel, thread, job.logs)
            await self.evidence.mark_asked(job.channel, thread, diagnosis.missing_facts)
        await self.finish_reaction(job, ok=diagnosis is not None)
        return posted

    async def _last_seen(self, job: Job, diagnosis: Diagnosis) -> str | None:
        """'job llama-pretrain, 2024-05-01 10:20 UTC' for the previous diagnosis of the same
        failure in this channel."""
        fp = fingerprint(diagnosis.to_dict())
        if self.store is None or not job.channel or not fp:
            return None
        for other in await self.store.history(job.channel, 50):
            if other.id != job.id and other.fingerprint == fp:
                return label(other)
        return None

    async def finish_reaction(self, job: Job, *, ok: bool) -> None:
        """Replace the working emoji on the file's message with done or failed."""
        working, ts = job.meta.get("reaction"), job.meta.get("message_ts")
        if not working or not ts or not job.channel:
            return
        for method, name in (
            (self.client.reactions_remove, working),
            (self.client.reactions_add, DONE_REACTION if ok else FAILED_REACTION),
        ):
            try:
                await method(channel=job.channel, timestamp=ts, name=name)
            except SlackApiError as exc:  # a courtesy: never fail the job over an emoji
                log.info("reaction %s on %s: %s", name, ts, exc.response.get("error"))


def label(stored: StoredDiagnosis) -> str:
    """'job llama-pretrain, 2024-05-01 10:20 UTC': how a stored diagnosis is named to people."""
    when = datetime.fromtimestamp(stored.created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta = stored.meta or {}
    job = meta.get("job_name") or meta.get("job") or meta.get("job_id")
    return f"job {job}, {when}" if job else when
