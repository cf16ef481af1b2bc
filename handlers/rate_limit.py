"""The webhook's per-sender token bucket, kept in Redis so every web process shares it.

Refilling and taking a token is one Lua script (EVALSHA), so it is atomic: simultaneous requests
neither race nor retry, and a sender within its rate is never refused. The embedded mode's
fakeredis runs the same script (it needs ``lupa``: the ``fakeredis[lua]`` dependency).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

# KEYS[1]: the bucket. ARGV: rate (tokens per second), burst, now (Unix seconds), TTL (seconds).
# Returns 1 when a token was taken, else 0. The stamp only moves forward, so a web process whose
# clock is behind can neither refill from the past nor make another process refill twice.
TAKE_TOKEN_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local stamp = tonumber(state[2])
if tokens == nil or stamp == nil then
  tokens = burst
  stamp = now
end
if now > stamp then
  tokens = math.min(burst, tokens + (now - stamp) * rate)
  stamp = now
end
local taken = 0
if tokens >= 1 then
  tokens = tokens - 1
  taken = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(stamp))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return taken
"""


class LimiterUnavailable(Exception):
    """The bucket's Redis did not answer; the request is neither allowed nor refused (503)."""


class TokenBucket:
    """``rate`` tokens a second per sender, at most ``burst`` saved up."""

    def __init__(
        self,
        redis: Any,
        *,
        rate: float,
        burst: float,
        prefix: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.prefix = prefix
        self.clock = clock
        # After this long unused, a bucket is full again; the key can go.
        self.ttl_s = max(1, math.ceil(burst / rate) + 1)
        # Seconds until an empty bucket holds a token again (the 429's Retry-After).
        self.retry_after_s = max(1, math.ceil(1 / rate))
        self._take = redis.register_script(TAKE_TOKEN_LUA)  # EVALSHA, loading the script once

    async def allow(self, sender: str) -> bool:
        """Take one token for ``sender``; False when the bucket is empty.

        Raises ``LimiterUnavailable`` when Redis fails (refused, timed out, out of connections).
        """
        key = f"{self.prefix}:{hashlib.sha256(sender.encode()).hexdigest()[:32]}"
        args = [repr(float(self.rate)), repr(float(self.burst)), repr(self.clock()), self.ttl_s]
        try:
            taken = await self._take(keys=[key], args=args)
        except (RedisError, OSError) as exc:
            raise LimiterUnavailable(f"the rate limiter's Redis failed: {type(exc).__name__}") from exc
        return bool(taken)
