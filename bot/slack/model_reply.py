"""A model's answer in the thread: marked as the model's, with what was shared to get it."""

from __future__ import annotations

from bot.slack import blocks as bk
from bot.slack.blocks import MAX_BLOCKS, MAX_FALLBACK, MAX_SECTION, RenderedMessage, clip, escape


def render_model_answer(answer: str, model: str, shared: str, *, known: str = "") -> RenderedMessage:
    """A model's answer, marked as such, with what was shared; ``known`` (escaped mrkdwn) is
    Denpex's own answer, shown first."""
    body = f"{known}\n\n" if known else ""
    body += escape(answer)
    chunks = [body[i : i + MAX_SECTION] for i in range(0, len(body), MAX_SECTION)][: MAX_BLOCKS - 2]
    note = (
        f":robot_face: Answered by `{escape(model)}`, the model your team configured, from the "
        f"redacted evidence only. {escape(shared)}"
    )
    blocks = [bk.section(c) for c in chunks] + [bk.context(note)]
    return RenderedMessage(text=clip(f"{body}\n\n({model})", MAX_FALLBACK), blocks=blocks)
