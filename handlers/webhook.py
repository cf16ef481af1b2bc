"""``POST /webhooks/job-failure``: a job scheduler reports a failed job; we check it and enqueue it.

Authentication: ``X-Denpex-Timestamp`` (Unix seconds) and ``X-Denpex-Signature: v1=<hex>``, the
HMAC-SHA256 of ``v1:{timestamp}:{raw body}`` with the shared secret. Timestamps more than five
minutes away are refused, so a captured request cannot be replayed later. The body is JSON; see
docs/webhooks.md. The job's ``job_id`` is the idempotency key: a second report of the same id is
answered 202 with ``duplicate: true`` and is neither diagnosed nor posted again.

Hostile input is refused before work is spent on it: malformed authentication headers are 401
before the body is read; a body nesting past 32 levels or holding an integer past 18 digits is
400. When Redis (the rate limiter, the queue) fails or is busy, the answer is 503 with
``Retry-After``, never 500. The inline log is redacted before it is queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

from aiohttp import web

from handlers import bounded_json
from handlers.jobs import Job, LogRef
from handlers.rate_limit import LimiterUnavailable, TokenBucket
from signatures.diagnosis import Diagnosis
from signatures.redact import redact

__all__ = ["LimiterUnavailable", "TokenBucket", "WebhookConfig", "register", "sign"]

log = logging.getLogger(__name__)

PATH = "/webhooks/job-failure"
TIMESTAMP_HEADER = "X-Denpex-Timestamp"
SIGNATURE_HEADER = "X-Denpex-Signature"
KEY_ID_HEADER = "X-Denpex-Key-Id"
DEFAULT_KEY_ID = "default"
MAX_SKEW_S = 300
JOB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}")
SHORT_FIELDS = ("job_name", "cluster", "user", "status", "channel", "started_at", "ended_at")
SHORT_MAX = 200
# Unix seconds have 10 digits until 2286; 12 allow any real clock and keep int() cheap.
MAX_TIMESTAMP_DIGITS = 12
# Up to 8 comma-separated "v1=<64 hex>" values while secrets rotate.
MAX_SIGNATURE_CHARS = 8 * 68
MAX_KEY_ID_CHARS = 64
# A report is 2-3 levels deep (a diagnosis 4-5); integers are exit codes and line numbers.
MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 18
# What a sender is told to wait when Redis (the rate limiter, the queue) cannot be reached.
REDIS_RETRY_AFTER_S = 5


class Enqueuer(Protocol):
    async def enqueue(self, job: Job) -> bool: ...


class Limiter(Protocol):
    async def allow(self, sender: str) -> bool:
        """True to let ``sender`` in; raises ``LimiterUnavailable`` when it cannot tell."""
        ...


@dataclass(frozen=True)
class WebhookConfig:
    """What the endpoint needs from the settings; built by the app factory."""

    secrets: Mapping[str, str]  # key id -> shared secret; empty: the endpoint answers 503
    max_body_bytes: int
    # (cluster, job_name, user) -> channel, or None when nothing matches and there is no default.
    route: Callable[[str | None, str | None, str | None], str | None]
    # Raises ValueError with a user-facing reason when a log_url may not be fetched.
    check_log_url: Callable[[str], object] | None = None
    # Told each answer's status (for metrics); must not raise.
    on_answer: Callable[[int], None] | None = None
    clock: Callable[[], float] = field(default=time.time)
    # Requests of this endpoint talking to Redis at once; the rest wait their turn (up to
    # ``redis_wait_s``, then 503), so a burst of reports cannot empty the shared connection pool.
    redis_concurrency: int = 16
    redis_wait_s: float = 10.0


class BadRequest(Exception):
    """A field of the report is wrong; the message names it."""


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The ``X-Denpex-Signature`` value for ``body`` sent at ``timestamp``."""
    message = b"v1:" + str(timestamp).encode() + b":" + body
    return "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_valid(secret: str, timestamp: str, body: bytes, header: str) -> bool:
    """True when one of the header's ``v1=`` values is the body's signature (constant time)."""
    expected = sign(secret, timestamp, body).encode()
    found = False
    # Several values may be sent while a secret is rotated; compare each without short-circuit.
    for candidate in header.split(","):
        found |= hmac.compare_digest(expected, candidate.strip().encode())
    return found


def register(app: web.Application, *, queue: Enqueuer, config: WebhookConfig, limiter: Limiter) -> None:
    """Mount ``POST /webhooks/job-failure`` on ``app``."""
    app.router.add_post(PATH, _handler(queue, config, limiter))


