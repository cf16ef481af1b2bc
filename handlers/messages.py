"""Messages and mentions: dropped files, and questions or evidence in a diagnosis thread.

Every ``message`` subtype and every ``app_mention`` is acknowledged (Bolt answers 200 for handled
events), so Slack never retries one we chose to ignore. A message that mentions the bot arrives
twice (``message`` and ``app_mention``); both enqueue under ``q:{channel}:{ts}`` so it is answered
once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from handlers.files import Enqueue, FileIntake, ThreadCheck, make_job
from handlers.jobs import Job, LogRef
from signatures.redact import redact

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)

# The question words of the brief, plus a few close cousins people type in threads.
QUESTION_WORDS = frozenset(
    {
        *("how", "why", "what", "which", "is", "can", "should", "does", "will", "where", "when"),
        *("are", "could", "would", "do", "did", "was", "who", "whats", "what's"),
    }
)
MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
# Pasted evidence: a code block, or several lines that look like log output.
LOG_HINT = re.compile(
    r"(error|exception|traceback|nccl|cuda|rank\s*\d|\[\d{4}-\d\d-\d\d|^\s*\w+\.py:\d+|"
    r"nvidia-smi|driver version|pytorch version|dmesg|xid|killed process|segfault)",
    re.IGNORECASE | re.MULTILINE,
)

HELP_IN_CHANNEL = (
    "Drop a training log in this channel (or run `/denpex diagnose` with the log text) and I will "
    "say why the run died, in a thread. Ask me questions in that thread."
)


def strip_mentions(text: str) -> str:
    """The message text without ``<@U…>`` mentions."""
    return MENTION.sub(" ", text).strip()


def is_question(text: str) -> bool:
    """True when ``text`` ends in '?' or starts with a question word (how, why, what, ...)."""
    plain = strip_mentions(text).strip()
    if not plain:
        return False
    if plain.rstrip(" .!`*_").endswith("?"):
        return True
    first = re.split(r"[\s,]+", plain.lower(), maxsplit=1)[0].strip("*_`'\"")
    return first in QUESTION_WORDS


def looks_like_log(text: str) -> bool:
    """True for pasted log output (code blocks or several log-looking lines), not chatter."""
    lines = [line for line in text.splitlines() if line.strip()]
    if "```" in text and len(lines) >= 2:
        return True
    return len(lines) >= 4 and len(LOG_HINT.findall(text)) >= 2


def mentions(text: str, user_id: str | None) -> bool:
    """True when ``text`` mentions ``user_id``."""
    return bool(user_id) and f"<@{user_id}" in text


def unescape(text: str) -> str:
    """Slack escapes &, < and > in message text; logs need the real characters."""
    text = re.sub(r"```", "", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def register(
    app: AsyncApp,
    *,
    enqueue: Enqueue,
    is_diagnosis_thread: ThreadCheck,
    intake: FileIntake,
) -> None:
    """Listen for ``message`` (every subtype), ``app_mention`` and ``file_shared``."""

    async def thread_message(event: Mapping[str, Any], bot_user_id: str | None) -> None:
        channel = str(event.get("channel") or "")
        ts = str(event.get("ts") or "")
        thread_ts = event.get("thread_ts")
        if not channel or not thread_ts or thread_ts == ts:
            return
        if not await is_diagnosis_thread(channel, str(thread_ts)):
            return
        text = str(event.get("text") or "")
        user = event.get("user")
        if looks_like_log(text) and not (is_question(text) and len(text) < 200):
            pasted = redact(unescape(text))  # the queue (Redis) holds no secret
            ref = LogRef(
                kind="inline",
                name=f"pasted-{ts}.txt",
                file_id=None,
                url=None,
                size=len(pasted.encode("utf-8", "surrogatepass")),
                text=pasted,
            )
            await enqueue(
                make_job(
                    source="thread",
                    kind="rediagnose",
                    dedupe_key=f"msg:{channel}:{ts}",
                    channel=channel,
                    thread_ts=str(thread_ts),
                    logs=[ref],
                    user=user,
                    meta={"message_ts": ts},
                )
            )
            return
        if mentions(text, bot_user_id) or is_question(text):
            await enqueue(question_job(channel, str(thread_ts), ts, user, text))

    @app.event("message")
    async def on_message(event: dict[str, Any], client: AsyncWebClient, context: Any) -> None:
        subtype = event.get("subtype")
        if subtype == "file_share":
            if not event.get("bot_id"):
                await intake.from_message(event, client)
            return
        # Edits, deletions, joins and other bots: acknowledged and ignored (see module doc).
        if subtype not in (None, "thread_broadcast") or event.get("bot_id"):
            return
        await thread_message(event, context.get("bot_user_id"))

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], client: AsyncWebClient, context: Any) -> None:
        channel = str(event.get("channel") or "")
        ts = str(event.get("ts") or "")
        thread_ts = event.get("thread_ts")
        if event.get("bot_id") or not channel:
            return
        if thread_ts and thread_ts != ts and await is_diagnosis_thread(channel, str(thread_ts)):
            text = str(event.get("text") or "")
            await enqueue(question_job(channel, str(thread_ts), ts, event.get("user"), text))
            return
        if event.get("files"):
            return  # the file_share message carries the files
        # Deduped like a question so a retried mention gets one answer.
        queued = await enqueue(
            make_job(
                source="thread",
                kind="notice",
                dedupe_key=f"q:{channel}:{ts}",
                channel=channel,
                thread_ts=str(thread_ts or ts),
                logs=[],
                user=event.get("user"),
                text=HELP_IN_CHANNEL,
            )
        )
        if not queued:
            log.debug("mention %s already answered", ts)

    @app.event("file_shared")
    async def on_file_shared(event: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            await intake.from_file_shared(event, client)
        except SlackApiError as exc:
            log.warning("file_shared %s: %s", event.get("file_id"), exc.response.get("error"))


def question_job(channel: str, thread_ts: str, ts: str, user: Any, text: str) -> Job:
    """A follow-up question job, deduped on the message (``message`` and ``app_mention``)."""
    return make_job(
        source="thread",
        kind="followup",
        dedupe_key=f"q:{channel}:{ts}",
        channel=channel,
        thread_ts=thread_ts,
        logs=[],
        user=user,
        text=redact(strip_mentions(text)),
        meta={"message_ts": ts},
    )
