"""What Denpex remembers: diagnoses by thread, per-channel history, recurrence and feedback.

Only the redacted diagnosis (with its evidence windows) is stored, never the raw log. Recurrence
is keyed on facts (signature id plus its captured values), never on message text. Everything
about a diagnosis expires after the retention period; per-signature counters hold no user text
and are kept.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from bot.jobs.keys import Keys
from handlers.jobs import Job

DEFAULT_RETENTION_S = 30 * 24 * 3600
HISTORY_LEN = 100
WEEK_S = 7 * 24 * 3600
VERDICTS = ("correct", "wrong")


@dataclass(frozen=True)
class StoredDiagnosis:
    """A diagnosis as stored: the redacted result and where it was answered."""

    id: str
    diagnosis: dict[str, Any]  # Diagnosis.to_dict(): redacted text and evidence windows
    channel: str | None
    thread_ts: str | None
    source: str
    created_at: float
    fingerprint: str | None
    reply_ts: str | None = None
    meta: dict[str, str] | None = None

    @property
    def signature_id(self) -> str | None:
        """The signature that named the failure, if any."""
        sig = self.diagnosis.get("signature")
        return str(sig["id"]) if isinstance(sig, dict) and sig.get("id") else None


@dataclass(frozen=True)
class Recurrence:
    """How often the same failure was seen in a window, this channel and everywhere."""

    in_channel: int
    everywhere: int
    window_s: int


@dataclass(frozen=True)
class Feedback:
    user: str
    verdict: str  # "correct" | "wrong"
    at: float


@dataclass(frozen=True)
class SignatureStats:
    diagnoses: int
    confirmed: int
    disputed: int


def fingerprint(diagnosis: dict[str, Any]) -> str | None:
    """The recurrence key of a diagnosis: signature id plus captured values, or None.

    Unrecognized and clean results have no fingerprint: the only thing to key them on would be
    message text.
    """
    sig = diagnosis.get("signature")
    if diagnosis.get("status") != "failure" or not isinstance(sig, dict) or not sig.get("id"):
        return None
    captures = diagnosis.get("captures") or {}
    if not isinstance(captures, dict) or not captures:
        return str(sig["id"])
    facts = json.dumps(captures, sort_keys=True, separators=(",", ":"))
    return f"{sig['id']}:{hashlib.sha256(facts.encode()).hexdigest()[:16]}"


class Store:
    """Diagnoses, thread index, history, recurrence and feedback in Redis."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        keys: Keys | None = None,
        retention_s: int = DEFAULT_RETENTION_S,
        history_len: int = HISTORY_LEN,
    ) -> None:
        # decode_responses=True (bot/jobs/connection.py) makes every reply str; redis-py's stubs
        # cannot know that, so the client is untyped here and replies are typed where parsed.
        self.redis: Any = redis
        self.keys = keys or Keys()
        self.retention_s = retention_s
        self.history_len = history_len

    async def save(
        self,
        diagnosis_id: str,
        diagnosis: dict[str, Any],
        *,
        job: Job,
        channel: str | None,
        thread_ts: str | None,
        now: float | None = None,
    ) -> StoredDiagnosis:
        """Store a diagnosis and index it; safe to call again for the same id (a retried job)."""
        now = time.time() if now is None else now
        fp = fingerprint(diagnosis)
        key = self.keys.diagnosis(diagnosis_id)
        first_time = await self.redis.hsetnx(key, "created_at", repr(now))
        if not first_time:
            now = float(await self.redis.hget(key, "created_at") or now)
        ttl = self.retention_s
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={
                    "diagnosis": json.dumps(diagnosis, separators=(",", ":")),
                    "channel": channel or "",
                    "thread_ts": thread_ts or "",
                    "source": job.source,
                    "job_id": job.id,
                    "fingerprint": fp or "",
                    "meta": json.dumps(job.meta, separators=(",", ":")),
                },
            )
            pipe.expire(key, ttl)
            if channel and thread_ts:
                pipe.set(self.keys.thread(channel, thread_ts), diagnosis_id, ex=ttl)
            if channel:
                hist = self.keys.history(channel)
                pipe.lrem(hist, 0, diagnosis_id)  # a retried job must not appear twice
                pipe.lpush(hist, diagnosis_id)
                pipe.ltrim(hist, 0, self.history_len - 1)
                pipe.expire(hist, ttl)
            if fp:
                for scope in (None, channel) if channel else (None,):
                    seen = self.keys.occurrences(fp, scope)
                    pipe.zadd(seen, {diagnosis_id: now})
                    pipe.zremrangebyscore(seen, "-inf", now - ttl)
                    pipe.expire(seen, ttl)
            await pipe.execute()
        sig = diagnosis.get("signature")
        if first_time and isinstance(sig, dict) and sig.get("id"):
            await self.redis.hincrby(self.keys.signature_stats(str(sig["id"])), "diagnoses", 1)
        return StoredDiagnosis(
            diagnosis_id, diagnosis, channel, thread_ts, job.source, now, fp, meta=dict(job.meta)
        )

    async def set_reply(self, diagnosis_id: str, reply_ts: str) -> None:
        """Remember the ts of the message that carries the diagnosis."""
        await self.redis.hset(self.keys.diagnosis(diagnosis_id), "reply_ts", reply_ts)

    async def get(self, diagnosis_id: str) -> StoredDiagnosis | None:
        """A stored diagnosis, or None once it has expired."""
        data: dict[str, str] = await self.redis.hgetall(self.keys.diagnosis(diagnosis_id))
        if not data or "diagnosis" not in data:
            return None
        return StoredDiagnosis(
            id=diagnosis_id,
            diagnosis=json.loads(data["diagnosis"]),
            channel=data.get("channel") or None,
            thread_ts=data.get("thread_ts") or None,
            source=data.get("source", ""),
            created_at=float(data.get("created_at", 0)),
            fingerprint=data.get("fingerprint") or None,
            reply_ts=data.get("reply_ts") or None,
            meta=json.loads(data.get("meta") or "{}"),
        )

    async def by_thread(self, channel: str, thread_ts: str) -> StoredDiagnosis | None:
        """The diagnosis answered in a Slack thread (for follow-up questions)."""
        diagnosis_id = await self.redis.get(self.keys.thread(channel, thread_ts))
        return await self.get(diagnosis_id) if diagnosis_id else None

    async def history(self, channel: str, limit: int = 10) -> list[StoredDiagnosis]:
        """The newest diagnoses in a channel, newest first (expired ones skipped)."""
        ids = await self.redis.lrange(self.keys.history(channel), 0, max(0, limit - 1))
        found = [await self.get(i) for i in ids]
        return [d for d in found if d is not None]

    async def recurrence(
        self,
        fp: str,
        channel: str | None,
        *,
        window_s: int = WEEK_S,
        now: float | None = None,
    ) -> Recurrence:
        """How many diagnoses with this fingerprint fell in the last ``window_s`` seconds."""
        now = time.time() if now is None else now
        since = now - window_s
        everywhere = await self.redis.zcount(self.keys.occurrences(fp), since, "+inf")
        in_channel = (
            await self.redis.zcount(self.keys.occurrences(fp, channel), since, "+inf") if channel else 0
        )
        return Recurrence(int(in_channel), int(everywhere), window_s)

    async def record_feedback(
        self, diagnosis_id: str, user: str, verdict: str, *, at: float | None = None
    ) -> bool:
        """Record one user's verdict once; False when that user already gave one."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {verdict!r}")
        at = time.time() if at is None else at
        key = self.keys.feedback(diagnosis_id)
        entry = json.dumps({"verdict": verdict, "at": at})
        if not await self.redis.hsetnx(key, user, entry):
            return False
        await self.redis.expire(key, self.retention_s)
        stored = await self.get(diagnosis_id)
        if stored is not None and stored.signature_id:
            field = "confirmed" if verdict == "correct" else "disputed"
            await self.redis.hincrby(self.keys.signature_stats(stored.signature_id), field, 1)
        return True

    async def feedback(self, diagnosis_id: str) -> list[Feedback]:
        """Every verdict given on a diagnosis, oldest first."""
        data: dict[str, str] = await self.redis.hgetall(self.keys.feedback(diagnosis_id))
        out = []
        for user, raw in data.items():
            entry = json.loads(raw)
            out.append(Feedback(user, entry["verdict"], float(entry["at"])))
        return sorted(out, key=lambda f: f.at)

    async def signature_stats(self, signature_id: str) -> SignatureStats:
        """Counters of one signature: diagnoses made, confirmed and disputed by users."""
        data: dict[str, str] = await self.redis.hgetall(self.keys.signature_stats(signature_id))
        return SignatureStats(
            diagnoses=int(data.get("diagnoses", 0)),
            confirmed=int(data.get("confirmed", 0)),
            disputed=int(data.get("disputed", 0)),
        )


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def recurrence_text(rec: Recurrence) -> str | None:
    """'3rd time this week in this channel' when the failure was seen before, else None."""
    span = "this week" if rec.window_s == WEEK_S else f"in the last {rec.window_s // 86400} days"
    if rec.in_channel >= 2:
        text = f"{ordinal(rec.in_channel)} time {span} in this channel"
        if rec.everywhere > rec.in_channel:
            text += f" ({rec.everywhere} across all channels)"
        return text
    if rec.everywhere >= 2:
        return f"{ordinal(rec.everywhere)} time {span} across channels"
    return None