def _handler(queue: Enqueuer, config: WebhookConfig, limiter: Limiter) -> Callable[[web.Request], Any]:
    redis_slots = asyncio.Semaphore(config.redis_concurrency)

    @contextlib.asynccontextmanager
    async def redis_turn() -> AsyncIterator[None]:
        async with asyncio.timeout(config.redis_wait_s):
            await redis_slots.acquire()
        try:
            yield
        finally:
            redis_slots.release()

    async def job_failure(request: web.Request) -> web.Response:
        response = await answer(request)
        if config.on_answer is not None:
            config.on_answer(response.status)
        return response

    async def answer(request: web.Request) -> web.Response:
        if not config.secrets:
            return _error(503, "the webhook is disabled: DENPEX_WEBHOOK_SECRET is not set")
        # Headers first: a malformed or stale request costs no body read and no parsing.
        refusal = _check_headers(request, config)
        if refusal:
            log.info("webhook refused: %s", refusal)
            return _error(401, refusal)
        declared = request.content_length
        if declared is not None and declared > config.max_body_bytes:
            return _error(413, f"body larger than {config.max_body_bytes} bytes")
        body = await _read_body(request, config.max_body_bytes)
        if body is None:
            return _error(413, f"body larger than {config.max_body_bytes} bytes")
        key_id = request.headers.get(KEY_ID_HEADER, DEFAULT_KEY_ID)
        if not _signed(request, body, config, key_id):
            log.info("webhook refused: bad signature")
            return _error(401, "bad signature")
        try:
            async with redis_turn():
                allowed = await limiter.allow(f"{key_id}@{request.remote or 'unknown'}")
        except (LimiterUnavailable, TimeoutError) as exc:
            log.warning("webhook rate limit not checked: %s", _why(exc))
            return _error(
                503, "the server is busy or Redis is away; retry later", retry_after=REDIS_RETRY_AFTER_S
            )
        if not allowed:
            wait = getattr(limiter, "retry_after_s", 1)
            return _error(429, "too many reports from this sender; slow down", retry_after=wait)
        try:
            # Parsing a body of up to 32 MiB and redacting its log take a while: not on the event loop.
            job, job_id = await asyncio.to_thread(_job_from_body, body, config)
        except BadRequest as exc:
            return _error(400, str(exc))
        try:
            async with redis_turn():
                fresh = await queue.enqueue(job)
        except Exception as exc:  # a full queue, Redis away, or no turn in time: retry later
            log.warning("webhook job %s not queued: %s", job_id, _why(exc), extra={"job_id": job.id})
            return _error(503, "the report could not be queued; retry later", retry_after=REDIS_RETRY_AFTER_S)
        state = "enqueued" if fresh else "duplicate"
        log.info("webhook job %s %s", job_id, state, extra={"job_id": job.id})
        return web.json_response({"job": job_id, "duplicate": not fresh}, status=202)

    return job_failure


