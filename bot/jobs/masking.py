"""Masking at ingress: text from outside is redacted before Denpex queues, stores or posts it.

A job carries references (Slack file ids, URLs) and text: pasted logs, a header, metadata, a
question, a diagnosis computed elsewhere. ``mask_job`` runs every piece of text through
``signatures.redact`` before the job is queued, so the stream entry, the append-only file, job
progress, stored metadata and dead letters only ever hold redacted text. Logs behind references
are read by the engine, which redacts what it outputs.

A log URL is left as given: a presigned URL must stay valid to be fetched, and URLs carrying
credentials (``user:password@``) are refused before they are queued (``bot.fetch.remote``).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import replace
from typing import Any

from handlers.jobs import Job, LogRef
from signatures.redact import redact

# Redaction is regex work at about a megabyte a second: large texts go to a thread, in
# line-aligned pieces, so the event loop (which serves webhooks) gets the GIL between pieces.
IN_THREAD_ABOVE = 64 * 1024
PIECE_CHARS = 256 * 1024


async def redact_text(text: str) -> str:
    """``redact(text)``, off the event loop when ``text`` is large."""
    if len(text) <= IN_THREAD_ABOVE:
        return redact(text)
    return await asyncio.to_thread(redact_in_pieces, text)


def redact_in_pieces(text: str, piece_chars: int = PIECE_CHARS) -> str:
    """``redact`` applied to line-aligned pieces of ``text`` (the rules match within a line)."""
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + piece_chars)
        if end < len(text):
            newline = text.rfind("\n", start, end)
            if newline > start:
                end = newline + 1
        out.append(redact(text[start:end]))
        start = end
    return "".join(out)


def redact_value(value: Any) -> Any:
    """Every string in a JSON-like value, redacted (keys too: they can be user text)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {redact(str(k)): redact_value(v) for k, v in value.items()}
    return value


def masked_key(key: str) -> str:
    """``key`` when it holds nothing secret-looking, else a digest of it (keys must stay unique)."""
    if redact(key) == key:
        return key
    return "h:" + hashlib.sha256(key.encode()).hexdigest()


async def mask_ref(ref: LogRef) -> LogRef:
    """A log reference with its name and pasted text redacted."""
    text = await redact_text(ref.text) if ref.text else ref.text
    return replace(ref, name=redact(ref.name), text=text)


async def mask_job(job: Job) -> Job:
    """``job`` with every piece of text from outside redacted; ids and references unchanged."""
    return replace(
        job,
        dedupe_key=masked_key(job.dedupe_key),
        logs=[await mask_ref(ref) for ref in job.logs],
        header=redact(job.header) if job.header else job.header,
        meta={redact(k): redact(v) for k, v in job.meta.items()},
        text=redact(job.text) if job.text else job.text,
        precomputed=redact_value(job.precomputed) if job.precomputed is not None else None,
    )


def excerpt(text: str, head: int, tail: int) -> str:
    """At most about ``head + tail`` characters of a log, cut at line ends: its start and its end,
    where failures and their cascades are, with a line saying how much was left out."""
    if len(text) <= head + tail:
        return text
    first = text[:head].rsplit("\n", 1)[0]
    last = text[-tail:].split("\n", 1)[-1]
    skipped = len(text) - len(first) - len(last)
    return f"{first}\n[... {skipped} characters of this log were not kept ...]\n{last}"
