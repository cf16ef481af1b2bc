"""The app factory: one aiohttp application with Slack's endpoint, the webhook, health, metrics
and (unless disabled) the workers, all in one process.

This is the composition root: it builds the Redis client, the queue, the store, the Slack client
and the worker, and hands the handlers only what they need (plain callables), so ``handlers/``
never imports ``bot/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.jobs import connection as redis_conn
from bot.jobs.allowance import AllowanceCounter, AllowanceExceeded, Allowances
from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue, QueueFull
from bot.jobs.store import Store
from bot.jobs.worker import Worker
from bot.kinds.registry import build_worker
from bot.ops import metrics
from bot.ops.settings import Settings
from bot.slack.reply import make_client
from bot.slack.thread import ThreadEvidence, ThreadReplier
from bot.web.admission import AllowanceQueue, admission_middleware, tell_refused
from bot.web.jobs_api import mount_jobs_api
from bot.web.outage import RETRY_AFTER_S, bolt_unavailable, outage_middleware
from bot.web.reports import mount_reports
from bot.web.routing import mount_webhook
from handlers import actions, messages, slash
from handlers.files import FileIntake
from handlers.jobs import Job

log = logging.getLogger(__name__)

SLACK_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
# Slack bodies are small; webhooks may carry an inline log (the webhook route checks its own cap).
CLIENT_MAX_SIZE = 64 * 1024 * 1024
CLAIM_TTL_S = 24 * 3600
RUNTIME: web.AppKey[Runtime] = web.AppKey("denpex_runtime")


@dataclass
class Runtime:
    """What the running app holds: clients, queue, store, worker, and the worker tasks."""

    settings: Settings
    redis: aioredis.Redis
    client: AsyncWebClient
    queue: JobQueue
    store: Store
    evidence: ThreadEvidence
    worker: Worker
    bolt: AsyncApp
    admission: AllowanceQueue
    own_redis: bool = False
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ready: bool = False

    async def enqueue(self, job: Job) -> bool:
        """Queue a job once per dedupe key, within the daily allowances (``AllowanceExceeded``)."""
        return await self.admission.enqueue(job)

    async def claim(self, key: str) -> bool:
        """SET NX on a fact (a file id): True for the first caller only, for a day."""
        marker = self.store.keys.dedupe(f"claim:{key}")
        return bool(await self.redis.set(marker, "1", nx=True, ex=CLAIM_TTL_S))

    async def release(self, key: str) -> None:
        """Undo a claim whose job could not be queued."""
        await self.redis.delete(self.store.keys.dedupe(f"claim:{key}"))

    async def is_diagnosis_thread(self, channel: str, thread_ts: str) -> bool:
        """True when Denpex answered a diagnosis in this thread."""
        return bool(await self.redis.exists(self.store.keys.thread(channel, thread_ts)))


async def _tell_not_queued(client: AsyncWebClient, job: Job, exc: Exception) -> None:
    reason = str(exc) if isinstance(exc, QueueFull) else "the job queue (Redis) is unreachable"
    text = f"I could not start on this: {reason}. Nothing was lost on your side; try again in a minute."
    log.warning("job not queued", extra={"source": job.source, "reason": type(exc).__name__})
    with contextlib.suppress(Exception):  # Slack may be the next thing down; the log line stays
        if job.channel:
            await client.chat_postMessage(channel=job.channel, thread_ts=job.thread_ts, text=text)
        elif job.response_url:
            await AsyncWebhookClient(job.response_url).send(text=text, response_type="ephemeral")


class _QuietTokenNotice(logging.Filter):
    """Drops Bolt's "token will be unused" notice: we pass a ready client on purpose, and Bolt
    also reads SLACK_BOT_TOKEN from the environment, so it would greet every start with it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def build_bolt(
    settings: Settings,
    client: AsyncWebClient,
    *,
    enqueue: Callable[[Job], Awaitable[bool]],
    is_diagnosis_thread: Callable[[str, str], Awaitable[bool]],
    claim: Callable[[str], Awaitable[bool]],
    release: Callable[[str], Awaitable[None]],
    process_before_response: bool = False,
) -> AsyncApp:
    """The Bolt app with every listener Denpex has (the manifest is checked against these)."""
    bolt_log = logging.getLogger("slack_bolt")
    if not any(isinstance(f, _QuietTokenNotice) for f in bolt_log.filters):
        bolt_log.addFilter(_QuietTokenNotice())
    bolt = AsyncApp(
        client=client,
        signing_secret=settings.slack_signing_secret or None,
        process_before_response=process_before_response,
        # Socket Mode carries no signature; HTTP requests are always verified.
        request_verification_enabled=not settings.socket_mode,
        logger=bolt_log,
    )

    @bolt.middleware
    async def count_retries(req: Any, resp: BoltResponse, next: Callable[[], Any]) -> Any:
        # Bolt ignores Slack's retry headers; the dedupe keys make retries harmless. Count them.
        reason = req.headers.get("x-slack-retry-reason", [None])[0]
        if reason:
            metrics.slack_retry(str(reason))
        return await next()

    @bolt.error
    async def on_error(
        error: Exception, body: dict[str, Any], response: BoltResponse | None
    ) -> BoltResponse | None:
        # Answered before the listener ran (process_before_response): an outage becomes 503
        # with Retry-After, so Slack retries instead of seeing a 500.
        outage = bolt_unavailable(error) if response is not None else None
        if outage is not None:
            log.warning("listener for %s: %s; answered 503", body.get("type"), type(error).__name__)
            return outage
        # The one global handler for bugs: log the traceback; Slack still gets an answer.
        log.error("listener failed for %s", body.get("type"), exc_info=error)
        return None

    intake = FileIntake(
        enqueue=enqueue,
        is_diagnosis_thread=is_diagnosis_thread,
        allowed=settings.channel_allowed,
        max_log_bytes=settings.max_log_bytes,
        claim=claim,
        release=release,
    )
    slash.register(bolt, enqueue=enqueue, max_log_bytes=settings.max_log_bytes)
    messages.register(bolt, enqueue=enqueue, is_diagnosis_thread=is_diagnosis_thread, intake=intake)
    actions.register(bolt, enqueue=enqueue)
    return bolt


