"""Earlier runs of a job and earlier bad-host failures: the facts behind the advice's history
rules (bot/kinds/advising.py), and the index from a scheduler's job id to its diagnosis.

Each index holds only diagnosis ids; what those runs ended with is read back from the stored
diagnoses, so nothing here outlives them (every key has the store's retention).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.jobs.store import WEEK_S, Store

MAX_LOOKBACK = 20  # earlier failures read per host: enough to count a week on a bad node


@dataclass(frozen=True)
class PastRun:
    """What one earlier run ended with, from its stored diagnosis."""

    diagnosis_id: str
    signature_id: str | None  # None: unrecognized or clean
    decision: str | None  # the advice it was given; None when it had none
    at: float


def job_key(meta: Mapping[str, str]) -> str | None:
    """'cluster/job_name' (or the name alone) from a job's meta; None without a job name."""
    name = meta.get("job_name")
    if not name:
        return None
    cluster = meta.get("cluster")
    return f"{cluster}/{name}" if cluster else name


class RunHistory:
    """Reads and records runs and bad hosts in the store's Redis, under the store's keys."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.redis: Any = store.redis
        self.keys = store.keys

    async def previous_run(self, key: str, *, excluding: str) -> PastRun | None:
        """The newest run of job ``key`` other than ``excluding`` (a retried job is never its own
        history), or None."""
        ids = await self.redis.zrevrange(self.keys.job_runs(key), 0, 2, withscores=True)
        for diagnosis_id, at in ids:
            if diagnosis_id != excluding:
                return await self._run(diagnosis_id, float(at))
        return None

    async def host_failures(
        self, host: str, *, excluding: str, window_s: int = WEEK_S, now: float | None = None
    ) -> list[PastRun]:
        """Earlier bad-host failures on ``host`` in the window, newest first."""
        now = time.time() if now is None else now
        found = await self.redis.zrevrangebyscore(
            self.keys.host_failures(host), "+inf", now - window_s, start=0, num=MAX_LOOKBACK, withscores=True
        )
        runs = [await self._run(i, float(at)) for i, at in found if i != excluding]
        return [r for r in runs if r is not None]

    async def record(
        self,
        diagnosis_id: str,
        *,
        meta: Mapping[str, str],
        bad_hosts: tuple[str, ...] = (),
        now: float | None = None,
    ) -> None:
        """Index a stored diagnosis by its job name, its scheduler job id and its bad hosts;
        safe to repeat for the same id (a retried job)."""
        now = time.time() if now is None else now
        ttl = self.store.retention_s
        async with self.redis.pipeline(transaction=True) as pipe:
            key = job_key(meta)
            if key:
                pipe.zadd(self.keys.job_runs(key), {diagnosis_id: now})
                pipe.zremrangebyscore(self.keys.job_runs(key), "-inf", now - ttl)
                pipe.expire(self.keys.job_runs(key), ttl)
            if meta.get("job_id"):
                pipe.set(self.keys.scheduler_job(meta["job_id"]), diagnosis_id, ex=ttl)
            for host in bad_hosts:
                pipe.zadd(self.keys.host_failures(host), {diagnosis_id: now})
                pipe.zremrangebyscore(self.keys.host_failures(host), "-inf", now - ttl)
                pipe.expire(self.keys.host_failures(host), ttl)
            await pipe.execute()

    async def diagnosis_for_job(self, job_id: str) -> str | None:
        """The diagnosis id of a scheduler's job id, or None (unknown, or past retention)."""
        found = await self.redis.get(self.keys.scheduler_job(job_id))
        return str(found) if found else None

    async def _run(self, diagnosis_id: str, at: float) -> PastRun | None:
        stored = await self.store.get(diagnosis_id)
        if stored is None:  # expired before its index entry
            return None
        advice = stored.diagnosis.get("advice")
        decision = advice.get("decision") if isinstance(advice, dict) else None
        return PastRun(diagnosis_id, stored.signature_id, decision, at)
