"""A daily allowance of model answers per channel, counted in Redis (or the embedded fakeredis)."""

from __future__ import annotations

import time
from typing import Any

SECONDS_PER_DAY = 86_400


class ModelAllowance:
    """At most ``per_day`` model answers per channel per UTC day; 0 means no limit."""

    def __init__(self, redis: Any, prefix: str, per_day: int) -> None:
        self.redis = redis
        self.prefix = prefix
        self.per_day = per_day

    async def take(self, channel: str) -> bool:
        """Count one answer for ``channel``; False when today's allowance is used up."""
        if self.per_day <= 0:
            return True
        now = time.time()
        day = int(now // SECONDS_PER_DAY)
        key = f"{self.prefix}:llm:allowance:{channel}:{day}"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, SECONDS_PER_DAY + 3600)
            used, _ = await pipe.execute()
        return int(used) <= self.per_day