async def _read_body(request: web.Request, limit: int) -> bytes | None:
    """The raw body, or None past ``limit`` (a lying or absent Content-Length is not trusted)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _check_headers(request: web.Request, config: WebhookConfig) -> str | None:
    """Why the authentication headers are refused (401), or None: shape and clock only."""
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not timestamp or not signature:
        return f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}"
    # str.isdigit() accepts '²' and '١٢٣', and int() of a long string is slow: ASCII, bounded.
    if not (len(timestamp) <= MAX_TIMESTAMP_DIGITS and timestamp.isascii() and timestamp.isdigit()):
        return f"{TIMESTAMP_HEADER} must be Unix seconds: 1 to {MAX_TIMESTAMP_DIGITS} ASCII digits"
    if abs(config.clock() - int(timestamp)) > MAX_SKEW_S:
        return f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_S // 60} minutes from the server's clock"
    if len(signature) > MAX_SIGNATURE_CHARS or not signature.isascii():
        return f"{SIGNATURE_HEADER} is malformed: at most 8 comma-separated v1=<hex> values"
    return None


def _signed(request: web.Request, body: bytes, config: WebhookConfig, key_id: str) -> bool:
    secret = config.secrets.get(key_id) if len(key_id) <= MAX_KEY_ID_CHARS else None
    timestamp = request.headers[TIMESTAMP_HEADER]
    return secret is not None and signature_valid(secret, timestamp, body, request.headers[SIGNATURE_HEADER])


def _job_from_body(body: bytes, config: WebhookConfig) -> tuple[Job, str]:
    try:
        data = bounded_json.loads(body, max_depth=MAX_JSON_DEPTH, max_int_digits=MAX_INT_DIGITS)
    except bounded_json.JSONBoundsError as exc:
        raise BadRequest(str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"body is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise BadRequest("body must be a JSON object")
    job_id = data.get("job_id")
    if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):
        raise BadRequest("job_id is required: 1-200 characters of letters, digits and ._:@/+=-")
    raw = {name: _short(data, name) for name in SHORT_FIELDS}
    # Routing sees the values as sent (a user may be an e-mail); what is stored and shown is redacted.
    short = {name: redact(value) if value else None for name, value in raw.items()}
    exit_code = data.get("exit_code")
    if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
        raise BadRequest("exit_code must be an integer")
    links = _links(data.get("links"))
    logs = _logs(data, short["job_name"] or job_id, config)
    precomputed = _diagnosis(data.get("diagnosis"))
    if not logs and precomputed is None:
        raise BadRequest("one of log, log_url or diagnosis is required")
    channel = raw["channel"] or config.route(raw["cluster"], raw["job_name"], raw["user"])
    if not channel:
        raise BadRequest("channel: none given, no route matches and no default channel is set")
    meta = {"job_id": job_id} | {k: v for k, v in short.items() if v and k != "channel"}
    if exit_code is not None:
        meta["exit_code"] = str(exit_code)
    meta |= {f"link:{label}": url for label, url in links.items()}
    job = Job(
        source="webhook",
        dedupe_key=f"webhook:{job_id}",
        channel=channel,
        thread_ts=None,
        logs=logs,
        user=None,
        response_url=None,
        header=_header(job_id, short["job_name"], short["cluster"], exit_code, short["status"]),
        meta=meta,
        precomputed=precomputed,
    )
    return job, job_id


def _short(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > SHORT_MAX:
        raise BadRequest(f"{name} must be a string of at most {SHORT_MAX} characters")
    return value.strip() or None


def _links(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > 10:
        raise BadRequest("links must be an object of at most 10 {label: http(s) URL}")
    links: dict[str, str] = {}
    for label, url in value.items():
        if not isinstance(url, str) or urlparse(url).scheme not in ("http", "https") or len(url) > 2000:
            raise BadRequest(f"links.{label} must be an http(s) URL")
        links[str(label)[:SHORT_MAX]] = redact(url)
    return links


def _logs(data: dict[str, Any], label: str, config: WebhookConfig) -> list[LogRef]:
    logs: list[LogRef] = []
    text = data.get("log")
    if text is not None:
        if not isinstance(text, str):
            raise BadRequest("log must be a string (the log's text)")
        if text:
            text = redact(text)  # the queue (Redis) holds no secret
            size = len(text.encode("utf-8", "surrogatepass"))
            logs.append(
                LogRef(kind="inline", name=f"{label}.log", file_id=None, url=None, size=size, text=text)
            )
    url = data.get("log_url")
    if url is not None:
        if not isinstance(url, str) or not url:
            raise BadRequest("log_url must be a URL string")
        if config.check_log_url is not None:
            try:
                config.check_log_url(url)
            except ValueError as exc:
                raise BadRequest(f"log_url: {exc}") from None
        name = urlparse(url).path.rsplit("/", 1)[-1] or f"{label}.log"
        logs.append(LogRef(kind="url", name=name, file_id=None, url=url, size=None, text=None))
    return logs


def _diagnosis(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest("diagnosis must be an object (Diagnosis.to_dict())")
    try:
        Diagnosis.from_dict(value)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise BadRequest(f"diagnosis is not a valid Diagnosis ({exc.__class__.__name__}: {exc})") from None
    # The sender's engine redacted it; redact again here, because this text came from outside.
    redacted: dict[str, Any] = _redact_all(value)
    return redacted


def _redact_all(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_all(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_all(v) for k, v in value.items()}
    return value


def _header(
    job_id: str,
    job_name: str | None,
    cluster: str | None,
    exit_code: int | None,
    status: str | None,
) -> str:
    parts = [f"Job {job_name or job_id}"]
    if job_name:
        parts.append(f"({job_id})")
    parts.append(f"{status or 'failed'}")
    if cluster:
        parts.append(f"on {cluster}")
    if exit_code is not None:
        parts.append(f"with exit code {exit_code}")
    return " ".join(parts)


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__  # a TimeoutError has no message


def _error(status: int, reason: str, *, retry_after: int | None = None) -> web.Response:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return web.json_response({"error": reason}, status=status, headers=headers)
