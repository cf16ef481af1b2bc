"""Planted secrets, and a search for them everywhere Denpex writes: Redis, its AOF, Slack, logs.

The secrets are made fresh for each test (random, in the shapes the redactor knows), so a hit
can only come from the test's own input.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tests.slack_standin import SlackStandin

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits


def _pick(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Planted:
    """One secret of each kind: a Hugging Face token, an AWS key id, a Slack bot token."""

    hf: str
    aws: str
    slack: str

    @classmethod
    def fresh(cls) -> Planted:
        return cls(
            hf="hf_" + _pick(ALNUM, 34),
            aws="AKIA" + _pick(UPPER, 16),
            slack=f"xoxb-{_pick(string.digits, 12)}-{_pick(string.digits, 13)}-{_pick(ALNUM, 24)}",
        )

    @property
    def all(self) -> tuple[str, ...]:
        return (self.hf, self.aws, self.slack)

    def log(self, failure: str = "torch.OutOfMemoryError: CUDA out of memory.") -> str:
        """A training log that leaks all three, around a real failure."""
        return (
            f"[rank0]: loading model with token {self.hf}\n"
            f"[rank0]: export HF_TOKEN={self.hf}\n"
            f"[rank0]: boto3: InvalidAccessKeyId: The AWS Access Key Id {self.aws} does not exist\n"
            f"[rank0]: posting progress to slack with {self.slack}\n"
            "[rank0]: step 120 loss=2.31\n"
            f"[rank0]: {failure}\n"
            f"[rank0]: retrying upload with {self.aws} and {self.hf}\n"
        )

    def found_in(self, where: str, data: str | bytes) -> list[str]:
        """``"<where>: <secret kind>"`` for each planted secret in ``data``."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        kinds = {"hf": self.hf, "aws": self.aws, "slack": self.slack}
        return [f"{where}: {kind}" for kind, secret in kinds.items() if secret in text]


async def redis_everything(redis: Any) -> list[tuple[str, str]]:
    """(key, its value as text) for every key of every type in the database."""
    out: list[tuple[str, str]] = []
    async for raw_key in redis.scan_iter(count=1000):
        key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
        kind = await redis.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        value: Any
        if kind == "string":
            value = await redis.get(key)
        elif kind == "hash":
            value = await redis.hgetall(key)
        elif kind == "list":
            value = await redis.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(await redis.smembers(key))
        elif kind == "zset":
            value = await redis.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            value = await redis.xrange(key)
        else:
            value = f"<{kind}>"
        out.append((key, json.dumps(value, default=str)))
    return out


def slack_everything(slack: SlackStandin) -> Iterable[tuple[str, str]]:
    """Every call the Slack stand-in received (arguments and headers), as text."""
    for i, call in enumerate(slack.calls):
        yield f"slack call {i} {call.method}", json.dumps([call.args, call.headers], default=str)


async def leaks(
    planted: Planted,
    *,
    redis: Any = None,
    aof: bytes | None = None,
    slack: SlackStandin | None = None,
    logs: str | None = None,
) -> list[str]:
    """Every place a planted secret was found (empty: none)."""
    found: list[str] = []
    if redis is not None:
        for key, value in await redis_everything(redis):
            found += planted.found_in(f"redis key {key}", key)
            found += planted.found_in(f"redis value of {key}", value)
    if aof is not None:
        found += planted.found_in("AOF", aof)
    if slack is not None:
        for where, text in slack_everything(slack):
            found += planted.found_in(where, text)
    if logs is not None:
        found += planted.found_in("logs", logs)
    return found
