"""Every setting, read once from the environment into one frozen dataclass.

This is the only module that reads ``os.environ``. Every missing or malformed setting is named
in one ``SettingsError``, so start-up stops with one clear message instead of a traceback, and an
operator fixes them all in one pass.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TypeVar
from urllib.parse import urlparse

T = TypeVar("T")

NONE: tuple[str, ...] = ()

SECRET_FIELDS = frozenset(
    {
        "slack_bot_token",
        "slack_signing_secret",
        "slack_app_token",
        "webhook_secret",
        "redis_url",
        "report_secret",
        "llm_api_key",
    }
)
MIN_REPORT_SECRET = 32  # characters; a short HMAC key would make report links guessable


class SettingsError(Exception):
    """Settings are missing or malformed; the message names each of them."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems or (message,)


# While settings are read, problems are collected here instead of raised one at a time.
_problems: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "settings_problems", default=None
)


def _problem(message: str, default: T) -> T:
    collected = _problems.get()
    if collected is None:
        raise SettingsError(message)
    collected.append(message)
    return default


@dataclass(frozen=True)
class Settings:
    slack_bot_token: str = field(repr=False)
    slack_signing_secret: str = field(repr=False)
    slack_api_url: str = "https://slack.com/api/"
    slack_app_token: str | None = field(default=None, repr=False)
    redis_url: str | None = field(default=None, repr=False)
    host: str = "0.0.0.0"
    port: int = 3000
    channel_allowlist: frozenset[str] = frozenset()  # empty: every channel the bot is in
    max_log_bytes: int = 200 * 1024 * 1024
    job_timeout_s: float = 120.0
    webhook_secret: str | None = field(default=None, repr=False)
    default_channel: str | None = None
    routing_file: str | None = None
    log_url_allowlist: tuple[str, ...] = ()
    webhook_rate: float = 5.0  # requests per second per source
    webhook_burst: int = 20  # requests a source may send at once before the rate applies
    webhook_max_bytes: int = 32 * 1024 * 1024  # largest webhook body (an inline log)
    retention_days: int = 30
    workers: int = 1
    public_url: str | None = None  # where people reach `denpex serve`; report links start here
    report_secret: str | None = field(default=None, repr=False)  # signs report links
    report_link_days: int = 7  # how long a report link opens its page
    # The optional model for free-form follow-ups (off unless both are set).
    llm_url: str | None = None  # an OpenAI-compatible base URL, e.g. http://vllm:8000/v1
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout_s: float = 20.0
    llm_max_lines: int = 40  # log lines the model may see per question
    llm_daily_per_channel: int = 50  # model answers per channel per UTC day; 0: no limit
    # Connections one process opens to Redis at most; past it, callers wait up to the pool
    # timeout for a free one instead of failing (a burst of webhooks, many jobs at once).
    redis_max_connections: int = 200
    redis_pool_timeout_s: float = 2.0
    dead_letter_days: int = 14  # dead-lettered jobs (redacted) are deleted after this
    slack_timeout_s: float = 30.0  # one Slack Web API call
    # New diagnoses per UTC day; 0: unlimited.
    allowance_user: int = 200
    allowance_channel: int = 500
    allowance_webhook_key: int = 2000

    @property
    def model_enabled(self) -> bool:
        """Whether free-form follow-ups go to a model (both the URL and the model name set)."""
        return bool(self.llm_url and self.llm_model)

    @property
    def socket_mode(self) -> bool:
        """Socket Mode when an app-level token is set; HTTP otherwise."""
        return bool(self.slack_app_token)

    def channel_allowed(self, channel: str | None) -> bool:
        """True when files dropped in ``channel`` should be diagnosed."""
        return not self.channel_allowlist or (channel or "") in self.channel_allowlist

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS:
                value = "***" if value else None
            shown.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(shown)})"


def _parse(env: Mapping[str, str], name: str, convert: Callable[[str], T], default: T) -> T:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return convert(raw)
    except (ValueError, TypeError) as exc:
        return _problem(f"{name} is malformed: {exc}", default)


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        return _problem(f"{name} is missing: set it in the environment", "")
    return value


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {raw!r}")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError(f"expected a positive number, got {raw!r}")
    return value


def _count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(f"expected 0 (unlimited) or a positive integer, got {raw!r}")
    return value


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 < value < 65536:
        raise ValueError(f"expected a port between 1 and 65535, got {raw!r}")
    return value


def _http_url(raw: str) -> str:
    parsed = urlparse(raw)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"expected an http(s) URL, got {raw!r}")
    return raw if raw.endswith("/") else raw + "/"


