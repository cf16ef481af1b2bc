"""``/denpex``: diagnose pasted text or the newest log in the channel, and library look-ups.

The command is acknowledged at once with an ephemeral line; everything slow is a job. Slack sends
slash commands from channels and DMs the bot may not be in, so every job carries the
``response_url`` the worker falls back to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from handlers.files import Enqueue, is_log_file, log_ref, make_job, mb
from handlers.jobs import LogRef
from handlers.messages import unescape
from signatures.redact import redact

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)

COMMAND = "/denpex"
HISTORY_SCAN = 100  # messages of channel history searched for the newest log file
DEFAULT_HISTORY = 10
MAX_HISTORY = 50

KIND_SIGNATURES = "signatures"
KIND_EXPLAIN = "explain"
KIND_HISTORY = "history"
KIND_STATS = "stats"

WORKING = "Working on it… the diagnosis will appear in a thread in this channel."
HELP = """*Denpex* tells you why a training run died.
• `/denpex diagnose <log text>`: diagnose pasted log text
• `/denpex diagnose`: diagnose the newest log file shared in this channel
• Drop a `.log`, `.txt`, `.out`, `.err`, `.gz` or `.zip` file in a channel I am in
• `/denpex signatures [query]`: list the failures I know
• `/denpex explain <signature-id>`: everything about one failure
• `/denpex history [N]`: the last N diagnoses in this channel
• `/denpex stats`: how often each diagnosis was confirmed or disputed
Ask follow-up questions in a diagnosis thread (mention me, or end with `?`)."""


def parse(text: str) -> tuple[str, str]:
    """Split the command text into (sub-command, the rest) at the first run of any whitespace.

    People paste a log on the line after ``/denpex diagnose``, so a newline or a tab separates
    as a space does.
    """
    words = text.strip().split(maxsplit=1)
    if not words:
        return "", ""
    return words[0].lower(), words[1].strip() if len(words) > 1 else ""


def register(app: AsyncApp, *, enqueue: Enqueue, max_log_bytes: int) -> None:
    """Listen for ``/denpex``."""

    @app.command(COMMAND)
    async def denpex(ack: Any, command: dict[str, Any], client: AsyncWebClient) -> None:
        sub, rest = parse(str(command.get("text") or ""))
        channel = command.get("channel_id")
        common: dict[str, Any] = {
            "channel": channel,
            "user": command.get("user_id"),
            "response_url": command.get("response_url"),
            "dedupe_key": f"slash:{command.get('trigger_id') or command.get('response_url')}",
            "source": "slash",
            "logs": [],
        }
        if sub == "diagnose":
            if len(rest.encode()) > max_log_bytes:
                await ack(f"That text is over the {mb(max_log_bytes)} limit.")
                return
            await ack(WORKING)
            await _diagnose(enqueue, client, command, rest, common)
        elif sub in ("signatures", "signature", "list"):
            if parse(rest)[0] == "stats":
                await ack("Counting feedback…")
                await enqueue(make_job(kind=KIND_STATS, **common))
                return
            await ack()
            await enqueue(make_job(kind=KIND_SIGNATURES, text=redact(rest), **common))
        elif sub == "explain":
            if not rest:
                await ack("Which one? `/denpex explain <signature-id>` (see `/denpex signatures`).")
                return
            await ack()
            await enqueue(make_job(kind=KIND_EXPLAIN, meta={"value": redact(rest.split()[0])}, **common))
        elif sub == "history":
            count = DEFAULT_HISTORY
            if rest:
                # str.isdigit() accepts '²', which int() refuses; a count has at most 2 digits.
                if (
                    not (len(rest) <= 2 and rest.isascii() and rest.isdigit())
                    or not 0 < int(rest) <= MAX_HISTORY
                ):
                    await ack(f"`/denpex history [N]` takes a number from 1 to {MAX_HISTORY}.")
                    return
                count = int(rest)
            await ack()
            await enqueue(make_job(kind=KIND_HISTORY, text=str(count), **common))
        elif sub == "stats":
            await ack("Counting feedback…")
            await enqueue(make_job(kind=KIND_STATS, **common))
        else:
            await ack(HELP)


async def _diagnose(
    enqueue: Enqueue,
    client: AsyncWebClient,
    command: Mapping[str, Any],
    text: str,
    common: dict[str, Any],
) -> None:
    user = command.get("user_id")
    if text:
        # Slack sends &, < and > as HTML entities; the engine needs the log as printed. The queue
        # (Redis) gets it redacted.
        ref = make_inline("pasted.log", redact(unescape(text)))
        header = f"Diagnosis of a log pasted by <@{user}>" if user else "Diagnosis of a pasted log"
        await enqueue(make_job(kind="diagnose", logs=[ref], header=header, **_without(common)))
        return
    found = await newest_log_file(client, str(command.get("channel_id") or ""))
    if isinstance(found, str):
        # Nothing to diagnose: say why in the ephemeral reply, through a job so it is deduped.
        await enqueue(make_job(kind="notice", text=found, **_without(common)))
        return
    header = f"Diagnosis of {found.get('name')} (requested by <@{user}>)"
    await enqueue(make_job(kind="diagnose", logs=[log_ref(found)], header=header, **_without(common)))


def _without(common: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in common.items() if k != "logs"}


def make_inline(name: str, text: str) -> LogRef:
    """An inline log reference carrying pasted text."""

    return LogRef(kind="inline", name=name, size=len(text.encode("utf-8", "surrogatepass")), text=text)


async def newest_log_file(client: AsyncWebClient, channel: str) -> dict[str, Any] | str:
    """The newest log file shared in ``channel``, or a sentence saying why there is none."""
    try:
        resp = await client.conversations_history(channel=channel, limit=HISTORY_SCAN)
    except SlackApiError as exc:
        error = exc.response.get("error")
        log.info("conversations.history %s: %s", channel, error)
        if error in ("not_in_channel", "channel_not_found"):
            return (
                "I can't read this conversation. Invite me (`/invite @denpex`) or paste the log: "
                "`/denpex diagnose <log text>`."
            )
        return f"I couldn't read this channel's history ({error}). Paste the log text instead."
    for message in resp.get("messages") or []:  # newest first
        for f in message.get("files") or []:
            if is_log_file(f):
                return dict(f)
    return (
        f"I found no log file in the last {HISTORY_SCAN} messages here. Drop one in the channel, "
        "or paste the text: `/denpex diagnose <log text>`."
    )
