"""The diagnosis thread through signed HTTP: questions, more evidence, buttons, history, feedback."""

from __future__ import annotations

import json
from typing import Any

from tests.slack_requests import (
    Denpex,
    block_action,
    denpex,
    event,
    file_share_message,
    redis_for_app,
    slash_command,
    thread_message,
)
from tests.slack_standin import BOT_USER_ID

__all__ = ["denpex", "redis_for_app"]  # fixtures

CHANNEL = "CTRAINING"
MSG_TS = "1700000500.000100"

# Rank 0 only shows the NCCL watchdog; rank 12's log shows the OOM that came first.
RANK0 = b"""[2024-05-01 10:20:00,000] [INFO] [rank0] step 100 loss 2.1034
[2024-05-01 10:20:05,000] [INFO] [rank0] step 101 loss 2.0981
[rank0]:[E501 10:30:45.123456 1234 ProcessGroupNCCL.cpp:1025] [Rank 0] Watchdog caught \
collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, \
Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
"""
RANK12 = b"""[2024-05-01 10:20:06,000] [INFO] [rank12] step 101 loss 2.0990
[rank12]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 4 has a \
total capacity of 79.15 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this \
process has 77.90 GiB memory in use.
"""


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


def asked(message: Any) -> set[str]:
    """The missing facts a diagnosis message asks for."""
    for block in message.blocks:
        text = block.get("text", {}).get("text", "") if block["type"] == "section" else ""
        if text.startswith(":question:"):
            return {line for line in text.splitlines()[1:] if line.startswith("•")}
    return set()


async def diagnosed_thread(app: Denpex) -> Any:
    """Drop rank 0's log and return the diagnosis reply."""
    f = app.standin.add_file("rank0.log", RANK0, channel=CHANNEL, ts=MSG_TS)
    await app.send(event(file_share_message(CHANNEL, MSG_TS, [f])))
    await app.drain()
    (reply,) = app.standin.thread(CHANNEL, MSG_TS)
    return reply


async def ask(app: Denpex, ts: str, text: str, **extra: Any) -> list[Any]:
    """Post a thread message, drain, and return the replies posted after it."""
    before = len(app.standin.thread(CHANNEL, MSG_TS))
    status, _ = await app.send(event(thread_message(CHANNEL, ts, MSG_TS, text, **extra)))
    assert status == 200
    await app.drain()
    return app.standin.thread(CHANNEL, MSG_TS)[before:]


async def test_questions_are_answered_from_the_stored_diagnosis(denpex: Denpex) -> None:
    reply = await diagnosed_thread(denpex)
    assert "Watchdog" in text_of(reply)
    (answer,) = await ask(denpex, "1700000600.000001", "which rank failed first?")
    assert "Rank 0" in answer.text
    (answer,) = await ask(denpex, "1700000600.000002", "How do we prevent this")
    assert "Prevention" in answer.text
    (answer,) = await ask(denpex, "1700000600.000003", f"<@{BOT_USER_ID}> show me the line")
    assert "ProcessGroupNCCL.cpp:1025" in answer.text


async def test_chatter_and_bot_messages_are_ignored(denpex: Denpex) -> None:
    await diagnosed_thread(denpex)
    assert await ask(denpex, "1700000600.000010", "ok, restarting the job now") == []
    assert await ask(denpex, "1700000600.000011", "why?", user=BOT_USER_ID) == []
    assert await ask(denpex, "1700000600.000012", "why?", bot_id="BOTHER") == []
    # A question outside any diagnosis thread is not ours to answer.
    status, _ = await denpex.send(
        event(thread_message(CHANNEL, "1700000700.000001", "1700000699.000001", "why?"))
    )
    assert status == 200
    assert await denpex.drain() == 0


async def test_a_mention_arriving_as_message_and_app_mention_is_answered_once(
    denpex: Denpex,
) -> None:
    await diagnosed_thread(denpex)
    ts, text = "1700000600.000020", f"<@{BOT_USER_ID}> what caused this"
    mention = {**thread_message(CHANNEL, ts, MSG_TS, text), "type": "app_mention"}
    await denpex.send(event(mention))
    answers = await ask(denpex, ts, text)
    assert len(answers) == 1
    assert "root causes" in answers[0].text.lower()


async def test_an_unmapped_question_offers_what_can_be_answered(denpex: Denpex) -> None:
    reply = await diagnosed_thread(denpex)
    (menu,) = await ask(denpex, "1700000600.000030", "can we get lunch?")
    buttons = [e for b in menu.blocks if b["type"] == "actions" for e in b["elements"]]
    assert len(buttons) >= 12
    fix = next(b for b in buttons if b["value"] == "fix")
    await denpex.send(
        block_action(fix["action_id"], "fix", channel=CHANNEL, message_ts=menu.ts, thread_ts=MSG_TS)
    )
    await denpex.drain()
    answer = denpex.standin.thread(CHANNEL, MSG_TS)[-1]
    assert answer.ts not in (reply.ts, menu.ts)
    assert "Fix" in answer.text


