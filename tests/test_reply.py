"""Posting answers through the Slack stand-in: parent and thread, fallbacks, retries."""

from __future__ import annotations

import aiohttp
import pytest

from bot.slack.render import render_diagnosis
from bot.slack.reply import ReplyFailed, SlackReplier, make_client
from handlers.jobs import Job
from signatures.diagnosis import Diagnosis
from tests.slack_standin import SlackStandin


def _diagnosis() -> Diagnosis:
    return Diagnosis.from_dict(
        {
            "status": "failure",
            "signature": {
                "id": "cuda-oom",
                "title": "CUDA out of memory on rank 3",
                "category": "gpu-memory",
                "role": "initiating",
            },
            "confidence": 0.9,
            "initiating": {"file": "rank3.log", "line": 7, "text": "torch.OutOfMemoryError <!channel>"},
            "summary": "Rank 3 ran out of GPU memory.",
        }
    )


def _job(**kwargs: object) -> Job:
    kwargs.setdefault("channel", "C1")
    return Job(source="slash", dedupe_key="e1", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def replier(slack_api: SlackStandin) -> SlackReplier:
    return SlackReplier(make_client(slack_api.token, slack_api.api_url))


async def test_opens_a_thread_and_answers_in_it(replier: SlackReplier, slack_api: SlackStandin) -> None:
    d = _diagnosis()
    posted = await replier.deliver(_job(header="Job 42 failed"), d, None)
    parent, reply = slack_api.messages
    assert "Job 42 failed" in parent.text and parent.thread_ts is None
    assert reply.thread_ts == parent.ts == posted.thread_ts
    assert posted.ts == reply.ts
    assert reply.blocks == render_diagnosis(d, job_meta={}).blocks
    assert "<!channel>" not in str(reply.blocks)  # log text is escaped


async def test_answers_in_an_existing_thread_without_a_parent(
    replier: SlackReplier, slack_api: SlackStandin
) -> None:
    await replier.deliver(_job(thread_ts="1699.000100"), None, "rank0.log is a binary file.")
    [reply] = slack_api.messages
    assert reply.thread_ts == "1699.000100"
    assert "rank0.log is a binary file." in reply.text


async def test_not_in_channel_falls_back_to_response_url(
    replier: SlackReplier, slack_api: SlackStandin
) -> None:
    slack_api.channel_errors["C9"] = "not_in_channel"
    job = _job(channel="C9", response_url=slack_api.response_url("cmd-1"))
    posted = await replier.deliver(job, _diagnosis(), None)
    assert posted.ts is None
    assert slack_api.messages == []
    [answer] = slack_api.calls_to("response_url")
    assert answer.args["key"] == "cmd-1"
    assert "CUDA out of memory" in answer.args["text"]
    assert answer.args["response_type"] == "in_channel"


async def test_no_channel_access_and_no_response_url_is_an_error(
    replier: SlackReplier, slack_api: SlackStandin
) -> None:
    slack_api.channel_errors["C9"] = "channel_not_found"
    with pytest.raises(ReplyFailed, match="channel_not_found"):
        await replier.deliver(_job(channel="C9", thread_ts="1.0"), _diagnosis(), None)


async def test_reply_arrives_after_429_and_500(replier: SlackReplier, slack_api: SlackStandin) -> None:
    slack_api.fail_next("chat.postMessage", 429)
    slack_api.fail_next("chat.postMessage", 500)
    await replier.deliver(_job(thread_ts="1.0"), _diagnosis(), None)
    statuses = [c.status for c in slack_api.calls_to("chat.postMessage")]
    assert statuses == [429, 500, 200]
    assert len(slack_api.messages) == 1


async def test_refused_blocks_fall_back_to_text(replier: SlackReplier, slack_api: SlackStandin) -> None:
    slack_api.fail_next("chat.postMessage", error="invalid_blocks")
    await replier.deliver(_job(thread_ts="1.0"), _diagnosis(), None)
    [reply] = slack_api.messages
    assert reply.blocks == []
    assert "CUDA out of memory" in reply.text


async def test_stand_in_serves_files_only_with_the_bot_token(slack_api: SlackStandin) -> None:
    f = slack_api.add_file("rank0.log", b"line one\n")
    async with aiohttp.ClientSession() as http:
        async with http.get(f["url_private_download"]) as resp:
            assert resp.content_type == "text/html"  # Slack's login page, status 200
            assert resp.status == 200
        headers = {"Authorization": f"Bearer {slack_api.token}"}
        async with http.get(f["url_private_download"], headers=headers) as resp:
            assert await resp.read() == b"line one\n"
