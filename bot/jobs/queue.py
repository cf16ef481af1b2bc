"""The job queue on one Redis Stream with one consumer group.

Life of a job: ``enqueue`` (SET NX EX on its dedupe key, then XADD) -> a worker reads it with
XREADGROUP -> the worker posts the reply -> ``ack`` (XACK). A worker that dies leaves its entry
pending; after the visibility timeout another worker takes it over with XAUTOCLAIM. Each claim
counts as a delivery; past ``max_deliveries`` the job is moved to the dead-letter stream.

The stream is bounded without ever dropping a job: only acknowledged entries are trimmed (XTRIM
MINID at the oldest entry the group still needs), and ``enqueue`` refuses new work with
``QueueFull`` when the backlog is at its limit. MAXLEN is never used on the jobs stream because
it deletes entries whether or not they were delivered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from bot.jobs.deadletters import DEFAULT_TTL_S as DEAD_TTL_S
from bot.jobs.deadletters import DeadLetter, DeadLetters
from bot.jobs.keys import Keys
from bot.jobs.masking import mask_job
from bot.ops import metrics
from handlers.jobs import Job

log = logging.getLogger(__name__)

PAYLOAD = "job"  # the one field of a stream entry: the job's JSON
DEDUPE_TTL_S = 24 * 3600  # Slack retries for 5 minutes; webhooks may resend for longer
PROGRESS_TTL_S = 7 * 24 * 3600


class QueueFull(Exception):
    """The backlog is at its limit; the message is safe to show to the user."""


@dataclass(frozen=True)
class Delivery:
    """One job as handed to a worker: the stream entry, its payload and its delivery count."""

    entry_id: str
    payload: str
    deliveries: int  # how many times the group has handed this entry out, this one included

    def job(self) -> Job:
        """Parse the payload (raises ``JobFormatError`` / ``UnknownJobVersion``)."""
        return Job.from_json(self.payload)


class JobQueue:
    """Enqueue, read, claim, acknowledge and dead-letter jobs on one Redis Stream."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        keys: Keys | None = None,
        max_backlog: int = 10_000,
        # Workers heartbeat their running jobs, so this only bounds how long a dead worker's
        # job waits before another worker takes it over.
        visibility_timeout_ms: int = 60_000,
        max_deliveries: int = 3,
        dedupe_ttl_s: int = DEDUPE_TTL_S,
        dead_maxlen: int = 10_000,
        dead_ttl_s: int = DEAD_TTL_S,
    ) -> None:
        # decode_responses=True (bot/jobs/connection.py) makes every reply str; redis-py's stubs
        # cannot know that, so the client is untyped here and replies are typed where parsed.
        self.redis: Any = redis
        self.keys = keys or Keys()
        self.max_backlog = max_backlog
        self.visibility_timeout_ms = visibility_timeout_ms
        self.max_deliveries = max_deliveries
        self.dedupe_ttl_s = dedupe_ttl_s
        self.dead = DeadLetters(self.redis, self.keys, maxlen=dead_maxlen, ttl_s=dead_ttl_s)
        self._group_ready = False

    # -- setup --------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create the stream and the consumer group if they do not exist yet."""
        try:
            # id "0": a group created after jobs were queued still sees them.
            await self.redis.xgroup_create(self.keys.jobs, self.keys.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    async def join(self, consumer: str) -> None:
        """Register ``consumer`` in the group, so it is visible before it reads anything."""
        await self._ensure()
        await self.redis.xgroup_createconsumer(self.keys.jobs, self.keys.group, consumer)

    async def _ensure(self) -> None:
        if not self._group_ready:
            await self.setup()

    # -- producing ----------------------------------------------------------------------------

    async def enqueue(self, job: Job) -> bool:
        """Queue ``job`` once per dedupe key: False when the key was already seen.

        Raises ``QueueFull`` when the backlog is at its limit (the dedupe key is released, so
        the sender's retry can get in later).
        """
        await self._ensure()
        dedupe = self.keys.dedupe(job.dedupe_key)
        if not await self.redis.set(dedupe, job.id, nx=True, ex=self.dedupe_ttl_s):
            metrics.job_duplicate(job.source)
            return False
        try:
            # Only redacted text is queued: the entry, its AOF record and any dead letter of it.
            payload = (await mask_job(job)).to_json()
            if await self.redis.xlen(self.keys.jobs) >= self.max_backlog:
                await self.trim()
                if await self.redis.xlen(self.keys.jobs) >= self.max_backlog:
                    raise QueueFull(
                        f"Denpex has {self.max_backlog} jobs waiting; try again in a few minutes."
                    )
            await self.redis.xadd(self.keys.jobs, {PAYLOAD: payload})
        except BaseException:
            # Not queued: forget the dedupe key so a retry is not mistaken for a duplicate.
            await self.redis.delete(dedupe)
            raise
        metrics.job_enqueued(job.source)
        return True

    async def seen(self, job: Job) -> bool:
        """True when a job with ``job``'s dedupe key was queued within the dedupe window."""
        return bool(await self.redis.exists(self.keys.dedupe(job.dedupe_key)))

    # -- consuming ----------------------------------------------------------------------------

    async def read(self, consumer: str, *, count: int = 1, block_ms: int | None = None) -> list[Delivery]:
        """New entries for ``consumer`` (XREADGROUP ``>``); blocks up to ``block_ms`` if given."""
        await self._ensure()
        try:
            reply = await self.redis.xreadgroup(
                self.keys.group, consumer, {self.keys.jobs: ">"}, count=count, block=block_ms
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream was deleted (FLUSHDB, a restart without persistence): recreate it.
            await self.setup()
            return []
        return [Delivery(eid, payload or "", 1) for eid, payload in _entries(reply)]

    async def reclaim_own(
        self,
        consumer: str,
        *,
        min_idle_ms: int,
        skip: Sequence[str] = (),
        count: int = 10,
        backoff: int = 4,
    ) -> list[Delivery]:
        """Take back this consumer's own pending entries (a failed attempt, or a previous run
        under the same name), except the ids in ``skip``.

        An entry delivered n times waits ``min_idle_ms * backoff**(n-1)`` before its next try,
        so a short outage (Slack answering 500 for a minute) does not use up every attempt.
        """
        await self._ensure()
        rows = await self.redis.xpending_range(
            self.keys.jobs,
            self.keys.group,
            min="-",
            max="+",
            count=100 + len(skip),
            consumername=consumer,
            # IDLE 0 would still skip entries delivered this millisecond on some servers.
            idle=min_idle_ms or None,
        )
        ids = [
            row["message_id"]
            for row in rows
            if row["message_id"] not in skip
            and int(row["time_since_delivered"])
            >= min_idle_ms * backoff ** max(0, int(row["times_delivered"]) - 1)
        ][:count]
        if not ids:
            return []
        # XCLAIM counts a new delivery and resets the idle time.
        # MIN-IDLE again: an entry another worker claimed meanwhile is not taken from it.
        claimed = await self.redis.xclaim(self.keys.jobs, self.keys.group, consumer, min_idle_ms, ids)
        return await self._with_counts(consumer, _pairs(claimed))

    async def claim_stale(
        self, consumer: str, *, min_idle_ms: int | None = None, count: int = 10
    ) -> list[Delivery]:
        """Take over entries any consumer left idle past the visibility timeout (XAUTOCLAIM)."""
        await self._ensure()
        idle = self.visibility_timeout_ms if min_idle_ms is None else min_idle_ms
        cursor = "0-0"
        claimed: list[tuple[str, str | None]] = []
        while len(claimed) < count:
            reply = await self.redis.xautoclaim(
                self.keys.jobs,
                self.keys.group,
                consumer,
                idle,
                start_id=cursor,
                count=count - len(claimed),
            )
            cursor = reply[0]
            claimed.extend(_pairs(reply[1]))
            if cursor in ("0-0", b"0-0"):
                break
        return await self._with_counts(consumer, claimed)

    async def _with_counts(self, consumer: str, pairs: list[tuple[str, str | None]]) -> list[Delivery]:
        # XAUTOCLAIM and XCLAIM do not return delivery counts; XPENDING does.
        out = []
        for eid, payload in pairs:
            if payload is None:
                # The entry was deleted while pending; nothing to run.
                await self.redis.xack(self.keys.jobs, self.keys.group, eid)
                continue
            rows = await self.redis.xpending_range(
                self.keys.jobs, self.keys.group, min=eid, max=eid, count=1, consumername=consumer
            )
            deliveries = int(rows[0]["times_delivered"]) if rows else 1
            out.append(Delivery(eid, payload, deliveries))
        return out

    async def hand_back(self, entry_id: str, consumer: str) -> None:
        """Make an unfinished entry claimable at once by other workers (used at shutdown)."""
        # XCLAIM ... IDLE <visibility> JUSTID: same owner, no new delivery counted, but it
        # looks idle long enough for the next worker's XAUTOCLAIM.
        await self.redis.xclaim(
            self.keys.jobs,
            self.keys.group,
            consumer,
            0,
            [entry_id],
            idle=self.visibility_timeout_ms,
            justid=True,
        )

    async def touch(self, entry_id: str, consumer: str) -> bool:
        """Reset the idle time of an entry ``consumer`` is still working on (a heartbeat)."""
        rows = await self.redis.xpending_range(
            self.keys.jobs, self.keys.group, min=entry_id, max=entry_id, count=1
        )
        if not rows or rows[0]["consumer"] != consumer:
            return False  # acknowledged, or taken over by another worker: leave it be
        # JUSTID: no new delivery is counted.
        await self.redis.xclaim(self.keys.jobs, self.keys.group, consumer, 0, [entry_id], justid=True)
        return True

    async def ack(self, entry_id: str) -> bool:
        """Acknowledge a finished entry and trim what no consumer needs any more."""
        done = await self.redis.xack(self.keys.jobs, self.keys.group, entry_id)
        await self.trim()
        await self.dead.sweep_now_and_then()
        return bool(done)

    # -- dead letters -------------------------------------------------------------------------

    async def dead_letter(self, delivery: Delivery, reason: str) -> str:
        """Move an entry to the dead-letter stream (redacted, bounded, expiring) and acknowledge
        it, in one transaction."""
        payload = await self.dead.bounded_payload(delivery.payload)
        async with self.redis.pipeline(transaction=True) as pipe:
            self.dead.add_to(
                pipe, payload, reason=reason, original_id=delivery.entry_id, deliveries=delivery.deliveries
            )
            pipe.xack(self.keys.jobs, self.keys.group, delivery.entry_id)
            results = await pipe.execute()
        await self.trim()
        return str(results[0])

    async def dead_letters(self, count: int = 100) -> list[DeadLetter]:
        """The newest dead letters, newest first."""
        return await self.dead.newest(count)

    async def retry_dead(self, entry_id: str) -> str | None:
        """Put a dead letter back on the jobs stream; returns the new entry id, None if absent."""
        await self._ensure()
        rows = await self.redis.xrange(self.keys.dead, min=entry_id, max=entry_id, count=1)
        if not rows:
            return None
        payload = rows[0][1][PAYLOAD]
        job = Job.from_json(payload)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self.keys.jobs, {PAYLOAD: payload})
            pipe.xdel(self.keys.dead, entry_id)
            # Its error reply was posted; the retry must be allowed to post the real answer.
            pipe.hdel(self.keys.job_progress(job.id), "reply_ts", "replied", "reply_intent", "gave_up_intent")
            results = await pipe.execute()
        return str(results[0])

    # -- progress of one job (what it already posted) ------------------------------------------

    async def progress(self, job_id: str) -> dict[str, str]:
        """What a job already posted: ``parent_ts``, ``parent_channel``, ``reply_ts``..."""
        data: dict[str, str] = await self.redis.hgetall(self.keys.job_progress(job_id))
        return data

    async def mark_intent(self, job_id: str, what: str) -> float | None:
        """Record that the job is about to post ``what`` (``parent_intent``, ``reply_intent``).

        Returns when an earlier attempt recorded the same intent (it may have posted: look in
        Slack before posting again), or None when this is the first attempt.
        """
        key = self.keys.job_progress(job_id)
        now = repr(time.time())
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, what, now)
            pipe.hget(key, what)
            pipe.expire(key, PROGRESS_TTL_S)
            first, value, _ = await pipe.execute()
        return None if first else float(value or 0)

    async def set_progress(self, job_id: str, **fields: str) -> None:
        """Record what a job posted, so a retry never posts it twice."""
        key = self.keys.job_progress(job_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, PROGRESS_TTL_S)
            await pipe.execute()

    # -- size ---------------------------------------------------------------------------------

    async def trim(self) -> int:
        """Delete acknowledged entries: everything below the oldest entry the group needs."""
        groups = await self.redis.xinfo_groups(self.keys.jobs)
        group = next((g for g in groups if g["name"] == self.keys.group), None)
        if group is None:
            return 0
        last = str(group["last-delivered-id"])
        # Read the PEL after last-delivered-id: anything delivered in between is above ``last``.
        summary = await self.redis.xpending(self.keys.jobs, self.keys.group)
        keep_from = _next_id(last)
        if summary["pending"]:
            keep_from = min(keep_from, str(summary["min"]), key=_id_key)
        if keep_from == "0-1":
            return 0
        trimmed: int = await self.redis.xtrim(self.keys.jobs, minid=keep_from, approximate=False)
        return trimmed

    async def stats(self) -> dict[str, int | None]:
        """Stream length, entries not yet delivered (lag), pending, dead letters."""
        await self._ensure()
        groups = await self.redis.xinfo_groups(self.keys.jobs)
        group: dict[str, Any] = next((g for g in groups if g["name"] == self.keys.group), {})
        lag = group.get("lag")
        return {
            "length": int(await self.redis.xlen(self.keys.jobs)),
            "lag": int(lag) if lag is not None else None,
            "pending": int(group.get("pending", 0)),
            "dead": int(await self.redis.xlen(self.keys.dead)),
        }

    async def idle(self) -> bool:
        """True when nothing is waiting and nothing is being worked on."""
        stats = await self.stats()
        return stats["pending"] == 0 and (stats["lag"] or 0) == 0


def _entries(reply: Any) -> list[tuple[str, str | None]]:
    # RESP2 shape (pinned in bot/jobs/connection.py): [[stream, [(id, {field: value}), ...]]]
    out: list[tuple[str, str | None]] = []
    for _stream, entries in reply or []:
        out.extend(_pairs(entries))
    return out


def _pairs(entries: Any) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for eid, fields in entries or []:
        out.append((eid, (fields or {}).get(PAYLOAD)))
    return out


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _next_id(entry_id: str) -> str:
    ms, seq = _id_key(entry_id)
    return f"{ms}-{seq + 1}"
