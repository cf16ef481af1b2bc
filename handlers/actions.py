"""Buttons under a diagnosis: Show evidence, Correct, Wrong diagnosis, Explain, and question picks.

Each click is acknowledged at once and becomes a job; the worker answers in the thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from handlers.files import Enqueue, make_job

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

ACTION_EVIDENCE = "denpex_show_evidence"
ACTION_CORRECT = "denpex_feedback_correct"
ACTION_WRONG = "denpex_feedback_wrong"
ACTION_EXPLAIN = "denpex_explain"
ACTION_ASK = "denpex_ask"  # followed by _<n>: action ids must be unique within a block

KIND_EVIDENCE = "evidence"
KIND_EXPLAIN = "explain"
KIND_FEEDBACK = "feedback"
KIND_FOLLOWUP = "followup"


def where_clicked(body: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(channel, thread_ts, message_ts) of the message whose button was clicked."""
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    message = body.get("message") or {}
    container = body.get("container") or {}
    message_ts = message.get("ts") or container.get("message_ts")
    thread_ts = message.get("thread_ts") or container.get("thread_ts") or message_ts
    return channel, thread_ts, message_ts


def register(app: AsyncApp, *, enqueue: Enqueue) -> None:
    """Listen for every button Denpex renders."""

    async def click(body: dict[str, Any], kind: str, text: str | None) -> None:
        channel, thread_ts, message_ts = where_clicked(body)
        action = (body.get("actions") or [{}])[0]
        user = (body.get("user") or {}).get("id")
        if not channel or not thread_ts:
            return
        # One job per click; a double click within Slack's retry window is one click.
        stamp = action.get("action_ts") or body.get("trigger_id") or message_ts
        await enqueue(
            make_job(
                source="thread",
                kind=kind,
                dedupe_key=f"action:{channel}:{message_ts}:{user}:{action.get('action_id')}:{stamp}",
                channel=channel,
                thread_ts=thread_ts,
                logs=[],
                user=user,
                response_url=body.get("response_url"),
                text=text,
                meta={"value": str(action.get("value") or ""), "message_ts": str(message_ts)},
            )
        )

    @app.action(ACTION_EVIDENCE)
    async def show_evidence(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await click(body, KIND_EVIDENCE, None)

    @app.action(ACTION_EXPLAIN)
    async def explain(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await click(body, KIND_EXPLAIN, None)

    @app.action(ACTION_CORRECT)
    async def correct(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await click(body, KIND_FEEDBACK, "correct")

    @app.action(ACTION_WRONG)
    async def wrong(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await click(body, KIND_FEEDBACK, "wrong")

    @app.action(re.compile(f"^{ACTION_ASK}(_\\d+)?$"))
    async def ask(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        value = str(((body.get("actions") or [{}])[0]).get("value") or "")
        await click(body, KIND_FOLLOWUP, f"intent:{value}")
