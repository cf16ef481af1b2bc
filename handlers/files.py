"""Log files dropped in a channel: one job per message, however Slack announces it.

One upload produces a ``message``/``file_share`` event and a ``file_shared`` event, and Slack
retries either when it does not hear back. Both paths resolve to the message that holds the files
(channel + ts) and enqueue under the same dedupe key, so the queue's SET NX keeps exactly one job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from handlers.jobs import Job, LogRef

log = logging.getLogger(__name__)

LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".zip")
WORKING_REACTION = "hourglass_flowing_sand"
# files.info may show no shares while Slack is still scanning the upload.
SHARE_POLLS = 3
SHARE_POLL_DELAY_S = 0.5

Enqueue = Callable[[Job], Awaitable[bool]]
ThreadCheck = Callable[[str, str], Awaitable[bool]]
Claim = Callable[[str], Awaitable[bool]]  # SET NX: True for the first caller of a key only
Release = Callable[[str], Awaitable[None]]


def is_log_file(f: Mapping[str, Any]) -> bool:
    """True for names Denpex reads: .log .txt .out .err .gz .zip, or text with no extension."""
    name = str(f.get("name") or f.get("title") or "").lower()
    if name.endswith(LOG_SUFFIXES) or f.get("mode") == "snippet":
        return True
    stem = name.rsplit("/", 1)[-1]
    if "." not in stem:
        mimetype = str(f.get("mimetype") or "")
        return not mimetype or mimetype.startswith("text/") or f.get("filetype") == "text"
    return False


def mb(size: int) -> str:
    """A byte count for people: '12.3 MB'."""
    return f"{size / (1024 * 1024):.1f} MB"


def make_job(**fields: Any) -> Job:
    """A job with the fields this module sets; the rest keep the queue's defaults."""
    fields.setdefault("meta", {})
    fields.setdefault("precomputed", None)
    fields.setdefault("text", None)
    fields.setdefault("response_url", None)
    fields.setdefault("header", None)
    fields.setdefault("user", None)
    return Job(**fields)


def log_ref(f: Mapping[str, Any]) -> LogRef:
    """A reference to a Slack file; the worker downloads it with the bot token."""
    return LogRef(
        kind="slack_file",
        name=str(f.get("name") or f.get("title") or f.get("id")),
        file_id=str(f["id"]),
        url=f.get("url_private_download") or f.get("url_private"),
        size=f.get("size"),
        text=None,
    )


