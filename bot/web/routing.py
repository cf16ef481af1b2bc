"""Where a failed job's report goes (a YAML file of glob rules, first match wins), and the
wiring of the webhook route that uses it.

```yaml
default: C0DEFAULT          # optional; else DENPEX_DEFAULT_CHANNEL
routes:
  - match: {cluster: "prod-*", job_name: "llama-*"}
    channel: C0LLAMA
  - match: {user: alice}
    channel: C0ALICE
```

Every key under ``match`` must match (``fnmatch`` globs, case-sensitive); a missing field in the
report never matches a pattern.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from bot.fetch.remote import RemoteLogError, fetcher_from_settings
from bot.jobs.keys import Keys
from bot.ops.settings import Settings, SettingsError
from bot.web.admission import count_answer
from handlers import webhook
from handlers.webhook import DEFAULT_KEY_ID, TokenBucket, WebhookConfig

MATCH_KEYS = ("cluster", "job_name", "user")
RATE_PREFIX = f"{Keys().prefix}:webhook:rate"  # one bucket per sender under it


class RoutingError(SettingsError):
    """The routing file is unreadable or invalid; the message lists every problem."""


@dataclass(frozen=True)
class Route:
    match: Mapping[str, str]
    channel: str

    def matches(self, facts: Mapping[str, str | None]) -> bool:
        """True when every pattern matches its field of the report."""
        for key, pattern in self.match.items():
            value = facts.get(key)
            if value is None or not fnmatchcase(value, pattern):
                return False
        return True


@dataclass(frozen=True)
class Router:
    routes: tuple[Route, ...] = ()
    default: str | None = None
    problems: tuple[str, ...] = field(default=(), repr=False)

    def channel_for(
        self, *, cluster: str | None = None, job_name: str | None = None, user: str | None = None
    ) -> str | None:
        """The channel of the first matching route, else the default (None: nowhere to post)."""
        facts = {"cluster": cluster, "job_name": job_name, "user": user}
        for route in self.routes:
            if route.matches(facts):
                return route.channel
        return self.default


def parse_routes(data: Any, *, source: str, default: str | None = None) -> Router:
    """Validate loaded YAML into a Router, reporting every problem at once."""
    problems: list[str] = []
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RoutingError(f"{source}: the top level must be a mapping with 'routes'")
    for key in data:
        if key not in ("default", "routes"):
            problems.append(f"{source}: unknown key {key!r} (expected 'default', 'routes')")
    file_default = data.get("default")
    if file_default is not None and not _is_channel(file_default):
        problems.append(f"{source}: default: must be a non-empty channel id or name")
    raw_routes = data.get("routes", [])
    if not isinstance(raw_routes, list):
        problems.append(f"{source}: routes: must be a list")
        raw_routes = []
    routes = [
        r for i, item in enumerate(raw_routes) if (r := _route(item, f"{source}: routes[{i}]", problems))
    ]
    if problems:
        raise RoutingError("\n".join(problems))
    return Router(tuple(routes), default=file_default or default)


def load_routes(path: str | Path | None, *, default: str | None = None) -> Router:
    """Read the routing file (None: only the default channel)."""
    if not path:
        return Router(default=default)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RoutingError(f"{path}: cannot read the routing file ({exc.strerror})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RoutingError(f"{path}: not valid YAML ({exc})") from exc
    return parse_routes(data, source=str(path), default=default)


def _route(item: Any, where: str, problems: list[str]) -> Route | None:
    if not isinstance(item, dict):
        problems.append(f"{where}: must be a mapping with 'match' and 'channel'")
        return None
    before = len(problems)
    for key in item:
        if key not in ("match", "channel"):
            problems.append(f"{where}: unknown key {key!r} (expected 'match', 'channel')")
    channel = item.get("channel")
    if not _is_channel(channel):
        problems.append(f"{where}.channel: must be a non-empty channel id or name")
    match = item.get("match")
    if not isinstance(match, dict) or not match:
        problems.append(f"{where}.match: must be a non-empty mapping of {', '.join(MATCH_KEYS)}")
        match = {}
    for key, pattern in match.items():
        if key not in MATCH_KEYS:
            problems.append(f"{where}.match.{key}: unknown field (expected one of {', '.join(MATCH_KEYS)})")
        elif not isinstance(pattern, str) or not pattern:
            problems.append(f"{where}.match.{key}: must be a non-empty glob string")
    if len(problems) > before:
        return None
    return Route(match=dict(match), channel=str(channel))


def _is_channel(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def mount_webhook(app: web.Application, settings: Settings, *, queue: Any, redis: Any) -> None:
    """Register ``POST /webhooks/job-failure`` with its routes, log-URL check and rate limit."""
    router = load_routes(settings.routing_file, default=settings.default_channel)
    fetcher = fetcher_from_settings(settings)

    def check_log_url(url: str) -> None:
        try:
            fetcher.check(url)
        except RemoteLogError as exc:
            raise ValueError(str(exc)) from None

    config = WebhookConfig(
        secrets={DEFAULT_KEY_ID: settings.webhook_secret} if settings.webhook_secret else {},
        max_body_bytes=settings.webhook_max_bytes,
        route=lambda cluster, job_name, user: router.channel_for(
            cluster=cluster, job_name=job_name, user=user
        ),
        check_log_url=check_log_url,
        on_answer=count_answer,
    )
    limiter = TokenBucket(redis, rate=settings.webhook_rate, burst=settings.webhook_burst, prefix=RATE_PREFIX)
    webhook.register(app, queue=queue, config=config, limiter=limiter)
