"""The optional model: free-form follow-ups answered from the redacted evidence, with citations.

Through the real app and worker, with a local OpenAI-compatible stand-in that records what it
was sent and can answer 429/500 or hang.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.kinds.registry import model_from_settings
from bot.model.citations import check_citations
from bot.model.client import ModelClient, ModelUnavailable
from bot.model.pack import build_pack
from bot.ops.settings import load_settings
from bot.slack.intents import match_intent
from signatures import Source, diagnose
from tests.model_standin import ModelStandin
from tests.slack_requests import Denpex, event, file_share_message, redis_for_app, thread_message

__all__ = ["redis_for_app"]  # fixture

CHANNEL = "CTRAINING"
MSG_TS = "1700000500.000100"
HF = "hf_" + "Q" * 34
AWS = "AKIA" + "Z" * 16
# Fifty quiet steps, a planted secret, then rank 0's watchdog: the model may see only the lines
# the engine selected around the failure, never the early steps or the secret.
LOG = (
    "".join(f"[2024-05-01 10:00:{i:02d},000] [INFO] [rank0] step {i:03d} loss 2.1\n" for i in range(50))
    + f"[2024-05-01 10:29:59,000] [INFO] [rank0] env HF_TOKEN={HF} AWS_ACCESS_KEY_ID={AWS}\n"
    + "[rank0]:[E501 10:30:45.123456 1234 ProcessGroupNCCL.cpp:1025] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)  # fmt: skip
FREE_FORM = "did the scheduler move this job between clusters yesterday?"


def cite_first_label(body: dict[str, Any]) -> str:
    """A model that cites the first evidence line it was shown, and one line it was not."""
    user = body["messages"][-1]["content"]
    label = re.search(r"^\[([^\]]+)\]", user.split("Evidence lines:\n", 1)[1], re.M)
    assert label is not None
    return f"Rank 0 waited on a collective [{label.group(1)}]; compare with [elsewhere.log:9]."


@pytest.fixture
async def model() -> AsyncIterator[ModelStandin]:
    standin = ModelStandin(reply=cite_first_label)
    await standin.start()
    try:
        yield standin
    finally:
        await standin.stop()


async def app_with_model(slack_api: Any, redis: Any, model: ModelStandin, **env: str) -> Denpex:
    settings = {
        "DENPEX_LLM_URL": model.base_url,
        "DENPEX_LLM_MODEL": "team-model",
        "DENPEX_LLM_TIMEOUT_S": "2",
    }
    return Denpex(slack_api, redis, env={**settings, **env})


async def diagnosed(app: Denpex) -> None:
    f = app.standin.add_file("rank0.log", LOG.encode(), channel=CHANNEL, ts=MSG_TS)
    await app.send(event(file_share_message(CHANNEL, MSG_TS, [f])))
    await app.drain()
    assert len(app.standin.thread(CHANNEL, MSG_TS)) == 1


async def ask(app: Denpex, ts: str, text: str) -> list[Any]:
    before = len(app.standin.thread(CHANNEL, MSG_TS))
    status, _ = await app.send(event(thread_message(CHANNEL, ts, MSG_TS, text)))
    assert status == 200
    await app.drain()
    return app.standin.thread(CHANNEL, MSG_TS)[before:]


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


def test_the_question_is_one_no_intent_takes() -> None:
    assert match_intent(FREE_FORM) is None


async def test_a_free_form_question_is_answered_by_the_model_with_checked_citations(
    slack_api: Any, redis_for_app: Any, model: ModelStandin
) -> None:
    async with await app_with_model(slack_api, redis_for_app, model) as app:
        await diagnosed(app)
        (answer,) = await ask(app, "1700000600.000001", FREE_FORM)
    shown = text_of(answer)
    assert re.search(r"\[rank0\.log:\d+\]", shown)  # a citation of a line it was shown
    assert "elsewhere.log:9: not in the evidence I shared" in shown
    assert "team-model" in shown and "No raw log was sent" in shown
    [request] = model.requests
    assert request["model"] == "team-model"
    sent = model.sent_text()
    assert FREE_FORM in sent
    assert "Watchdog caught collective operation timeout" in sent
    assert HF not in sent and AWS not in sent
    assert "step 000" not in sent and "step 010" not in sent  # outside the engine's selection


async def test_a_429_is_retried_and_still_answered(
    slack_api: Any, redis_for_app: Any, model: ModelStandin
) -> None:
    model.fail_next = [429]
    async with await app_with_model(slack_api, redis_for_app, model) as app:
        await diagnosed(app)
        (answer,) = await ask(app, "1700000600.000002", FREE_FORM)
    assert len(model.requests) == 2
    assert "team-model" in text_of(answer)


async def test_a_hanging_model_leaves_the_usual_menu_within_its_time_limit(
    slack_api: Any, redis_for_app: Any, model: ModelStandin
) -> None:
    model.hang = True
    async with await app_with_model(slack_api, redis_for_app, model, DENPEX_LLM_TIMEOUT_S="1") as app:
        await diagnosed(app)
        started = time.monotonic()
        (menu,) = await ask(app, "1700000600.000003", FREE_FORM)
        took = time.monotonic() - started
    assert "can't map that question" in menu.text
    assert any(b["type"] == "actions" for b in menu.blocks)
    assert took < 10  # the job was not held past the model's limit (1 s) by much


async def test_a_failing_model_leaves_the_usual_menu(
    slack_api: Any, redis_for_app: Any, model: ModelStandin
) -> None:
    model.fail_next = [500, 500, 500]
    async with await app_with_model(slack_api, redis_for_app, model) as app:
        await diagnosed(app)
        (menu,) = await ask(app, "1700000600.000004", FREE_FORM)
    assert "can't map that question" in menu.text


async def test_the_daily_allowance_per_channel_holds(
    slack_api: Any, redis_for_app: Any, model: ModelStandin
) -> None:
    async with await app_with_model(slack_api, redis_for_app, model, DENPEX_LLM_DAILY_PER_CHANNEL="1") as app:
        await diagnosed(app)
        (first,) = await ask(app, "1700000600.000005", FREE_FORM)
        (second,) = await ask(app, "1700000600.000006", FREE_FORM + " and the day before?")
    assert "team-model" in text_of(first)
    assert "can't map that question" in second.text
    assert len(model.requests) == 1


async def test_a_mapped_question_never_reaches_the_model(
    slack_api: Any, redis_for_app: Any, model: ModelStandin
) -> None:
    async with await app_with_model(slack_api, redis_for_app, model) as app:
        await diagnosed(app)
        (answer,) = await ask(app, "1700000600.000007", "which rank failed first?")
    assert "Rank 0" in answer.text
    assert model.requests == []


def test_the_model_is_off_unless_configured() -> None:
    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s"})
    assert not settings.model_enabled
    assert model_from_settings(settings, redis=None, keys=None) is None
    only_url = load_settings(
        {"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s", "DENPEX_LLM_URL": "http://m/v1"}
    )
    assert not only_url.model_enabled


# -- the evidence pack, the citations and the client on their own ----------------------------


def test_the_pack_holds_only_redacted_selected_lines_within_its_budget() -> None:
    d = diagnose([Source.from_text("rank0.log", LOG)])
    pack = build_pack(d, f"is {HF} the token?", max_lines=40, max_tokens=3000)
    sent = json.dumps(pack.messages)
    assert HF not in sent and AWS not in sent
    assert "step 000" not in sent
    assert all(line.file == "rank0.log" for line in pack.lines)
    packs = {
        t: build_pack(d, "why?", max_lines=40, max_tokens=t) for t in (1000, 700, 600, 500, 450, 400, 350)
    }
    assert all(p.size <= t * 4 for t, p in packs.items())
    trimmed = [p for p in packs.values() if 0 < len(p.lines) < len(pack.lines)]
    assert trimmed  # some budget kept some lines and dropped others...
    assert all(p.lines[0].text.startswith("[rank0]:") for p in trimmed)  # ...the initiating line first


def test_citations_of_lines_not_shown_are_marked() -> None:
    checked = check_citations("see [a.log:3] and [b.log:4] and [a.log:3]", frozenset({"a.log:3"}))
    assert checked.cited == ("a.log:3",)
    assert checked.unknown == ("b.log:4",)
    assert "[b.log:4: not in the evidence I shared]" in checked.text


async def test_the_client_gives_up_on_a_hang_at_its_limit(model: ModelStandin) -> None:
    model.hang = True
    client = ModelClient(model.base_url, "m", timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match=r"within 0\.5 s"):
        await client.complete([{"role": "user", "content": "hi"}])
    await client.close()
    assert time.monotonic() - started < 3


async def test_the_client_sends_the_key_and_reads_the_answer(model: ModelStandin) -> None:
    client = ModelClient(model.base_url, "m", api_key="sk-test-key-123456789012345")
    model.reply = lambda body: "fine"
    reply = await client.complete([{"role": "user", "content": "hi"}])
    await client.close()
    assert reply.text == "fine" and reply.model == "m"
    assert model.headers[0]["Authorization"] == "Bearer sk-test-key-123456789012345"
