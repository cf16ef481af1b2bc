"""The one table of job kinds, and a worker built with all of them."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from bot.fetch.logs import LogFetcher
from bot.fetch.remote import fetcher_from_settings
from bot.jobs.engine_pool import Engine, EnginePool
from bot.jobs.keys import Keys
from bot.jobs.limits import WorkerLimits
from bot.jobs.queue import JobQueue
from bot.jobs.store import Store
from bot.jobs.worker import Handler, Worker
from bot.kinds import followups, lookups
from bot.kinds.diagnose import DiagnoseKind
from bot.kinds.rediagnose import make_rediagnose
from bot.model.allowance import ModelAllowance
from bot.model.answerer import ModelAnswerer
from bot.model.client import ModelClient
from bot.pages.links import ReportLinks, links_from_settings
from bot.slack.reply import make_client
from bot.slack.thread import ThreadEvidence, ThreadReplier
from handlers.jobs import KIND_DIAGNOSE


def handlers(
    diagnose: DiagnoseKind, evidence: ThreadEvidence | None, model: ModelAnswerer | None = None
) -> dict[str, Handler]:
    """Job kind -> its handler. Without thread evidence, no re-diagnosis of a thread."""
    table: dict[str, Handler] = {
        KIND_DIAGNOSE: diagnose.handle,
        "followup": followups.make_followup(model),
        "evidence": followups.handle_evidence,
        "explain": followups.handle_explain,
        "feedback": followups.handle_feedback,
        "notice": followups.handle_notice,
        "history": lookups.handle_history,
        "signatures": lookups.handle_signatures,
        "stats": lookups.handle_stats,
    }
    if evidence is not None:
        table["rediagnose"] = make_rediagnose(evidence, diagnose)
    return table


def make_worker(
    queue: JobQueue,
    store: Store,
    replier: Any,
    *,
    limits: WorkerLimits | None = None,
    executor: concurrent.futures.ProcessPoolExecutor | None = None,
    engine: Engine | None = None,
    kill_grace_s: float = 10.0,
    url_fetcher: Any = None,  # bot.fetch.remote.RemoteLogFetcher: fetch(url, dest) -> int
    evidence: ThreadEvidence | None = None,
    model: ModelAnswerer | None = None,
    concurrency: int = 1,
    report_links: ReportLinks | None = None,
    **loop: Any,  # name, retry_backoff_ms, poll_block_ms, shutdown_grace_s
) -> Worker:
    """A worker on ``queue`` that handles every job kind, posting through ``replier``."""
    limits = limits or WorkerLimits()
    pool = EnginePool(
        limits, max_workers=concurrency, executor=executor, engine=engine, kill_grace_s=kill_grace_s
    )
    fetcher = LogFetcher(replier.client, max_log_bytes=limits.max_log_bytes, url_fetcher=url_fetcher)
    worker = Worker(
        queue,
        store,
        replier,
        handlers=handlers(DiagnoseKind(limits, pool, fetcher, report_links), evidence, model),
        engine_pool=pool,
        concurrency=concurrency,
        **loop,
    )
    worker.on_close(fetcher.close)
    if model is not None:
        worker.on_close(model.close)
    return worker


def build_worker(
    settings: Any,
    redis: Any,
    *,
    keys: Keys | None = None,
    name: str | None = None,
    visibility_timeout_ms: int = 60_000,
    max_deliveries: int = 3,
    client: Any = None,
) -> Worker:
    """A worker wired from ``bot.ops.settings.Settings``, as ``denpex serve`` and ``worker`` run it."""
    keys = keys or Keys()
    retention_s = settings.retention_days * 24 * 3600
    queue = JobQueue(
        redis,
        keys=keys,
        visibility_timeout_ms=visibility_timeout_ms,
        max_deliveries=max_deliveries,
        dead_ttl_s=settings.dead_letter_days * 24 * 3600,
    )
    store = Store(redis, keys=keys, retention_s=retention_s)
    evidence = ThreadEvidence(redis, keys, retention_s)
    client = client or make_client(
        settings.slack_bot_token, settings.slack_api_url, timeout=settings.slack_timeout_s
    )
    return make_worker(
        queue,
        store,
        ThreadReplier(client, evidence, store=store),
        limits=WorkerLimits(max_log_bytes=settings.max_log_bytes, job_timeout_s=settings.job_timeout_s),
        url_fetcher=fetcher_from_settings(settings),
        evidence=evidence,
        model=model_from_settings(settings, redis, keys),
        concurrency=settings.workers,
        name=name,
        report_links=links_from_settings(settings),
    )


def model_from_settings(settings: Any, redis: Any, keys: Keys) -> ModelAnswerer | None:
    """The configured model answerer, or None when no model is set (the default)."""
    if not settings.model_enabled:
        return None
    client = ModelClient(
        settings.llm_url, settings.llm_model, api_key=settings.llm_api_key, timeout_s=settings.llm_timeout_s
    )
    allowance = ModelAllowance(redis, keys.prefix, settings.llm_daily_per_channel)
    return ModelAnswerer(client, allowance, max_lines=settings.llm_max_lines)