def _redis_url(raw: str) -> str:
    if urlparse(raw).scheme not in ("redis", "rediss", "unix"):
        raise ValueError("expected a redis://, rediss:// or unix:// URL")
    return raw


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _prefixed(prefix: str, name: str, value: str) -> str:
    if value and not value.startswith(prefix):
        return _problem(f"{name} is malformed: expected a token starting with {prefix!r}", value)
    return value


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read every setting from ``env`` (default: ``os.environ``); one ``SettingsError`` names
    every missing or malformed one."""
    collected: list[str] = []
    token = _problems.set(collected)
    try:
        settings = _read_settings(os.environ if env is None else env)
    finally:
        _problems.reset(token)
    if len(collected) == 1:
        raise SettingsError(collected[0])
    if collected:
        lines = "\n".join(f"  - {p}" for p in collected)
        raise SettingsError(f"{len(collected)} settings need fixing:\n{lines}", tuple(collected))
    return settings


def _read_settings(env: Mapping[str, str]) -> Settings:
    app_token = env.get("SLACK_APP_TOKEN", "").strip() or None
    public_url = _parse(env, "DENPEX_PUBLIC_URL", _http_url, None)
    return Settings(
        slack_bot_token=_prefixed("xoxb-", "SLACK_BOT_TOKEN", _required(env, "SLACK_BOT_TOKEN")),
        # Socket Mode needs no signing secret (Slack signs nothing on the socket).
        slack_signing_secret=(
            env.get("SLACK_SIGNING_SECRET", "").strip()
            if app_token
            else _required(env, "SLACK_SIGNING_SECRET")
        ),
        slack_api_url=_parse(env, "SLACK_API_URL", _http_url, "https://slack.com/api/"),
        slack_app_token=_prefixed("xapp-", "SLACK_APP_TOKEN", app_token) if app_token else None,
        redis_url=_parse(env, "REDIS_URL", _redis_url, None),
        host=env.get("HOST", "").strip() or "0.0.0.0",
        port=_parse(env, "PORT", _port, 3000),
        channel_allowlist=frozenset(_parse(env, "DENPEX_CHANNEL_ALLOWLIST", _csv, NONE)),
        max_log_bytes=_parse(env, "DENPEX_MAX_LOG_BYTES", _positive_int, 200 * 1024 * 1024),
        job_timeout_s=_parse(env, "DENPEX_JOB_TIMEOUT_S", _positive_float, 120.0),
        webhook_secret=env.get("DENPEX_WEBHOOK_SECRET", "").strip() or None,
        default_channel=env.get("DENPEX_DEFAULT_CHANNEL", "").strip() or None,
        routing_file=env.get("DENPEX_ROUTING_FILE", "").strip() or None,
        log_url_allowlist=_parse(env, "DENPEX_LOG_URL_ALLOWLIST", _csv, NONE),
        webhook_rate=_parse(env, "DENPEX_WEBHOOK_RATE", _positive_float, 5.0),
        webhook_burst=_parse(env, "DENPEX_WEBHOOK_BURST", _positive_int, 20),
        webhook_max_bytes=_parse(env, "DENPEX_WEBHOOK_MAX_BYTES", _positive_int, 32 * 1024 * 1024),
        retention_days=_parse(env, "DENPEX_RETENTION_DAYS", _positive_int, 30),
        workers=_parse(env, "DENPEX_WORKERS", _positive_int, 1),
        public_url=public_url,
        report_secret=_report_secret(env.get("DENPEX_REPORT_SECRET", "").strip(), public_url),
        report_link_days=_parse(env, "DENPEX_REPORT_LINK_DAYS", _positive_int, 7),
        llm_url=_parse(env, "DENPEX_LLM_URL", _http_url, None),
        llm_model=env.get("DENPEX_LLM_MODEL", "").strip() or None,
        llm_api_key=env.get("DENPEX_LLM_API_KEY", "").strip() or None,
        llm_timeout_s=_parse(env, "DENPEX_LLM_TIMEOUT_S", _positive_float, 20.0),
        llm_max_lines=_parse(env, "DENPEX_LLM_MAX_LINES", _positive_int, 40),
        llm_daily_per_channel=_parse(env, "DENPEX_LLM_DAILY_PER_CHANNEL", _count, 50),
        redis_max_connections=_parse(env, "DENPEX_REDIS_MAX_CONNECTIONS", _positive_int, 200),
        redis_pool_timeout_s=_parse(env, "DENPEX_REDIS_POOL_TIMEOUT_S", _positive_float, 2.0),
        dead_letter_days=_parse(env, "DENPEX_DEAD_LETTER_DAYS", _positive_int, 14),
        slack_timeout_s=_parse(env, "DENPEX_SLACK_TIMEOUT_S", _positive_float, 30.0),
        allowance_user=_parse(env, "DENPEX_ALLOWANCE_USER", _count, 200),
        allowance_channel=_parse(env, "DENPEX_ALLOWANCE_CHANNEL", _count, 500),
        allowance_webhook_key=_parse(env, "DENPEX_ALLOWANCE_WEBHOOK_KEY", _count, 2000),
    )


def _report_secret(value: str, public_url: str | None) -> str | None:
    # Links in Slack without a key to check them would all answer 403: refuse to start instead.
    if not value:
        if public_url:
            raise SettingsError(
                "DENPEX_REPORT_SECRET is missing: DENPEX_PUBLIC_URL is set, and report links are signed "
                "with it"
            )
        return None
    if len(value) < MIN_REPORT_SECRET:
        raise SettingsError(
            f"DENPEX_REPORT_SECRET is malformed: use at least {MIN_REPORT_SECRET} characters "
            "(openssl rand -hex 32)"
        )
    return value


def load_redis_url(env: Mapping[str, str] | None = None) -> str | None:
    """Only ``REDIS_URL`` (for commands that need no Slack tokens); None: in-process Redis."""
    env = os.environ if env is None else env
    return _parse(env, "REDIS_URL", _redis_url, None)
