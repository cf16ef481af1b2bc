"""Dropped log files through signed Events API requests: one job per upload, replies in thread."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from tests.slack_requests import (
    Denpex,
    denpex,
    event,
    file_share_message,
    file_shared,
    redis_for_app,
)

__all__ = ["denpex", "redis_for_app"]  # fixtures

CORPUS = Path(__file__).parent / "corpus" / "real"
CHANNEL = "CTRAINING"
MSG_TS = "1700000500.000100"


def text_of(blocks: list[dict[str, object]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


async def test_file_share_plus_file_shared_plus_retry_is_one_diagnosis(denpex: Denpex) -> None:
    api = denpex.standin
    f = api.add_file("rank0.log", (CORPUS / "dist-dev-001.log").read_bytes(), channel=CHANNEL, ts=MSG_TS)
    started = time.perf_counter()
    message = event(file_share_message(CHANNEL, MSG_TS, [f]), event_id="EvMSG1")
    retry = event(file_share_message(CHANNEL, MSG_TS, [f]), event_id="EvMSG1", retry_num=1)
    shared = event(file_shared(CHANNEL, f["id"]), event_id="EvSHARED1")
    for req in (message, shared, retry):
        status, _ = await denpex.send(req)
        assert status == 200
    assert await denpex.drain() == 1
    elapsed = time.perf_counter() - started
    replies = api.thread(CHANNEL, MSG_TS)
    assert len(replies) == 1
    assert "exitcode: -9" in text_of(replies[0].blocks)
    # The bot never posted a parent of its own: it answered in the file's thread.
    assert [m for m in api.messages if m.thread_ts is None] == []
    reactions = [(c.method, c.args["name"]) for c in api.calls if c.method.startswith("reactions")]
    assert reactions == [
        ("reactions.add", "hourglass_flowing_sand"),
        ("reactions.remove", "hourglass_flowing_sand"),
        ("reactions.add", "white_check_mark"),
    ]
    # Once more with the engine's process pool warm (the first job pays for starting it).
    g = api.add_file("rank1.log", (CORPUS / "dist-dev-001.log").read_bytes())
    started = time.perf_counter()
    await denpex.send(event(file_share_message(CHANNEL, "1700000501.000100", [g])))
    await denpex.drain()
    warm = time.perf_counter() - started
    assert len(api.thread(CHANNEL, "1700000501.000100")) == 1
    print(f"\nevent to posted diagnosis: {elapsed * 1000:.0f} ms cold, {warm * 1000:.0f} ms warm")


async def test_file_shared_alone_finds_the_message_through_files_info(denpex: Denpex) -> None:
    api = denpex.standin
    f = api.add_file(
        "slurm-8812.out",
        (CORPUS / "dist-dev-001.log").read_bytes(),
        channel=CHANNEL,
        ts=MSG_TS,
        thread_ts="1700000400.000001",
    )
    await denpex.send(event(file_shared(CHANNEL, f["id"])))
    await denpex.drain()
    # Shared inside a thread: the answer goes to that thread.
    assert len(api.thread(CHANNEL, "1700000400.000001")) == 1
    assert api.calls_to("files.info")


async def test_several_files_in_one_message_are_one_diagnosis(denpex: Denpex) -> None:
    api = denpex.standin
    log0 = (CORPUS / "dist-dev-001.log").read_bytes()
    log1 = gzip.compress((CORPUS / "dist-dev-003.log").read_bytes())
    a = api.add_file("rank0.log", log0, channel=CHANNEL, ts=MSG_TS)
    b = api.add_file("rank1.log.gz", log1, channel=CHANNEL, ts=MSG_TS)
    await denpex.send(event(file_share_message(CHANNEL, MSG_TS, [a, b])))
    await denpex.send(event(file_shared(CHANNEL, a["id"])))
    await denpex.send(event(file_shared(CHANNEL, b["id"])))
    await denpex.drain()
    assert len(api.thread(CHANNEL, MSG_TS)) == 1
    downloads = sorted(c.args["file_id"] for c in api.calls_to("download"))
    assert downloads == sorted([a["id"], b["id"]])


async def test_file_shared_before_the_message_still_takes_every_file(denpex: Denpex) -> None:
    api = denpex.standin
    c = api.add_file("rank2.log", b"RuntimeError: boom\n", channel=CHANNEL, ts=MSG_TS)
    d = api.add_file("rank3.log", b"RuntimeError: bang\n", channel=CHANNEL, ts=MSG_TS)
    # What conversations.history answers for the message the share points at.
    api.overrides["conversations.history"] = {
        "messages": [{"type": "message", "ts": MSG_TS, "files": [c, d]}]
    }
    await denpex.send(event(file_shared(CHANNEL, c["id"])))
    await denpex.send(event(file_share_message(CHANNEL, MSG_TS, [c, d])))
    await denpex.send(event(file_shared(CHANNEL, d["id"])))
    assert await denpex.drain() == 1
    assert len(api.thread(CHANNEL, MSG_TS)) == 1
    assert sorted(x.args["file_id"] for x in api.calls_to("download")) == [c["id"], d["id"]]


async def test_files_that_are_not_logs_are_ignored(denpex: Denpex) -> None:
    api = denpex.standin
    png = api.add_file("loss-curve.png", b"\x89PNG....", mimetype="image/png")
    status, _ = await denpex.send(event(file_share_message(CHANNEL, MSG_TS, [png])))
    assert status == 200
    assert await denpex.drain() == 0
    assert not api.messages


async def test_a_file_over_the_size_limit_gets_a_reply(slack_api: object, redis_for_app: object) -> None:
    async with Denpex(
        slack_api,
        redis_for_app,
        env={"DENPEX_MAX_LOG_BYTES": "200"},
    ) as app:
        f = app.standin.add_file("huge.log", b"x" * 5000)
        await app.send(event(file_share_message(CHANNEL, MSG_TS, [f])))
        await app.send(event(file_share_message(CHANNEL, MSG_TS, [f]), retry_num=1))
        await app.drain()
        replies = app.standin.thread(CHANNEL, MSG_TS)
        assert len(replies) == 1
        assert "huge.log" in replies[0].text and "limit" in replies[0].text
        assert not app.standin.calls_to("download")


async def test_unreadable_inputs_get_a_clear_reply(denpex: Denpex) -> None:
    api = denpex.standin
    binary = api.add_file("weights.out", bytes(range(256)) * 64)
    corrupt = api.add_file("logs.zip", b"PK\x03\x04 this is not a zip")
    await denpex.send(event(file_share_message(CHANNEL, "1700000600.000100", [binary])))
    await denpex.send(event(file_share_message(CHANNEL, "1700000700.000100", [corrupt])))
    await denpex.drain()
    for ts in ("1700000600.000100", "1700000700.000100"):
        replies = api.thread(CHANNEL, ts)
        assert len(replies) == 1
        assert "Could not diagnose" in replies[0].text


async def test_a_download_refused_by_slack_is_reported(denpex: Denpex) -> None:
    api = denpex.standin
    f = api.add_file("rank0.log", (CORPUS / "dist-dev-001.log").read_bytes())
    api.download_token = "xoxb-someone-else"  # Slack answers a login page, with status 200
    await denpex.send(event(file_share_message(CHANNEL, MSG_TS, [f])))
    await denpex.drain()
    replies = api.thread(CHANNEL, MSG_TS)
    assert len(replies) == 1
    assert "Could not diagnose" in replies[0].text
    assert "web page" in replies[0].text
    failed = [c.args["name"] for c in api.calls_to("reactions.add")]
    assert failed[-1] == "warning"


async def test_channels_outside_the_allow_list_are_ignored(slack_api: object, redis_for_app: object) -> None:
    async with Denpex(
        slack_api,
        redis_for_app,
        env={"DENPEX_CHANNEL_ALLOWLIST": "CALLOWED"},
    ) as app:
        f = app.standin.add_file("rank0.log", b"RuntimeError: boom\n")
        await app.send(event(file_share_message("COTHER", MSG_TS, [f])))
        assert await app.drain() == 0
        await app.send(event(file_share_message("CALLOWED", MSG_TS, [f])))
        assert await app.drain() == 1
        assert len(app.standin.thread("CALLOWED", MSG_TS)) == 1
