"""Settings: read once from the environment, secrets masked, bad values named."""

from __future__ import annotations

import pytest

from bot.ops.settings import SettingsError, load_settings

BASE = {"SLACK_BOT_TOKEN": "xoxb-secret-token", "SLACK_SIGNING_SECRET": "shh-signing"}


def test_defaults_and_parsing() -> None:
    s = load_settings(
        {
            **BASE,
            "PORT": "8080",
            "DENPEX_CHANNEL_ALLOWLIST": "C1, C2",
            "DENPEX_MAX_LOG_BYTES": "1000",
            "SLACK_API_URL": "http://127.0.0.1:9/api",
        }
    )
    assert s.port == 8080
    assert s.host == "0.0.0.0"
    assert s.channel_allowlist == frozenset({"C1", "C2"})
    assert s.channel_allowed("C1") and not s.channel_allowed("C9")
    assert s.max_log_bytes == 1000
    assert s.slack_api_url == "http://127.0.0.1:9/api/"
    assert not s.socket_mode
    assert load_settings(BASE).channel_allowed("Canything")


def test_secrets_are_masked_in_repr() -> None:
    s = load_settings({**BASE, "REDIS_URL": "redis://:pw@localhost:6379/0"})
    text = repr(s)
    assert "xoxb-secret-token" not in text and "shh-signing" not in text and "pw@" not in text
    assert "slack_bot_token='***'" in text


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"SLACK_SIGNING_SECRET": "x"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_SIGNING_SECRET"),
        ({**BASE, "PORT": "http"}, "PORT"),
        ({**BASE, "PORT": "70000"}, "PORT"),
        ({**BASE, "DENPEX_MAX_LOG_BYTES": "-5"}, "DENPEX_MAX_LOG_BYTES"),
        ({**BASE, "DENPEX_JOB_TIMEOUT_S": "soon"}, "DENPEX_JOB_TIMEOUT_S"),
        ({**BASE, "REDIS_URL": "localhost:6379"}, "REDIS_URL"),
        ({**BASE, "SLACK_API_URL": "slack.com"}, "SLACK_API_URL"),
        ({**BASE, "SLACK_BOT_TOKEN": "xoxp-user"}, "SLACK_BOT_TOKEN"),
        ({**BASE, "SLACK_APP_TOKEN": "xoxb-wrong"}, "SLACK_APP_TOKEN"),
    ],
)
def test_missing_or_malformed_setting_is_named(env: dict[str, str], name: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings(env)


def test_socket_mode_needs_no_signing_secret() -> None:
    s = load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"})
    assert s.socket_mode


def test_serve_with_a_bad_setting_exits_2_with_one_line() -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DENPEX_"))}
    env.update({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "PORT": "eighty"})
    done = subprocess.run([sys.executable, "-m", "bot.cli", "serve"], env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "denpex: PORT is malformed: invalid literal for int() with base 10: 'eighty'"
    ]
