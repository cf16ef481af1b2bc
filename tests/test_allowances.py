"""Daily allowances per Slack user, channel and webhook key: counted atomically, refused politely.

The counter is tested on its own (fakeredis and a real Redis); the refusals go through the real
app: signed slash commands, dropped files and webhooks.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from bot.jobs.allowance import (
    CHANNEL,
    USER,
    WEBHOOK_KEY,
    AllowanceCounter,
    AllowanceExceeded,
    Allowances,
)
from bot.jobs.keys import Keys
from bot.ops import metrics
from handlers.jobs import Job
from handlers.webhook import KEY_ID_HEADER, PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from tests.slack_requests import Denpex, event, file_share_message, redis_for_app, slash_command
from tests.slack_standin import SlackStandin

__all__ = ["redis_for_app"]  # fixtures

NOON = 1_735_732_800.0  # 2025-01-01 12:00:00 UTC
WEBHOOK_SECRET = "whsec-allowance-test-0123456789"


def _job(
    n: int, *, user: str | None = "UALICE", channel: str = "C1", kind: str = "diagnose", **kw: Any
) -> Job:
    return Job(source="slash", dedupe_key=f"a-{n}", channel=channel, user=user, kind=kind, **kw)


def _webhook_answers(status: int) -> float:
    return float(metrics.WEBHOOK_REQUESTS.labels(str(status))._value.get())


def _refusals(scope: str) -> float:
    return float(metrics.ALLOWANCE_REFUSALS.labels(scope)._value.get())


# -- the counter ------------------------------------------------------------------------------


async def test_each_scope_is_counted_and_the_first_one_used_up_is_named(
    fake_redis: Any, key_prefix: str
) -> None:
    clock = [NOON]
    counter = AllowanceCounter(
        fake_redis,
        Allowances(user=2, channel=3, webhook_key=0),
        keys=Keys(key_prefix),
        clock=lambda: clock[0],
    )
    await counter.take(_job(1))
    await counter.take(_job(2))
    with pytest.raises(AllowanceExceeded) as refused:
        await counter.take(_job(3))
    assert refused.value.scope == USER
    assert str(refused.value) == (
        "You have used your 2 Denpex diagnoses for today; the allowance resets at 00:00 UTC."
    )
    assert refused.value.retry_after_s == 12 * 3600  # until midnight UTC
    # The refusal took nothing: the channel still has one left, for someone else.
    assert (await counter.used(USER, "UALICE"), await counter.used(CHANNEL, "C1")) == (2, 2)
    await counter.take(_job(4, user="UBOB"))
    with pytest.raises(AllowanceExceeded, match="This channel has used its 3 Denpex diagnoses for today"):
        await counter.take(_job(5, user="UCAROL"))
    # A new UTC day, a new allowance.
    clock[0] = NOON + 12 * 3600 + 1
    await counter.take(_job(6))
    assert await counter.used(USER, "UALICE") == 1


async def test_only_new_diagnoses_count(fake_redis: Any, key_prefix: str) -> None:
    counter = AllowanceCounter(fake_redis, Allowances(user=1, channel=1), keys=Keys(key_prefix))
    await counter.take(_job(1))
    for kind in ("followup", "evidence", "feedback", "explain", "rediagnose", "history"):
        assert (await counter.take(_job(2, kind=kind, thread_ts="1.0"))).keys == ()
    with pytest.raises(AllowanceExceeded):
        await counter.take(_job(3))


async def test_zero_means_unlimited(fake_redis: Any, key_prefix: str) -> None:
    counter = AllowanceCounter(
        fake_redis, Allowances(user=0, channel=0, webhook_key=0), keys=Keys(key_prefix)
    )
    for n in range(50):
        assert (await counter.take(_job(n))).keys == ()


async def test_concurrent_takes_never_pass_the_allowance(redis_client: Any, key_prefix: str) -> None:
    counter = AllowanceCounter(redis_client, Allowances(user=0, channel=5), keys=Keys(key_prefix))
    results = await asyncio.gather(
        *(counter.take(_job(n, user=None)) for n in range(40)), return_exceptions=True
    )
    assert sum(1 for r in results if not isinstance(r, BaseException)) == 5
    assert all(isinstance(r, AllowanceExceeded) for r in results if isinstance(r, BaseException))
    assert await counter.used(CHANNEL, "C1") == 5
    ttl = await redis_client.ttl(
        counter.keys.allowance(time.strftime("%Y%m%d", time.gmtime()), CHANNEL, "C1")
    )
    assert 0 < ttl <= 25 * 3600


# -- through the app --------------------------------------------------------------------------


def _webhook(job_id: str, key_id: str = "default") -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"job_id": job_id, "channel": "CHOOK", "log": "step 1\nKilled\n"}).encode()
    ts = str(int(time.time()))
    return body, {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: ts,
        SIGNATURE_HEADER: sign(WEBHOOK_SECRET, ts, body),
        KEY_ID_HEADER: key_id,
    }


async def test_webhook_key_past_its_allowance_gets_429_until_midnight(
    slack_api: SlackStandin, redis_for_app: Any
) -> None:
    env = {
        "DENPEX_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "DENPEX_ALLOWANCE_WEBHOOK_KEY": "3",
        "DENPEX_WEBHOOK_BURST": "100",
    }
    before = _refusals(WEBHOOK_KEY)
    answered_before = {code: _webhook_answers(code) for code in (429, 503)}
    async with Denpex(slack_api, redis_for_app, env=env) as app:
        statuses = []
        for n in range(3):
            body, headers = _webhook(f"job-{n}")
            resp = await app.http.post(PATH, data=body, headers=headers)
            statuses.append(resp.status)
        # A scheduler re-sending a report it already sent is a duplicate, not a new diagnosis.
        body, headers = _webhook("job-0")
        resp = await app.http.post(PATH, data=body, headers=headers)
        assert (resp.status, (await resp.json())["duplicate"]) == (202, True)
        body, headers = _webhook("job-3")
        resp = await app.http.post(PATH, data=body, headers=headers)
        assert statuses == [202, 202, 202]
        assert resp.status == 429
        now = time.time()
        until_midnight = 86400 - now % 86400
        assert abs(int(resp.headers["Retry-After"]) - until_midnight) <= 5
        answer = await resp.json()
        assert answer["scope"] == WEBHOOK_KEY
        assert "This webhook key has used its 3 Denpex diagnoses for today" in answer["error"]
        assert (await app.runtime.queue.stats())["length"] == 3
    assert _refusals(WEBHOOK_KEY) == before + 1
    # Counted as the 429 it was answered, not as an outage.
    assert _webhook_answers(429) == answered_before[429] + 1
    assert _webhook_answers(503) == answered_before[503]


async def test_user_past_the_allowance_is_told_politely_and_questions_still_work(
    slack_api: SlackStandin, redis_for_app: Any
) -> None:
    env = {"DENPEX_ALLOWANCE_USER": "2"}
    before = _refusals(USER)
    async with Denpex(slack_api, redis_for_app, env=env) as app:
        for n in range(3):
            url = slack_api.response_url(f"cmd-{n}")
            status, _ = await app.send(slash_command(f"diagnose step {n}\nKilled", response_url=url))
            assert status == 200
        assert (await app.runtime.queue.stats())["length"] == 2
        [told] = [c for c in slack_api.calls_to("response_url") if c.args["key"] == "cmd-2"]
        assert told.args["text"] == (
            "You have used your 2 Denpex diagnoses for today; the allowance resets at 00:00 UTC."
        )
        assert told.args["response_type"] == "ephemeral"
        # A look-up is no diagnosis: it is still answered.
        status, _ = await app.send(slash_command("signatures oom", response_url=slack_api.response_url("q")))
        assert status == 200
        assert (await app.runtime.queue.stats())["length"] == 3
    assert _refusals(USER) == before + 1


async def test_channel_past_its_allowance_tells_the_uploader(
    slack_api: SlackStandin, redis_for_app: Any
) -> None:
    env = {"DENPEX_ALLOWANCE_CHANNEL": "1"}
    async with Denpex(slack_api, redis_for_app, env=env) as app:
        for n, user in ((1, "UALICE"), (2, "UBOB")):
            ts = f"1700000600.00010{n}"
            f = slack_api.add_file(f"rank{n}.log", b"step 1\nKilled\n", channel="CFULL", ts=ts)
            status, _ = await app.send(event(file_share_message("CFULL", ts, [f], user=user)))
            assert status == 200
        assert (await app.runtime.queue.stats())["length"] == 1
        [told] = slack_api.calls_to("chat.postEphemeral")
        assert (told.args["channel"], told.args["user"]) == ("CFULL", "UBOB")
        assert told.args["text"].startswith("This channel has used its 1 Denpex diagnoses for today")
        # No working emoji on a file that will not be diagnosed.
        reacted = [c.args["timestamp"] for c in slack_api.calls_to("reactions.add")]
        assert reacted == ["1700000600.000101"]


def test_allowance_settings_default_and_parse() -> None:
    from bot.ops.settings import SettingsError, load_settings

    base = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    s = load_settings(base)
    assert (s.allowance_user, s.allowance_channel, s.allowance_webhook_key) == (200, 500, 2000)
    s = load_settings({**base, "DENPEX_ALLOWANCE_USER": "0"})
    assert s.allowance_user == 0
    with pytest.raises(SettingsError, match="DENPEX_ALLOWANCE_CHANNEL"):
        load_settings({**base, "DENPEX_ALLOWANCE_CHANNEL": "-1"})
