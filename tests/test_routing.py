"""Webhook routing: YAML globs to channels, first match wins, every problem reported at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.web.routing import RoutingError, load_routes, parse_routes

ROUTES = """
default: C0FILE
routes:
  - match: {cluster: "prod-*", job_name: "llama-*"}
    channel: C0LLAMA
  - match: {cluster: "prod-*"}
    channel: C0PROD
  - match: {user: "alice"}
    channel: C0ALICE
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "routing.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("cluster", "job_name", "user", "channel"),
    [
        ("prod-east", "llama-70b", "bob", "C0LLAMA"),  # both patterns of the first route
        ("prod-east", "bert", "alice", "C0PROD"),  # first match wins over the user route
        ("dev", "llama-70b", "alice", "C0ALICE"),
        ("dev", "bert", "bob", "C0FILE"),  # nothing matches: the file's default
        (None, "llama-70b", None, "C0FILE"),  # a missing field never matches a pattern
    ],
)
def test_first_matching_route_names_the_channel(
    tmp_path: Path, cluster: str | None, job_name: str | None, user: str | None, channel: str
) -> None:
    router = load_routes(write(tmp_path, ROUTES), default="C0SETTING")
    assert router.channel_for(cluster=cluster, job_name=job_name, user=user) == channel


def test_setting_default_applies_when_the_file_has_none(tmp_path: Path) -> None:
    router = load_routes(write(tmp_path, "routes: []\n"), default="C0SETTING")
    assert router.channel_for(cluster="x") == "C0SETTING"
    assert load_routes(None, default=None).channel_for(cluster="x") is None


def test_globs_are_case_sensitive() -> None:
    router = parse_routes({"routes": [{"match": {"cluster": "Prod-*"}, "channel": "C1"}]}, source="inline")
    assert router.channel_for(cluster="Prod-a") == "C1"
    assert router.channel_for(cluster="prod-a") is None


def test_every_problem_is_reported_with_its_place(tmp_path: Path) -> None:
    bad = """
default: ""
colour: blue
routes:
  - match: {clutser: "a*"}
    channel: C1
  - match: {}
  - channel: C2
    match: {user: 3}
  - just a string
"""
    with pytest.raises(RoutingError) as info:
        load_routes(write(tmp_path, bad))
    message = str(info.value)
    for expected in (
        "unknown key 'colour'",
        "default: must be a non-empty channel",
        "routes[0].match.clutser: unknown field",
        "routes[1].channel: must be a non-empty channel",
        "routes[1].match: must be a non-empty mapping",
        "routes[2].match.user: must be a non-empty glob string",
        "routes[3]: must be a mapping",
    ):
        assert expected in message
    assert message.startswith(str(tmp_path / "routing.yaml"))


def test_unreadable_and_invalid_yaml_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(RoutingError, match="cannot read the routing file"):
        load_routes(tmp_path / "missing.yaml")
    with pytest.raises(RoutingError, match="not valid YAML"):
        load_routes(write(tmp_path, "routes: [\n"))
    with pytest.raises(RoutingError, match="top level must be a mapping"):
        load_routes(write(tmp_path, "- a\n- b\n"))


def test_example_routing_file_is_valid() -> None:
    example = Path(__file__).resolve().parents[1] / "deploy" / "routing.example.yaml"
    router = load_routes(example, default="C0DEFAULT")
    assert router.routes, "the example should show at least one route"


def test_serve_refuses_a_bad_routing_file_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "routes:\n  - match: {clutser: a}\n    channel: C1\n")
    env = dict(
        os.environ,
        SLACK_BOT_TOKEN="xoxb-routing-test",
        SLACK_SIGNING_SECRET="signing",
        DENPEX_ROUTING_FILE=str(path),
        PORT="1",
    )
    env.pop("REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--no-worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"denpex: {path}: routes[0].match.clutser: unknown field (expected one of cluster, job_name, user)"
    )
