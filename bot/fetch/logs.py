"""A job's logs onto local disk: pasted text, Slack files and allow-listed URLs, within a budget.

Expected refusals (too big, no access, a login page instead of the file) raise ``JobFailed`` and
become the job's reply; an outage (429, 5xx) raises anything else, so the job is tried again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.jobs.worker import JobFailed
from handlers.jobs import LogRef
from signatures.errors import InputError

DOWNLOAD_CHUNK = 256 * 1024
HTML_START = re.compile(rb"^\s*(<!doctype html|<html)", re.IGNORECASE)


class LogFetcher:
    """Writes one log reference to a file and returns its size in bytes."""

    def __init__(self, slack_client: Any, *, max_log_bytes: int, url_fetcher: Any = None) -> None:
        self.slack_client = slack_client  # slack_sdk AsyncWebClient: files.info and the bot token
        self.max_log_bytes = max_log_bytes
        self.url_fetcher = url_fetcher  # bot.fetch.remote.RemoteLogFetcher: fetch(url, dest) -> int
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, ref: LogRef, dest: Path, budget: int) -> int:
        """Download ``ref`` to ``dest``; at most ``budget`` bytes (what the job has left)."""
        if ref.size is not None and ref.size > budget:
            raise JobFailed(too_big(ref.name, self.max_log_bytes))
        if ref.kind == "inline":
            data = (ref.text or "").encode("utf-8")
            if len(data) > budget:
                raise JobFailed(too_big(ref.name, self.max_log_bytes))
            dest.write_bytes(data)
            return len(data)
        if ref.kind == "slack_file":
            return await self._slack_file(ref, dest, budget)
        if ref.kind == "url":
            if self.url_fetcher is None or not ref.url:
                raise JobFailed("Fetching logs from a URL is not enabled on this Denpex.")
            try:
                size: int = await self.url_fetcher.fetch(ref.url, dest)
            except InputError as exc:
                raise JobFailed(str(exc)) from exc
            if size > budget:
                raise JobFailed(too_big(ref.name, self.max_log_bytes))
            return size
        raise JobFailed(f"Unknown log kind {ref.kind!r}.")

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _slack_file(self, ref: LogRef, dest: Path, budget: int) -> int:
        url = ref.url
        if not url:
            if not ref.file_id:
                raise JobFailed(f"{ref.name}: no Slack file id to download.")
            try:
                info = await self.slack_client.files_info(file=ref.file_id)
            except SlackApiError as exc:
                error = exc.response.get("error", "error") if exc.response else "error"
                if exc.response is not None and exc.response.status_code in (429, 500, 503):
                    raise
                raise JobFailed(f"Slack would not give me the file {ref.name} ({error}).") from exc
            file = info.get("file") or {}
            size = file.get("size")
            if isinstance(size, int) and size > budget:
                raise JobFailed(too_big(ref.name, self.max_log_bytes))
            url = file.get("url_private_download") or file.get("url_private")
            if not url:
                raise JobFailed(f"Slack gave no download link for {ref.name}.")
        headers = {"Authorization": f"Bearer {self.slack_client.token}"}
        async with self._http().get(url, headers=headers) as resp:
            if resp.status in (429, 500, 502, 503, 504):
                raise RuntimeError(f"download of {ref.name} answered HTTP {resp.status}")
            if resp.status != 200:
                raise JobFailed(f"Slack refused the download of {ref.name} (HTTP {resp.status}).")
            if resp.content_length is not None and resp.content_length > budget:
                raise JobFailed(too_big(ref.name, self.max_log_bytes))
            size = 0
            with dest.open("wb") as out:
                async for chunk in resp.content.iter_chunked(DOWNLOAD_CHUNK):
                    if size == 0 and resp.content_type == "text/html" and HTML_START.match(chunk):
                        raise JobFailed(
                            f"Slack sent a web page instead of {ref.name}: the bot token "
                            "probably lacks the files:read scope."
                        )
                    size += len(chunk)
                    if size > budget:
                        raise JobFailed(too_big(ref.name, self.max_log_bytes))
                    out.write(chunk)
        return size

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_read=60, sock_connect=10)
            )
        return self._session


def too_big(name: str, limit: int) -> str:
    """The reply for a log over the per-job download budget."""
    return f"{name} is larger than the {limit / 1024 / 1024:g} MB this Denpex reads per job."


def safe_file_name(name: str) -> str:
    """A local file name for ``name``: its extension kept (.gz, .zip matter), nothing that escapes."""
    base = os.path.basename(name.replace("\\", "/")) or "log"
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)[:120].lstrip(".") or "log"
