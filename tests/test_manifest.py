"""deploy/slack-manifest.yaml against the listeners the Bolt app registers: they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.ops.settings import load_settings
from bot.slack.render import ACTION_ASK, ACTIONS
from bot.web.app import build_bolt
from tests.slack_requests import Denpex, denpex, event, redis_for_app

__all__ = ["denpex", "redis_for_app"]  # fixtures

MANIFEST = Path(__file__).parents[1] / "deploy" / "slack-manifest.yaml"
# message.channels / .groups / .im / .mpim all arrive as the "message" event type.
MESSAGE_SUBSCRIPTIONS = re.compile(r"^message\.(channels|groups|im|mpim)$")
# Scopes each subscription or Web API call needs (Slack's scope reference).
EVENT_SCOPES = {
    "app_mention": "app_mentions:read",
    "file_shared": "files:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
}
CALL_SCOPES = {"chat:write", "commands", "files:read", "files:write", "reactions:write"}


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return data


async def _no(*_a: object) -> bool:
    return False


async def _nothing(*_a: object) -> None:
    return None


def registered() -> dict[str, list[Any]]:
    """What each Bolt listener matches, read from the listener's own matcher."""
    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"})
    bolt = build_bolt(
        settings,
        AsyncWebClient(token="xoxb-1"),
        enqueue=_no,
        is_diagnosis_thread=_no,
        claim=_no,
        release=_nothing,
    )
    found: dict[str, list[Any]] = {"command": [], "event": [], "action": []}
    for listener in bolt._async_listeners:
        for matcher in listener.matchers:
            inner = matcher.func.__closure__[0].cell_contents  # type: ignore[attr-defined]
            kind = inner.__qualname__.split(".")[0]
            found[kind].append(inner.__closure__[0].cell_contents)
    return found


def subscribed_event_types() -> set[str]:
    events = manifest()["settings"]["event_subscriptions"]["bot_events"]
    return {"message" if MESSAGE_SUBSCRIPTIONS.match(e) else e for e in events}


def test_every_subscribed_event_has_a_listener_and_every_listener_is_subscribed() -> None:
    assert set(registered()["event"]) == subscribed_event_types()


def test_slash_commands_match() -> None:
    commands = {c["command"] for c in manifest()["features"]["slash_commands"]}
    assert commands == set(registered()["command"])


def test_every_button_rendered_has_a_listener_and_interactivity_is_on() -> None:
    constraints = registered()["action"]

    def handled(action_id: str) -> bool:
        return any(c.match(action_id) if isinstance(c, re.Pattern) else c == action_id for c in constraints)

    for action_id in (*ACTIONS, f"{ACTION_ASK}_0", f"{ACTION_ASK}_15"):
        assert handled(action_id), action_id
    assert not handled("someone_elses_button")
    assert manifest()["settings"]["interactivity"]["is_enabled"] is True


def test_scopes_are_exactly_what_events_and_calls_need() -> None:
    data = manifest()
    events = data["settings"]["event_subscriptions"]["bot_events"]
    needed = {EVENT_SCOPES[e] for e in events} | CALL_SCOPES
    assert set(data["oauth_config"]["scopes"]["bot"]) == needed


def test_urls_point_at_the_one_slack_endpoint() -> None:
    data = manifest()
    urls = [
        data["settings"]["event_subscriptions"]["request_url"],
        data["settings"]["interactivity"]["request_url"],
        *(c["url"] for c in data["features"]["slash_commands"]),
    ]
    assert all(u.endswith("/slack/events") for u in urls)


@pytest.mark.parametrize(
    "inner",
    [
        {"type": "app_mention", "channel": "C1", "ts": "1.1", "text": "hi", "user": "U1"},
        {"type": "file_shared", "channel_id": "C1", "file_id": "F404", "user_id": "U1"},
        {"type": "message", "channel": "C1", "ts": "1.2", "text": "hello", "user": "U1"},
        {"type": "message", "subtype": "message_deleted", "channel": "C1", "ts": "1.3"},
    ],
)
async def test_each_subscribed_event_is_acknowledged_over_http(denpex: Denpex, inner: dict[str, Any]) -> None:
    assert inner["type"] in subscribed_event_types()
    status, _ = await denpex.send(event(inner))
    assert status == 200


async def test_an_unsubscribed_event_is_not_handled(denpex: Denpex) -> None:
    # Proves the listeners above are the whole list: Bolt answers 404 for anything else.
    status, _ = await denpex.send(event({"type": "reaction_added", "user": "U1"}))
    assert status == 404
    assert "reaction_added" not in subscribed_event_types()
