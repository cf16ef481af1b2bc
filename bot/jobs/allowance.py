"""Daily allowances: how many new diagnoses one Slack user, one channel or one webhook key may
ask for per UTC day, so no single sender can fill the queue.

Only new diagnoses count (jobs of kind ``diagnose``): questions, buttons and more evidence in a
diagnosis thread do not. Counters live in Redis, one per scope and day
(``<prefix>:allowance:<YYYYMMDD>:<scope>:<id>``), and expire an hour after their day ends. A
job takes one from each of its scopes in one transaction (INCR + EXPIRE); if any scope is past
its allowance, every counter it took is given back and ``AllowanceExceeded`` names that scope.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.jobs.keys import Keys
from handlers.jobs import KIND_DIAGNOSE, Job

COUNTED_KINDS = frozenset({KIND_DIAGNOSE})
DAY_S = 24 * 3600
KEEP_AFTER_DAY_S = 3600  # a counter outlives its day a little: clocks of web processes differ

USER, CHANNEL, WEBHOOK_KEY = "user", "channel", "webhook_key"
_WHO = {
    USER: "You have used your {limit} Denpex diagnoses for today",
    CHANNEL: "This channel has used its {limit} Denpex diagnoses for today",
    WEBHOOK_KEY: "This webhook key has used its {limit} Denpex diagnoses for today",
}


@dataclass(frozen=True)
class Allowances:
    """New diagnoses per UTC day in each scope; 0: unlimited."""

    user: int = 200
    channel: int = 500
    webhook_key: int = 2000


class AllowanceExceeded(Exception):
    """A scope has used its allowance for the day; the message is meant for the person asking."""

    def __init__(self, scope: str, limit: int, retry_after_s: int) -> None:
        super().__init__(_WHO[scope].format(limit=limit) + "; the allowance resets at 00:00 UTC.")
        self.scope = scope
        self.limit = limit
        self.retry_after_s = retry_after_s  # until the next midnight UTC


@dataclass(frozen=True)
class Taken:
    """The counters one job took (given back if it is not queued after all)."""

    keys: tuple[str, ...] = ()


class AllowanceCounter:
    """Counts new diagnoses per scope and day in Redis."""

    def __init__(
        self,
        redis: Any,
        allowances: Allowances,
        *,
        keys: Keys | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.allowances = allowances
        self.keys = keys or Keys()
        self.clock = clock

    def scopes(self, job: Job, webhook_key: str | None) -> list[tuple[str, str, int]]:
        """(scope, id, allowance) for each limited scope the job falls in."""
        if job.kind not in COUNTED_KINDS:
            return []
        found = [
            (USER, job.user, self.allowances.user),
            (CHANNEL, job.channel, self.allowances.channel),
            (WEBHOOK_KEY, webhook_key if job.source == "webhook" else None, self.allowances.webhook_key),
        ]
        return [(scope, ident, limit) for scope, ident, limit in found if ident and limit > 0]

    async def take(self, job: Job, *, webhook_key: str | None = None) -> Taken:
        """Count the job in each of its scopes; raise ``AllowanceExceeded`` (counting nothing)
        when one of them has used its allowance for the day."""
        scopes = self.scopes(job, webhook_key)
        if not scopes:
            return Taken()
        now = self.clock()
        day = time.strftime("%Y%m%d", time.gmtime(now))
        midnight = (math.floor(now / DAY_S) + 1) * DAY_S
        keys = tuple(self.keys.allowance(day, scope, ident) for scope, ident, _ in scopes)
        async with self.redis.pipeline(transaction=True) as pipe:
            for key in keys:
                pipe.incr(key)
                # Relative to this process's clock, which decided the day (Redis's may differ).
                pipe.expire(key, math.ceil(midnight - now) + KEEP_AFTER_DAY_S)
            counts = (await pipe.execute())[::2]
        for (scope, _ident, limit), count in zip(scopes, counts, strict=True):
            if int(count) > limit:
                await self.refund(Taken(keys))
                raise AllowanceExceeded(scope, limit, max(1, math.ceil(midnight - now)))
        return Taken(keys)

    async def refund(self, taken: Taken) -> None:
        """Give back what ``take`` counted (the job was a duplicate, or was not queued)."""
        if not taken.keys:
            return
        async with self.redis.pipeline(transaction=True) as pipe:
            for key in taken.keys:
                pipe.decr(key)
            await pipe.execute()

    async def used(self, scope: str, ident: str) -> int:
        """How many diagnoses ``scope`` ``ident`` has used today."""
        day = time.strftime("%Y%m%d", time.gmtime(self.clock()))
        return int(await self.redis.get(self.keys.allowance(day, scope, ident)) or 0)
