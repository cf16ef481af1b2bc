"""How one attempt at a job ends: a reply posted somewhere, an expected failure, or no way to post.

The worker loop and the Slack side share these; they live here so the loop needs no Slack code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from handlers.jobs import Job
from signatures.diagnosis import Diagnosis

# What a job's post is to it (carried in the post's Slack metadata, see bot/slack/once.py): the
# message its thread hangs from, its answer, or the note that it was given up on (not an answer:
# a dead letter retried later must still post its real answer).
ROLE_PARENT = "parent"
ROLE_REPLY = "reply"
ROLE_GAVE_UP = "gave_up"


class JobFailed(Exception):
    """An expected failure; its message is posted in the job's thread as is."""


class ReplyFailed(Exception):
    """The answer cannot be posted anywhere (no channel access and no response_url)."""


@dataclass(frozen=True)
class PostedReply:
    """Where a reply landed; ``ts`` is None for response_url replies (Slack returns none)."""

    channel: str | None
    ts: str | None
    thread_ts: str | None
    found: bool = False  # an earlier attempt's post, found again instead of posting


class Replier(Protocol):
    """What the worker loop needs of the Slack side (``bot.slack.reply.SlackReplier``)."""

    async def deliver(
        self,
        job: Job,
        diagnosis: Diagnosis | None,
        error: str | None,
        *,
        job_meta: dict[str, str] | None = None,
        retrying: bool = False,
        role: str = ROLE_REPLY,
    ) -> PostedReply: ...

    async def post_parent(
        self, job: Job, *, retrying: bool = False, since: float | None = None
    ) -> PostedReply: ...

    async def find_parent(self, job: Job, channel: str, since: float | None) -> str | None: ...

    async def find_reply(self, job: Job, channel: str, thread_ts: str) -> str | None: ...
