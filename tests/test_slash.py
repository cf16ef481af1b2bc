"""``/denpex`` through signed HTTP: ack at once, parent + threaded diagnosis, look-ups."""

from __future__ import annotations

import json
from pathlib import Path

from tests.slack_requests import Denpex, denpex, redis_for_app, slash_command

__all__ = ["denpex", "redis_for_app"]  # fixtures

CORPUS = Path(__file__).parent / "corpus" / "real"
CHANNEL = "CINCIDENT"


def blocks_text(blocks: list[dict[str, object]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


async def test_diagnose_pasted_text_posts_parent_then_diagnosis_in_its_thread(
    denpex: Denpex,
) -> None:
    log = (CORPUS / "dist-dev-001.log").read_text()
    status, body = await denpex.send(slash_command(f"diagnose {log}", channel=CHANNEL))
    assert status == 200
    assert "Working on it" in body
    assert await denpex.drain() == 1
    api = denpex.standin
    parents = [m for m in api.messages if m.channel == CHANNEL and m.thread_ts is None]
    assert len(parents) == 1
    replies = api.thread(CHANNEL, parents[0].ts)
    assert len(replies) == 1
    diagnosis = replies[0]
    assert diagnosis.blocks[0]["type"] == "header"
    assert "exitcode: -9" in blocks_text(diagnosis.blocks)
    # The parent now carries the headline.
    assert api.answered("chat.update")
    assert diagnosis.blocks[0]["text"]["text"].split(" ", 1)[1] in parents[0].text


async def test_diagnose_without_text_takes_the_newest_log_in_the_channel(denpex: Denpex) -> None:
    api = denpex.standin
    old = api.add_file("old.log", b"nothing to see\n")
    new = api.add_file("rank0.log", (CORPUS / "dist-dev-001.log").read_bytes())
    api.overrides["conversations.history"] = {
        "messages": [
            {"type": "message", "ts": "1700000100.000100", "text": "chatter"},
            {"type": "message", "ts": "1700000090.000100", "files": [new]},
            {"type": "message", "ts": "1700000080.000100", "files": [old]},
        ]
    }
    status, _ = await denpex.send(slash_command("diagnose", channel=CHANNEL))
    assert status == 200
    await denpex.drain()
    downloads = [c.args["file_id"] for c in api.calls_to("download")]
    assert downloads == [new["id"]]
    parents = [m for m in api.messages if m.thread_ts is None]
    assert "rank0.log" in parents[0].text
    assert len(api.thread(CHANNEL, parents[0].ts)) == 1


async def test_diagnose_without_text_and_no_log_says_so_privately(denpex: Denpex) -> None:
    api = denpex.standin
    api.overrides["conversations.history"] = {"messages": []}
    url = api.response_url("nolog")
    await denpex.send(slash_command("diagnose", channel=CHANNEL, response_url=url))
    await denpex.drain()
    answers = api.calls_to("response_url")
    assert len(answers) == 1
    assert "no log file" in answers[0].args["text"].lower()
    assert answers[0].args.get("response_type") == "ephemeral"
    assert not api.messages


async def test_channel_the_bot_cannot_post_in_gets_the_answer_via_response_url(
    denpex: Denpex,
) -> None:
    api = denpex.standin
    api.channel_errors["DSECRET"] = "channel_not_found"
    url = api.response_url("dm")
    log = (CORPUS / "dist-dev-001.log").read_text()
    await denpex.send(slash_command(f"diagnose {log}", channel="DSECRET", response_url=url))
    await denpex.drain()
    answers = api.calls_to("response_url")
    assert len(answers) == 1
    assert "exitcode: -9" in json.dumps(answers[0].args)
    assert not api.messages


async def test_help_and_unknown_subcommands_answer_in_the_ack(denpex: Denpex) -> None:
    for text in ("help", "", "frobnicate"):
        status, body = await denpex.send(slash_command(text))
        assert status == 200
        assert "/denpex diagnose" in body
    assert await denpex.drain() == 0


async def test_signatures_and_explain(denpex: Denpex) -> None:
    api = denpex.standin
    await denpex.send(slash_command("signatures oom", response_url=api.response_url("list")))
    await denpex.send(slash_command("explain cuda-oom-allocator", response_url=api.response_url("explain")))
    await denpex.send(slash_command("explain no-such-thing", response_url=api.response_url("bad")))
    await denpex.drain()
    by_key = {c.args["key"]: c.args for c in api.calls_to("response_url")}
    assert "cuda-oom-allocator" in by_key["list"]["text"]
    assert "CUDA out of memory" in blocks_text(by_key["explain"]["blocks"])
    assert "Decision path" in blocks_text(by_key["explain"]["blocks"])
    assert "No signature" in by_key["bad"]["text"]


async def test_history_lists_the_channel_s_diagnoses(denpex: Denpex) -> None:
    api = denpex.standin
    for name in ("dist-dev-001.log", "tc-dev-001.log"):
        log = (CORPUS / name).read_text()
        await denpex.send(slash_command(f"diagnose {log}", channel=CHANNEL))
    await denpex.drain()
    await denpex.send(slash_command("history 5", channel=CHANNEL, response_url=api.response_url()))
    await denpex.send(slash_command("history lots", channel=CHANNEL))
    await denpex.drain()
    listing = api.calls_to("response_url")[-1].args["text"]
    assert "Last 2 diagnoses" in listing
    replies = [m for m in api.messages if m.thread_ts]
    for reply in replies:
        headline = reply.blocks[0]["text"]["text"].split(" ", 1)[1]
        assert headline in listing


async def test_pasted_text_over_the_limit_is_refused_in_the_ack(
    slack_api: object, redis_for_app: object
) -> None:
    async with Denpex(slack_api, redis_for_app, env={"DENPEX_MAX_LOG_BYTES": "100"}) as app:
        status, body = await app.send(slash_command("diagnose " + "x" * 500))
        assert status == 200
        assert "over the" in body
        assert await app.drain() == 0


async def test_a_full_queue_is_told_to_the_user_not_swallowed(denpex: Denpex) -> None:
    from bot.jobs.queue import QueueFull

    async def full(job: object) -> bool:
        raise QueueFull("the job queue is full (500 jobs waiting)")

    denpex.runtime.queue.enqueue = full
    await denpex.send(slash_command("diagnose RuntimeError: boom", channel=CHANNEL))
    told = [m for m in denpex.standin.messages if m.channel == CHANNEL]
    assert len(told) == 1
    assert "could not start" in told[0].text and "500 jobs waiting" in told[0].text


async def test_diagnose_then_a_newline_and_a_pasted_log_diagnoses_the_log(denpex: Denpex) -> None:
    """Slack users paste the log on the line after the command: any whitespace separates them."""
    log = (CORPUS / "dist-dev-001.log").read_text()
    for separator in ("\n", "\t", "\r\n", "\u00a0"):
        status, body = await denpex.send(slash_command(f"diagnose{separator}{log}", channel=CHANNEL))
        assert status == 200
        assert "Working on it" in body
        assert "/denpex signatures" not in body  # not the help text
    assert await denpex.drain() == 4
    replies = [m for m in denpex.standin.messages if m.thread_ts]
    assert len(replies) == 4
    assert all("exitcode: -9" in blocks_text(reply.blocks) for reply in replies)


async def test_subcommand_on_its_own_line_and_an_odd_history_count_get_answers(denpex: Denpex) -> None:
    api = denpex.standin
    status, _ = await denpex.send(slash_command("signatures\noom", response_url=api.response_url("list")))
    assert status == 200
    for count in ("²", "9" * 5000, "3\n"):
        status, body = await denpex.send(slash_command(f"history {count}", channel=CHANNEL))
        assert status == 200
        if count == "3\n":
            assert "/denpex history" not in body
        else:
            assert "takes a number from 1 to 50" in body
    await denpex.drain()
    by_key = {c.args["key"]: c.args for c in api.calls_to("response_url") if "key" in c.args}
    assert "cuda-oom-allocator" in by_key["list"]["text"]
