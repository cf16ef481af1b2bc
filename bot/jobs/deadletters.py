"""The dead-letter stream: jobs given up on, kept redacted, bounded in size, and for a while only.

An entry holds the job (as queued: redacted at ingress, and redacted again here in case it was
queued by an older Denpex), why it was given up on and when. Pasted logs past
``max_payload_chars`` are cut to their start and end. Entries older than ``ttl_s`` are trimmed
(XTRIM MINID, on every new dead letter, on every listing and at most once a minute while the
queue acknowledges jobs), and the whole stream expires ``ttl_s`` after its last dead letter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from bot.jobs.keys import Keys
from bot.jobs.masking import excerpt, mask_job, redact_in_pieces
from handlers.jobs import Job, JobFormatError
from signatures.redact import redact

PAYLOAD = "job"  # the field holding the job's JSON, as on the jobs stream
DEFAULT_TTL_S = 14 * 24 * 3600
MAX_PAYLOAD_CHARS = 512 * 1024
MAX_REASON_CHARS = 2000
SWEEP_EVERY_S = 60.0


@dataclass(frozen=True)
class DeadLetter:
    """A job that was given up on, with why."""

    entry_id: str
    payload: str
    reason: str
    original_id: str
    deliveries: int
    failed_at: float


class DeadLetters:
    """Add, list, take back and expire dead letters."""

    def __init__(
        self,
        redis: Any,
        keys: Keys,
        *,
        maxlen: int = 10_000,
        ttl_s: int = DEFAULT_TTL_S,
        max_payload_chars: int = MAX_PAYLOAD_CHARS,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.maxlen = maxlen
        self.ttl_s = ttl_s
        self.max_payload_chars = max_payload_chars
        self._swept_at = 0.0

    def add_to(self, pipe: Any, payload: str, *, reason: str, original_id: str, deliveries: int) -> None:
        """Queue the commands that add one dead letter on ``pipe`` (a transaction)."""
        now = time.time()
        pipe.xadd(
            self.keys.dead,
            {
                PAYLOAD: payload,
                "reason": redact(reason)[:MAX_REASON_CHARS],
                "original_id": original_id,
                "deliveries": deliveries,
                "failed_at": now,
            },
            # Nothing waits on this stream: dropping entries past the age limit is safe.
            minid=self._cutoff_id(now),
            approximate=False,
        )
        pipe.xtrim(self.keys.dead, maxlen=self.maxlen, approximate=True)
        pipe.expire(self.keys.dead, self.ttl_s)

    async def bounded_payload(self, payload: str) -> str:
        """The payload to keep: redacted, and at most ``max_payload_chars`` long."""
        try:
            job = await mask_job(Job.from_json(payload))
        except JobFormatError:
            # Not a job: only its redacted start is worth keeping for an operator to read.
            return redact_in_pieces(payload[: self.max_payload_chars])
        kept = job.to_json()
        if len(kept) <= self.max_payload_chars:
            return kept
        # Cut pasted logs to their start and end, each getting its share of the bound.
        inline = [r for r in job.logs if r.text]
        share = max(4096, (self.max_payload_chars - 8192) // max(1, len(inline)))
        logs = [
            replace(r, text=excerpt(r.text, share // 4, share - share // 4)) if r.text else r
            for r in job.logs
        ]
        meta = {**job.meta, "dead_letter": "pasted logs cut to their start and end"}
        kept = replace(job, logs=logs, meta=meta).to_json()
        return kept if len(kept) <= self.max_payload_chars else kept[: self.max_payload_chars]

    async def newest(self, count: int = 100) -> list[DeadLetter]:
        """The newest dead letters, newest first (expired ones trimmed first)."""
        await self.sweep()
        rows = await self.redis.xrevrange(self.keys.dead, count=count)
        return [parse(eid, fields) for eid, fields in rows]

    async def sweep(self) -> int:
        """Delete dead letters older than ``ttl_s``; returns how many went."""
        self._swept_at = time.time()
        trimmed: int = await self.redis.xtrim(self.keys.dead, minid=self._cutoff_id(self._swept_at))
        return trimmed

    async def sweep_now_and_then(self) -> None:
        """``sweep`` at most once every ``SWEEP_EVERY_S`` (called on every acknowledged job)."""
        if time.time() - self._swept_at >= SWEEP_EVERY_S:
            await self.sweep()

    def _cutoff_id(self, now: float) -> str:
        return f"{max(0, int((now - self.ttl_s) * 1000))}-0"


def parse(eid: str, fields: dict[str, str]) -> DeadLetter:
    """A dead letter from its stream entry."""
    return DeadLetter(
        entry_id=eid,
        payload=fields.get(PAYLOAD, ""),
        reason=fields.get("reason", ""),
        original_id=fields.get("original_id", ""),
        deliveries=int(fields.get("deliveries", 0)),
        failed_at=float(fields.get("failed_at", 0)),
    )