@dataclass
class FileIntake:
    """Turns file events into jobs. ``allowed`` is the optional channel allow-list."""

    enqueue: Enqueue
    is_diagnosis_thread: ThreadCheck
    allowed: Callable[[str | None], bool]
    max_log_bytes: int
    claim: Claim
    release: Release

    async def from_message(self, event: Mapping[str, Any], client: AsyncWebClient) -> bool:
        """A ``message``/``file_share`` event; returns True when a job was enqueued."""
        channel = str(event.get("channel") or "")
        ts = str(event.get("ts") or "")
        if not channel or not ts or not self.allowed(channel):
            return False
        files = [await self._resolve(f, client) for f in event.get("files") or []]
        return await self._intake(client, channel, ts, event.get("thread_ts"), files, event)

    async def from_file_shared(self, event: Mapping[str, Any], client: AsyncWebClient) -> bool:
        """A ``file_shared`` event: find the message behind it through ``files.info``."""
        channel = str(event.get("channel_id") or "")
        file_id = str(event.get("file_id") or (event.get("file") or {}).get("id") or "")
        if not channel or not file_id or not self.allowed(channel):
            return False
        info: dict[str, Any] | None = None
        share: Mapping[str, Any] | None = None
        for attempt in range(SHARE_POLLS):
            info = await _files_info(client, file_id)
            if info is None:
                return False
            share = _share_in(info, channel)
            if share is not None:
                break
            if attempt + 1 < SHARE_POLLS:
                await asyncio.sleep(SHARE_POLL_DELAY_S)
        assert info is not None
        if share is None:
            # Never shared visibly: diagnose the one file under its own parent message.
            ts, thread_ts, files = f"file-{file_id}", None, [info]
            return await self._intake(client, channel, ts, thread_ts, files, event, parent=True)
        ts = str(share["ts"])
        thread_ts = share.get("thread_ts")
        files = await _message_files(client, channel, ts, thread_ts) or [info]
        files = [await self._resolve(f, client) for f in files]
        return await self._intake(client, channel, ts, thread_ts, files, event)

    async def _resolve(self, f: Mapping[str, Any], client: AsyncWebClient) -> dict[str, Any]:
        # Slack Connect files arrive as stubs with no name or URL.
        if f.get("file_access") == "check_file_info" or not f.get("name"):
            info = await _files_info(client, str(f.get("id")))
            if info is not None:
                return info
        return dict(f)

    async def _intake(
        self,
        client: AsyncWebClient,
        channel: str,
        ts: str,
        thread_ts: str | None,
        files: Sequence[Mapping[str, Any]],
        event: Mapping[str, Any],
        *,
        parent: bool = False,
    ) -> bool:
        logs = [f for f in files if is_log_file(f)]
        if not logs:
            return False
        user = event.get("user") or event.get("user_id")
        if thread_ts == ts:
            thread_ts = None
        in_diagnosis = bool(thread_ts) and await self.is_diagnosis_thread(channel, str(thread_ts))
        reply_ts = None if parent else str(thread_ts or ts)
        too_big = [f for f in logs if int(f.get("size") or 0) > self.max_log_bytes]
        logs = [f for f in logs if f not in too_big]
        key = f"msg:{channel}:{ts}"
        if too_big and reply_ts is not None:
            # A refusal is a reply too; dedupe it with the message so retries do not repeat it.
            names = ", ".join(f"{f.get('name')} ({mb(int(f.get('size') or 0))})" for f in too_big)
            await self.enqueue(
                make_job(
                    source="file",
                    kind="notice",
                    dedupe_key=f"{key}:too-big",
                    channel=channel,
                    thread_ts=reply_ts,
                    logs=[],
                    user=user,
                    text=(
                        f"{names} is over the {mb(self.max_log_bytes)} limit. Attach the part "
                        "around the failure (the last few thousand lines of each rank), or "
                        "compress it (.gz / .zip)."
                    ),
                )
            )
        if not logs:
            return False
        # Each file is diagnosed once, whichever event (or retry) brings it first.
        mine = [f for f in logs if await self.claim(f"file:{f.get('id')}")]
        if not mine:
            return False
        logs = mine
        job = make_job(
            source="thread" if in_diagnosis else "file",
            kind="rediagnose" if in_diagnosis else "diagnose",
            # The claims above are the real dedupe; this key makes a re-delivered job harmless.
            dedupe_key=f"{key}:" + "+".join(sorted(str(f.get("id")) for f in logs)),
            channel=channel,
            thread_ts=reply_ts,
            logs=[log_ref(f) for f in logs],
            user=user,
            header=f"Diagnosis of {logs[0].get('name')}" if parent else None,
            meta={"message_ts": ts, "reaction": WORKING_REACTION},
        )
        try:
            queued = await self.enqueue(job)
        except Exception:
            for f in logs:  # not queued: let Slack's retry claim them again
                await self.release(f"file:{f.get('id')}")
            raise
        if queued and not parent:
            await add_reaction(client, channel, ts, WORKING_REACTION)
        return queued


async def add_reaction(client: AsyncWebClient, channel: str, ts: str, name: str) -> None:
    """React to a message; a reaction is a courtesy, so failures are only logged."""
    try:
        await client.reactions_add(channel=channel, timestamp=ts, name=name)
    except SlackApiError as exc:
        log.info("reactions.add %s failed: %s", name, exc.response.get("error"))


async def _files_info(client: AsyncWebClient, file_id: str) -> dict[str, Any] | None:
    try:
        resp = await client.files_info(file=file_id)
    except SlackApiError as exc:
        log.info("files.info %s failed: %s", file_id, exc.response.get("error"))
        return None
    file = resp.get("file")
    return dict(file) if isinstance(file, dict) else None


def _share_in(info: Mapping[str, Any], channel: str) -> Mapping[str, Any] | None:
    shares = info.get("shares") or {}
    for kind in ("public", "private"):
        entries = (shares.get(kind) or {}).get(channel) or []
        if entries:
            first: Mapping[str, Any] = entries[0]
            return first
    return None


async def _message_files(
    client: AsyncWebClient, channel: str, ts: str, thread_ts: str | None
) -> list[dict[str, Any]]:
    """Every file of the message at ``ts`` (a message may carry several logs)."""
    try:
        if thread_ts and thread_ts != ts:
            resp = await client.conversations_replies(
                channel=channel, ts=str(thread_ts), latest=ts, oldest=ts, inclusive=True, limit=1
            )
        else:
            resp = await client.conversations_history(
                channel=channel, latest=ts, oldest=ts, inclusive=True, limit=1
            )
    except SlackApiError as exc:
        log.info("reading message %s failed: %s", ts, exc.response.get("error"))
        return []
    for message in resp.get("messages") or []:
        if message.get("ts") == ts and message.get("files"):
            return [dict(f) for f in message["files"]]
    return []
