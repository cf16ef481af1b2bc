"""Prometheus metrics in a registry of our own, a tiny API to record them, and ``GET /metrics``.

Call sites stay one line: ``metrics.job_enqueued("webhook")``. Labels are bounded sets (job
sources, signature ids from the library, Slack method names), never user text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

REGISTRY = CollectorRegistry(auto_describe=True)

JOBS_ENQUEUED = Counter(
    "denpex_jobs_enqueued", "Jobs put on the queue, by source.", ["source"], registry=REGISTRY
)
JOBS_DUPLICATE = Counter(
    "denpex_jobs_duplicate",
    "Jobs refused as already seen, by source.",
    ["source"],
    registry=REGISTRY,
)
JOBS_COMPLETED = Counter(
    "denpex_jobs_completed", "Jobs answered in Slack, by source.", ["source"], registry=REGISTRY
)
JOBS_FAILED = Counter(
    "denpex_jobs_failed", "Job attempts that raised, by source.", ["source"], registry=REGISTRY
)
JOBS_DEAD_LETTERED = Counter(
    "denpex_jobs_dead_lettered",
    "Jobs moved to the dead-letter stream, by source.",
    ["source"],
    registry=REGISTRY,
)
QUEUE_LAG = Gauge(
    "denpex_queue_lag",
    "Entries in the job stream not yet delivered to the worker group.",
    registry=REGISTRY,
)
QUEUE_PENDING = Gauge(
    "denpex_queue_pending",
    "Entries delivered to a worker and not yet acknowledged.",
    registry=REGISTRY,
)
EVENT_TO_POST = Histogram(
    "denpex_event_to_post_seconds",
    "Time from the event (Slack event, webhook) to the diagnosis posted, by source.",
    ["source"],
    buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
DIAGNOSES = Counter(
    "denpex_diagnoses",
    "Diagnoses made, by signature id and status.",
    ["signature", "status"],
    registry=REGISTRY,
)
SLACK_ERRORS = Counter(
    "denpex_slack_api_errors",
    "Slack Web API calls that failed, by method and error.",
    ["method", "error"],
    registry=REGISTRY,
)
SLACK_RETRIES = Counter(
    "denpex_slack_api_retries",
    "Slack Web API calls retried, by reason.",
    ["reason"],
    registry=REGISTRY,
)
WEBHOOK_REQUESTS = Counter(
    "denpex_webhook_requests",
    "Job-failure webhook requests, by HTTP status.",
    ["status"],
    registry=REGISTRY,
)

ALLOWANCE_REFUSALS = Counter(
    "denpex_allowance_refusals",
    "New diagnoses refused because a daily allowance was used, by scope.",
    ["scope"],
    registry=REGISTRY,
)

# Set by the app factory: reads (lag, pending) from Redis when /metrics is scraped.
QueueProbe = Callable[[], Awaitable[tuple[int | None, int | None]]]


def job_enqueued(source: str) -> None:
    """Count a job put on the queue."""
    JOBS_ENQUEUED.labels(source).inc()


def job_duplicate(source: str) -> None:
    """Count a job refused because its dedupe key was seen."""
    JOBS_DUPLICATE.labels(source).inc()


def job_completed(source: str, seconds_since_event: float | None = None) -> None:
    """Count a job answered in Slack, and how long it took since its event."""
    JOBS_COMPLETED.labels(source).inc()
    if seconds_since_event is not None and seconds_since_event >= 0:
        EVENT_TO_POST.labels(source).observe(seconds_since_event)


def job_failed(source: str) -> None:
    """Count a job attempt that raised (it may be retried)."""
    JOBS_FAILED.labels(source).inc()


def job_dead_lettered(source: str) -> None:
    """Count a job moved to the dead-letter stream."""
    JOBS_DEAD_LETTERED.labels(source).inc()


def diagnosis_made(signature: str | None, status: str) -> None:
    """Count a diagnosis by its signature id (``none`` when unrecognized or clean)."""
    DIAGNOSES.labels(signature or "none", status).inc()


def slack_error(method: str, error: str) -> None:
    """Count a failed Slack Web API call (``error`` is Slack's error code or the HTTP status)."""
    SLACK_ERRORS.labels(method, error).inc()


def slack_retry(reason: str) -> None:
    """Count a Slack Web API retry (``rate_limited``, ``server_error``, ``connection``)."""
    SLACK_RETRIES.labels(reason).inc()


def webhook_answered(status: int) -> None:
    """Count a job-failure webhook answer by HTTP status."""
    WEBHOOK_REQUESTS.labels(str(status)).inc()


def allowance_refused(scope: str) -> None:
    """Count a job refused by a daily allowance (``user``, ``channel``, ``webhook_key``)."""
    ALLOWANCE_REFUSALS.labels(scope).inc()


def queue_depth(lag: int | None, pending: int | None) -> None:
    """Record the queue's lag and pending entries (None: unknown, left as it was)."""
    if lag is not None:
        QUEUE_LAG.set(lag)
    if pending is not None:
        QUEUE_PENDING.set(pending)


def render() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)