async def test_a_second_log_in_the_thread_changes_the_diagnosis(denpex: Denpex) -> None:
    first = await diagnosed_thread(denpex)
    asked_first = asked(first)  # chat.update changes the stand-in's copy later
    api = denpex.standin
    f = api.add_file("rank12.log", RANK12, channel=CHANNEL, ts="1700000600.000040")
    message = file_share_message(CHANNEL, "1700000600.000040", [f], thread_ts=MSG_TS)
    await denpex.send(event(message))
    await denpex.drain()
    update = api.thread(CHANNEL, MSG_TS)[-1]
    assert update.ts != first.ts
    body = text_of(update)
    assert "rank 12's log shows the first failure" in body
    assert "CUDA out of memory" in update.blocks[0]["text"]["text"]
    # Both logs were read again, from Slack, by file id.
    downloads = [c.args["file_id"] for c in api.calls_to("download")]
    assert downloads.count(f["id"]) == 1 and len(downloads) == 3
    # The first message now carries the new headline.
    updated = [c for c in api.answered("chat.update") if c.args.get("ts") == first.ts]
    assert updated and "CUDA out of memory" in json.dumps(updated[-1].args.get("blocks"))
    # A fact already asked is not asked again.
    assert asked_first
    assert not asked(update) & asked_first


async def test_pasted_evidence_in_the_thread_is_diagnosed_with_the_rest(denpex: Denpex) -> None:
    await diagnosed_thread(denpex)
    pasted = "```" + RANK12.decode() + "```"
    (update,) = await ask(denpex, "1700000600.000050", pasted)
    assert "CUDA out of memory" in update.blocks[0]["text"]["text"]
    assert "shows the first failure" in text_of(update)


async def test_buttons_evidence_explain_and_feedback_once_per_user(denpex: Denpex) -> None:
    reply = await diagnosed_thread(denpex)
    api = denpex.standin
    actions = {e["action_id"]: e for e in reply.blocks[-1]["elements"]}

    def click(action_id: str, user: str = "UALICE") -> Any:
        return block_action(
            action_id,
            actions[action_id]["value"],
            channel=CHANNEL,
            message_ts=reply.ts,
            thread_ts=MSG_TS,
            user=user,
            response_url=api.response_url(f"{action_id}-{user}"),
        )

    await denpex.send(click("denpex_show_evidence"))
    await denpex.send(click("denpex_explain"))
    await denpex.drain()
    evidence, explain = api.thread(CHANNEL, MSG_TS)[-2:]
    assert "ProcessGroupNCCL.cpp:1025" in text_of(evidence)
    assert "Decision path" in text_of(explain)

    await denpex.send(click("denpex_feedback_correct"))
    await denpex.send(click("denpex_feedback_correct"))
    await denpex.send(click("denpex_feedback_wrong"))
    await denpex.send(click("denpex_feedback_wrong", user="UBOB"))
    await denpex.drain()
    notes = [c.args["text"] for c in api.calls_to("response_url")]
    assert sum("Thanks" in n for n in notes) == 2
    assert sum("already gave feedback" in n for n in notes) == 2
    await denpex.send(slash_command("stats", response_url=api.response_url("stats")))
    await denpex.drain()
    stats = api.calls_to("response_url")[-1].args["text"]
    assert "nccl-watchdog-collective-timeout` · 1 · 1 · 1" in stats


async def test_recurrence_is_noted_on_a_new_diagnosis(denpex: Denpex) -> None:
    await diagnosed_thread(denpex)
    api = denpex.standin
    f = api.add_file("rank0-again.log", RANK0, channel=CHANNEL, ts="1700000800.000100")
    await denpex.send(event(file_share_message(CHANNEL, "1700000800.000100", [f])))
    await denpex.drain()
    (second,) = api.thread(CHANNEL, "1700000800.000100")
    assert "2nd time this week" in text_of(second)
    assert ", last on 20" in text_of(second)  # the date of the first one
    (answer,) = await ask(denpex, "1700000600.000060", "have we seen this before?")
    assert "Seen 2 times in this channel" in answer.text


def test_a_long_pasted_log_is_kept_as_head_and_tail_only() -> None:
    from bot.slack.thread import INLINE_HEAD, INLINE_TAIL, _excerpt

    text = "".join(f"line {i}\n" for i in range(200_000)) + "RuntimeError: the end\n"
    kept = _excerpt(text)
    assert len(kept) < INLINE_HEAD + INLINE_TAIL + 200
    assert kept.startswith("line 0\n") and kept.endswith("RuntimeError: the end\n")
    assert "were not kept" in kept
    assert _excerpt("short\n") == "short\n"
