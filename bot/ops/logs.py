"""Structured JSON logs: one object per line, the current job id on each, no secrets in any.

``bind_job(job_id)`` sets the job id for everything logged inside it (a contextvar, so each
asyncio task keeps its own). A filter runs every record through ``signatures.redact`` and
replaces the values of the secret settings, so a token pasted into a log line or an exception
message never reaches the log stream.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from signatures.redact import MASK, redact

job_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("denpex_job_id", default=None)

# A log line is about what happened, not what a training log said; keep records short so a log
# body passed by mistake is cut, not shipped whole.
MAX_MESSAGE_CHARS = 2000
# Attributes every LogRecord has; anything else was passed with ``extra=`` and is kept.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_SECRET_NAMES = ("token", "secret", "password", "authorization", "signature")


@contextlib.contextmanager
def bind_job(job_id: str | None) -> Iterator[None]:
    """Tag every log record inside the block with ``job_id``."""
    token = job_id_var.set(job_id)
    try:
        yield
    finally:
        job_id_var.reset(token)


class RedactingFilter(logging.Filter):
    """Redact secrets from a record's message, extras and traceback; add the job id."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        super().__init__()
        # Longest first, so a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def clean(self, text: str) -> str:
        """``text`` with the known secrets and anything secret-looking masked."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return redact(text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + " [truncated]"
        record.msg = self.clean(message)
        record.args = None
        if record.exc_info:
            formatter = logging.Formatter()
            record.exc_text = self.clean(formatter.formatException(record.exc_info))
            record.exc_info = None
        for key, value in list(vars(record).items()):
            if key in _STANDARD or key.startswith("_"):
                continue
            if any(name in key.lower() for name in _SECRET_NAMES):
                setattr(record, key, MASK)
            elif isinstance(value, str):
                setattr(record, key, self.clean(value))
        if not getattr(record, "job_id", None):
            record.job_id = job_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, job id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "job_id": getattr(record, "job_id", None) or job_id_var.get(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out and not key.startswith("_"):
                out[key] = value if isinstance(value, int | float | bool | type(None)) else str(value)
        if record.exc_text:
            out["traceback"] = record.exc_text
        elif record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def secrets_of(settings: Any) -> list[str]:
    """The values of the secret settings: tokens, signing and webhook secrets, Redis password."""
    from urllib.parse import urlparse

    values = [
        getattr(settings, name, None)
        for name in ("slack_bot_token", "slack_signing_secret", "slack_app_token", "webhook_secret")
    ]
    redis_url = getattr(settings, "redis_url", None)
    if redis_url:
        with contextlib.suppress(ValueError):
            values.append(urlparse(redis_url).password)
    return [v for v in values if v]


def configure_logging(
    level: str | int = "INFO", *, secrets: Iterable[str | None] = (), stream: TextIO | None = None
) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as redacted JSON; return the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_denpex", False)]:
        root.removeHandler(old)
    handler._denpex = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def configure_from_settings(settings: Any, level: str | int = "INFO") -> logging.Handler:
    """JSON logs to stderr with every secret setting's value masked (``denpex serve``/``worker``)."""
    return configure_logging(level, secrets=secrets_of(settings))