def create_app(
    settings: Settings,
    *,
    redis: aioredis.Redis | None = None,
    client: AsyncWebClient | None = None,
    keys: Keys | None = None,
    start_workers: bool = True,
    process_before_response: bool = False,
) -> web.Application:
    """The aiohttp application: ``/slack/events``, the webhook, ``/healthz``, ``/metrics``."""
    own_redis = redis is None
    if redis is None:
        redis = redis_conn.client(
            settings.redis_url,
            max_connections=settings.redis_max_connections,
            pool_timeout_s=settings.redis_pool_timeout_s,
        )
    keys = keys or Keys()
    client = client or make_client(
        settings.slack_bot_token, settings.slack_api_url, timeout=settings.slack_timeout_s
    )
    # The same worker `denpex worker` runs, with every job kind installed.
    worker = build_worker(settings, redis, keys=keys, client=client)
    queue, store = worker.queue, worker.store
    assert isinstance(worker.replier, ThreadReplier)
    evidence = worker.replier.evidence

    holder: dict[str, Runtime] = {}

    async def enqueue(job: Job) -> bool:
        try:
            return await holder["rt"].enqueue(job)
        except AllowanceExceeded as exc:
            # Not an error: the person who asked is told why, and nothing is retried.
            await tell_refused(client, job, exc)
            return False
        except (QueueFull, RedisError, OSError) as exc:
            # Acknowledged already, but nothing was queued: say so where the user asked.
            await _tell_not_queued(client, job, exc)
            raise

    async def is_thread(channel: str, thread_ts: str) -> bool:
        return await holder["rt"].is_diagnosis_thread(channel, thread_ts)

    async def claim(key: str) -> bool:
        return await holder["rt"].claim(key)

    async def release(key: str) -> None:
        await holder["rt"].release(key)

    bolt = build_bolt(
        settings,
        client,
        enqueue=enqueue,
        is_diagnosis_thread=is_thread,
        claim=claim,
        release=release,
        process_before_response=process_before_response,
    )
    allowances = Allowances(
        user=settings.allowance_user,
        channel=settings.allowance_channel,
        webhook_key=settings.allowance_webhook_key,
    )
    admission = AllowanceQueue(queue, AllowanceCounter(redis, allowances, keys=keys))
    rt = Runtime(settings, redis, client, queue, store, evidence, worker, bolt, admission, own_redis)
    holder["rt"] = rt

    app = web.Application(
        client_max_size=CLIENT_MAX_SIZE, middlewares=[outage_middleware, admission_middleware]
    )
    app[RUNTIME] = rt

    async def slack_events(request: web.Request) -> web.Response:
        bolt_request = await to_bolt_request(request)
        return await to_aiohttp_response(await bolt.async_dispatch(bolt_request))

    async def healthz(request: web.Request) -> web.Response:
        retry = {"Retry-After": str(RETRY_AFTER_S)}
        if not rt.ready:
            return web.json_response({"ok": False, "status": "starting"}, status=503, headers=retry)
        try:
            await redis.ping()
        except Exception as exc:  # an outage must show as unhealthy, not as a crash
            status = f"redis: {type(exc).__name__}"
            return web.json_response({"ok": False, "status": status}, status=503, headers=retry)
        return web.json_response({"ok": True})

    app.router.add_post(SLACK_PATH, slack_events)
    app.router.add_get(HEALTH_PATH, healthz)
    metrics.mount(app, _queue_probe(queue))
    mount_webhook(app, settings, queue=rt, redis=redis)
    mount_reports(app, settings, store=store, bolt=bolt)
    mount_jobs_api(app, settings, store=store)

    async def on_startup(_app: web.Application) -> None:
        await queue.setup()
        if start_workers:
            rt.tasks = [asyncio.create_task(worker.run(rt.stop), name="denpex-worker")]
        rt.ready = True

    async def on_cleanup(_app: web.Application) -> None:
        rt.ready = False
        rt.stop.set()
        for task in rt.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await worker.close()
        if rt.own_redis:
            await redis.aclose()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


def _queue_probe(queue: JobQueue) -> Callable[[], Awaitable[tuple[int | None, int | None]]]:
    async def probe() -> tuple[int | None, int | None]:
        stats = await queue.stats()
        return stats.get("lag"), stats.get("pending")

    return probe
