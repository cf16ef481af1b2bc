"""Block Kit building blocks within Slack's limits: sections, code, headers, buttons, budgets.

Slack rejects a message past 50 blocks, 3,000 characters per section or 150 per header; every
helper here clips to those limits so callers cannot build a message Slack would refuse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_BUTTON_TEXT = 75
MAX_FALLBACK = 3000
# Slack answers msg_blocks_too_long well below the documented limits; stay far under it.
MAX_TOTAL = 11000

TRUNCATED = "… (truncated)"


@dataclass(frozen=True)
class RenderedMessage:
    """A Slack message: fallback text plus Block Kit blocks, and an optional long attachment."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    file_text: str | None = None  # long evidence, for files_upload_v2 in the thread


def escape(text: str) -> str:
    """Escape Slack's control characters so log text cannot ping or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")


def escape_keeping_mention(text: str, user: str | None) -> str:
    """Escape ``text`` but keep ``<@user>``: Denpex's own mention of the person who asked.

    Only that user's mention survives; every other ``<...>`` in the text (a file name, a job
    name from a webhook) stays inert.
    """
    escaped = escape(text)
    if user and USER_ID.fullmatch(user):
        escaped = escaped.replace(f"&lt;@{user}&gt;", f"<@{user}>")
    return escaped


def clip(text: str, limit: int, note: str = TRUNCATED) -> str:
    """Cut ``text`` to ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(note))] + note


def code(lines: Iterable[str]) -> str:
    """A code block of log lines, escaped."""
    # A ``` inside a log line would close the code block early.
    body = "\n".join(escape(line).replace("```", "`\u200b``") for line in lines)
    return f"```{body}```"


def section(text: str, *, block_id: str | None = None) -> dict[str, Any]:
    """A mrkdwn section, clipped."""
    block: dict[str, Any] = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": clip(text, MAX_SECTION)},
    }
    if block_id:
        block["block_id"] = block_id
    return block


def code_section(title: str, lines: Sequence[str]) -> dict[str, Any]:
    """A section with a title and a code block, cut from the top so the last lines survive."""
    room = MAX_SECTION - len(title) - 20
    kept = list(lines)
    while kept and len(code(kept)) > room:
        if len(kept) == 1:
            kept = [clip(kept[0], max(10, room - 10))]
            break
        kept.pop(0)
    return section(f"{title}\n{code(kept)}")


def header(text: str) -> dict[str, Any]:
    """A header block, clipped."""
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, MAX_HEADER, "…")}}


def context(text: str) -> dict[str, Any]:
    """A context block (small grey text), clipped."""
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, MAX_SECTION)}]}


def button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    """A Block Kit button within Slack's limits."""
    b: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(text, MAX_BUTTON_TEXT, "…")},
        "action_id": action_id[:255],
        "value": value[:2000],
    }
    if style:
        b["style"] = style
    return b


def size(blocks: Sequence[Mapping[str, Any]]) -> int:
    """Characters of text in ``blocks``, as Slack counts them against its message budget."""
    total = 0
    for b in blocks:
        text = b.get("text")
        if isinstance(text, dict):
            total += len(text.get("text", ""))
        for el in b.get("elements", []):
            if isinstance(el.get("text"), str):
                total += len(el["text"])
    return total


def fit(
    blocks: list[dict[str, Any]], optional: list[dict[str, Any]], actions: dict[str, Any]
) -> list[dict[str, Any]]:
    """Keep required blocks, then optional ones while the message stays under the budget."""
    out = list(blocks)[: MAX_BLOCKS - 1]
    for block in optional:
        if len(out) + 1 >= MAX_BLOCKS or size([*out, block]) > MAX_TOTAL:
            continue
        out.append(block)
    while size(out) > MAX_TOTAL and len(out) > 2:
        out.pop()
    out.append(actions)
    return out