def make_handler(
    probe: QueueProbe | None = None,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A ``GET /metrics`` handler; ``probe`` refreshes the queue gauges at each scrape."""

    async def metrics(request: web.Request) -> web.Response:
        if probe is not None:
            try:
                queue_depth(*await probe())
            except Exception:  # a Redis outage must not hide the other metrics
                QUEUE_LAG.set(float("nan"))
        response = web.Response(body=render())
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        response.charset = "utf-8"
        return response

    return metrics


def queue_probe(queue: Any) -> QueueProbe:
    """A probe reading lag and pending entries from a ``bot.jobs.queue.JobQueue``."""

    async def probe() -> tuple[int | None, int | None]:
        stats = await queue.stats()
        return stats.get("lag"), stats.get("pending")

    return probe


def mount(app: web.Application, probe: QueueProbe | None = None) -> None:
    """Add ``GET /metrics`` to ``app``."""
    app.router.add_get("/metrics", make_handler(probe))


async def serve_for_worker(
    host: str,
    port: int,
    probe: QueueProbe | None = None,
    alive: Callable[[], bool] = lambda: True,
) -> web.AppRunner:
    """Serve ``/healthz`` (503 once ``alive()`` is False) and ``/metrics`` from a worker process;
    ``cleanup()`` the runner to stop."""

    async def health(request: web.Request) -> web.Response:
        if not alive():
            return web.json_response({"ok": False, "status": "worker stopped"}, status=503)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/healthz", health)
    mount(app, probe)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


class _SlackObserver(AsyncRetryHandler):
    """Counts failed Slack calls; never asks for a retry itself (it runs before the real ones)."""

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        method = request.url.rstrip("/").rsplit("/", 1)[-1] or "unknown"
        if error is not None:
            slack_error(method, type(error).__name__)
        elif response is not None:
            body = response.body if isinstance(response.body, dict) else {}
            if response.status_code >= 400:
                slack_error(method, f"http_{response.status_code}")
            elif body.get("ok") is False:
                slack_error(method, str(body.get("error", "unknown"))[:64])
        return False


# By class, so subclasses (bot.slack.reply's post-aware handlers) count under their kind.
_RETRY_REASONS: tuple[tuple[type[AsyncRetryHandler], str], ...] = (
    (AsyncRateLimitErrorRetryHandler, "rate_limited"),
    (AsyncServerErrorRetryHandler, "server_error"),
    (AsyncConnectionErrorRetryHandler, "connection"),
)


def observe_slack_client(client: Any) -> Any:
    """Count a Slack client's failed calls and its retries (by the retry handler that retried)."""
    handlers = [h for h in client.retry_handlers if not isinstance(h, _SlackObserver)]
    for handler in handlers:
        reason = next((r for kind, r in _RETRY_REASONS if isinstance(handler, kind)), type(handler).__name__)
        if getattr(handler, "_denpex_counted", False):
            continue
        original = handler.prepare_for_next_attempt_async

        async def prepare(*args: Any, _original: Any = original, _reason: str = reason, **kw: Any) -> None:
            slack_retry(_reason)
            await _original(*args, **kw)

        handler.prepare_for_next_attempt_async = prepare
        handler._denpex_counted = True
    client.retry_handlers = [_SlackObserver(max_retry_count=0), *handlers]
    return client
