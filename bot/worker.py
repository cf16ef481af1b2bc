"""The worker: take a job off the queue, fetch its logs, diagnose, store, reply, acknowledge.

Every job ends in a reply. Expected failures (file too big, binary, corrupt archive, download
refused, a login page instead of the file, the time limit) raise ``JobFailed`` and become an error
reply in the job's thread. Anything else is a bug or a transient outage: the entry stays
pending and is tried again, and after ``max_deliveries`` it goes to the dead-letter stream with
an error reply. Entries are acknowledged only after their reply is posted.

The engine runs in a process pool, outside the event loop, under a time limit enforced twice:
an alarm inside the child, and a deadline in the parent that kills the pool if the child hangs.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import logging
import multiprocessing
import os
import re
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import redis.exceptions
from slack_sdk.errors import SlackApiError

from bot import metrics
from bot.logging_setup import bind_job
from bot.queue import Delivery, JobQueue
from bot.reply import PostedReply, ReplyFailed, SlackReplier
from bot.store import Store, fingerprint, recurrence_text
from handlers.jobs import KIND_DIAGNOSE, Job, JobFormatError, LogRef
from signatures.diagnosis import Diagnosis
from signatures.errors import InputError

log = logging.getLogger(__name__)

DOWNLOAD_CHUNK = 256 * 1024
# Redis unreachable or restarting: wait and retry, never exit or drop the job.
REDIS_DOWN = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)
HTML_START = re.compile(rb"^\s*(<!doctype html|<html)", re.IGNORECASE)


class JobFailed(Exception):
    """An expected failure; its message is posted in the job's thread as is."""


@dataclass(frozen=True)
class WorkerLimits:
    """Bounds on one job."""

    max_log_bytes: int = 200 * 1024 * 1024  # all of a job's downloads together
    job_timeout_s: float = 120.0  # the engine's run, per job
    max_logs: int = 20
    # What the engine may read after decompression (archives expand).
    max_text_bytes: int = 4 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class JobContext:
    """What a job handler gets besides the job."""

    worker: Worker
    delivery: Delivery

    @property
    def store(self) -> Store:
        """The diagnosis store."""
        return self.worker.store

    @property
    def replier(self) -> SlackReplier:
        """Posts in Slack."""
        return self.worker.replier

    @property
    def queue(self) -> JobQueue:
        """The job queue (for job progress)."""
        return self.worker.queue


Handler = Callable[[Job, JobContext], Awaitable[None]]
_handlers: dict[str, Handler] = {}


def register_handler(kind: str, handler: Handler) -> None:
    """Handle jobs of ``kind`` with ``handler`` in every worker created afterwards.

    A handler posts its own answer (``ctx.replier.post``) and raises ``JobFailed`` for an
    expected failure; the worker then posts that message in the thread.
    """
    if not asyncio.iscoroutinefunction(handler):
        raise TypeError(f"handler for {kind!r} must be an async function")
    _handlers[kind] = handler


class Worker:
    """Consumes the job stream as one named consumer of the group."""

    def __init__(
        self,
        queue: JobQueue,
        store: Store,
        replier: SlackReplier,
        *,
        limits: WorkerLimits | None = None,
        name: str | None = None,
        concurrency: int = 1,
        executor: concurrent.futures.ProcessPoolExecutor | None = None,
        url_fetcher: Any = None,  # bot.remote_logs.RemoteLogFetcher: fetch(url, dest) -> int
        retry_backoff_ms: int = 5_000,  # then x4 per attempt: 5 s, 20 s, 80 s
        poll_block_ms: int = 1_000,
        shutdown_grace_s: float = 20.0,
        engine: Engine | None = None,
        kill_grace_s: float = 10.0,
    ) -> None:
        self.queue = queue
        self.store = store
        self.replier = replier
        self.limits = limits or WorkerLimits()
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.concurrency = max(1, concurrency)
        self.url_fetcher = url_fetcher
        self.retry_backoff_ms = retry_backoff_ms
        self.poll_block_ms = poll_block_ms
        self.shutdown_grace_s = shutdown_grace_s
        # A module-level function: it is pickled by name into the pool's processes.
        self.engine: Engine = engine or diagnose_files
        self.kill_grace_s = kill_grace_s
        self.handlers: dict[str, Handler] = {KIND_DIAGNOSE: self._diagnose, **_handlers}
        self.processed = 0  # deliveries finished (answered, dead-lettered or skipped)
        self._pool = executor
        self._own_pool = executor is None
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._session: aiohttp.ClientSession | None = None

    def register_handler(self, kind: str, handler: Handler) -> None:
        """Handle jobs of ``kind`` with ``handler`` in this worker."""
        if not asyncio.iscoroutinefunction(handler):
            raise TypeError(f"handler for {kind!r} must be an async function")
        self.handlers[kind] = handler

    # -- loops --------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then finish in-flight jobs or hand them back."""
        await self.queue.join(self.name)
        log.info("worker %s started (concurrency %d)", self.name, self.concurrency)
        try:
            while not stop.is_set():
                free = self.concurrency - len(self._in_flight)
                if free <= 0:
                    await asyncio.wait(
                        list(self._in_flight.values()),
                        timeout=1.0,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    continue
                try:
                    batch = await self._next(free, block_ms=self.poll_block_ms)
                except REDIS_DOWN as exc:
                    log.warning("queue unavailable (%s); retrying", exc)
                    await _sleep_unless(stop, 1.0)
                    continue
                except redis.exceptions.ResponseError as exc:
                    # NOGROUP / no such key: the stream is gone (a restart without persistence,
                    # a FLUSHDB). Recreate it rather than let the worker die.
                    log.warning("queue stream missing (%s); recreating it", exc)
                    await _sleep_unless(stop, 1.0)
                    with contextlib.suppress(*REDIS_DOWN):
                        await self.queue.setup()
                        await self.queue.join(self.name)
                    continue
                except Exception:
                    # A bug in the loop must not silently stop all work in a serving process.
                    log.exception("worker %s: error while fetching jobs; retrying", self.name)
                    await _sleep_unless(stop, 1.0)
                    continue
                for delivery in batch:
                    self._start(delivery)
        finally:
            await self._shutdown()

    async def drain(self, timeout_s: float | None = None) -> int:
        """Process what is queued (including retries and stale entries), then return.

        Returns when no entry is waiting and none is pending in the group, so a test can
        enqueue, drain and assert. Pending entries of a dead worker are waited for until the
        visibility timeout lets this worker claim them.
        """
        await self.queue.setup()
        start = self.processed
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        backoff, self.retry_backoff_ms = self.retry_backoff_ms, 0
        try:
            while True:
                batch = await self._next(self.concurrency, block_ms=None)
                if batch:
                    await asyncio.gather(*(self._process(d) for d in batch))
                    continue
                if await self.queue.idle():
                    return self.processed - start
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("drain: jobs still pending in other workers")
                await asyncio.sleep(0.05)  # another consumer owns what is left
        finally:
            self.retry_backoff_ms = backoff

    async def close(self) -> None:
        """Release the process pool and the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._pool is not None and self._own_pool:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def _next(self, n: int, *, block_ms: int | None) -> list[Delivery]:
        busy = list(self._in_flight)
        # Oldest first: our own failed attempts, then work a dead worker left, then new jobs.
        batch = await self.queue.reclaim_own(self.name, min_idle_ms=self.retry_backoff_ms, skip=busy, count=n)
        if len(batch) < n:
            stale = await self.queue.claim_stale(self.name, count=n - len(batch))
            batch += [d for d in stale if d.entry_id not in busy]
        if not batch:
            batch = await self.queue.read(self.name, count=n, block_ms=block_ms)
        return batch

    def _start(self, delivery: Delivery) -> None:
        task = asyncio.create_task(self._process(delivery), name=f"job {delivery.entry_id}")
        self._in_flight[delivery.entry_id] = task
        task.add_done_callback(lambda _t: self._in_flight.pop(delivery.entry_id, None))

    async def _shutdown(self) -> None:
        if self._in_flight:
            log.info("worker %s: finishing %d job(s)", self.name, len(self._in_flight))
            _done, unfinished = await asyncio.wait(
                list(self._in_flight.values()), timeout=self.shutdown_grace_s
            )
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
        await self.close()

    # -- one delivery -------------------------------------------------------------------------

    async def _process(self, delivery: Delivery) -> None:
        with bind_job(_job_id(delivery.payload)):
            await self._process_bound(delivery)

    async def _process_bound(self, delivery: Delivery) -> None:
        done = asyncio.Event()
        heartbeat = asyncio.create_task(self._heartbeat(delivery.entry_id, done))
        try:
            await self._handle(delivery)
        except asyncio.CancelledError:
            # Shutdown: not acknowledged, so the job is not lost; let another worker have it.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.queue.hand_back(delivery.entry_id, self.name))
            raise
        except Exception:
            # A bug or an outage (Redis, Slack after retries): leave the entry pending; it is
            # tried again and dead-lettered after max_deliveries.
            log.exception("job %s failed (delivery %d)", delivery.entry_id, delivery.deliveries)
            metrics.job_failed(_source(delivery.payload))
        finally:
            # Stop by flag as well as by cancel: a cancel that lands inside a Redis call can be
            # swallowed by the client, and the heartbeat must never outlive its job.
            done.set()
            heartbeat.cancel()
            await asyncio.wait([heartbeat], timeout=5)

    async def _heartbeat(self, entry_id: str, done: asyncio.Event) -> None:
        # A job in progress must not look idle, or another worker would claim it while it runs.
        period = max(0.05, self.queue.visibility_timeout_ms / 3000)
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=period)
            if done.is_set():
                return
            with contextlib.suppress(Exception):
                await self.queue.touch(entry_id, self.name)

    async def _handle(self, delivery: Delivery) -> None:
        try:
            job = delivery.job()
        except JobFormatError as exc:
            await self._give_up(delivery, _salvage(delivery.payload), f"unreadable job: {exc}")
            return
        if delivery.deliveries > self.queue.max_deliveries:
            reason = f"failed {delivery.deliveries - 1} times"
            await self._give_up(delivery, job, reason)
            return
        progress = await self.queue.progress(job.id)
        if progress.get("replied"):
            # A worker posted the answer and died before acknowledging it.
            await self._ack(delivery)
            return
        if delivery.deliveries > 1 and await self._already_answered(job, progress):
            # ...or died between posting it and recording that it did.
            await self._ack(delivery)
            return
        handler = self.handlers.get(job.kind)
        try:
            if handler is None:
                raise JobFailed(f"This Denpex worker cannot handle {job.kind!r} jobs yet.")
            await handler(job, JobContext(self, delivery))
        except JobFailed as exc:
            await self._reply_error(job, str(exc))
        except ReplyFailed as exc:
            await self._give_up(delivery, None, f"reply failed: {exc}")
            return
        await self._ack(delivery)
        metrics.job_completed(job.source, time.time() - job.created_at)

    async def _already_answered(self, job: Job, progress: dict[str, str]) -> bool:
        channel = progress.get("parent_channel") or job.channel
        thread_ts = job.thread_ts or progress.get("parent_ts")
        if not channel or not thread_ts:
            return False
        ts = await self.replier.find_reply(job, channel, thread_ts)
        if ts is None:
            return False
        await self.queue.set_progress(job.id, replied="found", reply_ts=ts, worker=self.name)
        return True

    async def _ack(self, delivery: Delivery) -> None:
        for attempt in range(5):
            try:
                await self.queue.ack(delivery.entry_id)
                break
            except REDIS_DOWN:
                if attempt == 4:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)
        self.processed += 1

    async def _give_up(self, delivery: Delivery, job: Job | None, reason: str) -> None:
        log.error("job %s dead-lettered: %s", delivery.entry_id, reason)
        if job is not None:
            text = (
                "Denpex could not finish this job and gave up on it "
                f"({reason}). An operator can retry it with `denpex jobs dead-letter retry`."
            )
            try:
                await self._reply_error(job, text)
            except Exception:
                log.exception("could not post the error reply for %s", delivery.entry_id)
        await self.queue.dead_letter(delivery, reason)
        metrics.job_dead_lettered(_source(delivery.payload))
        self.processed += 1

    # -- replies ------------------------------------------------------------------------------

    async def open_thread(self, job: Job) -> Job:
        """Post the job's parent message once (a retry reuses it); returns the job with its
        thread, or without a channel when the bot cannot post there."""
        if job.thread_ts or not job.channel:
            return job
        progress = await self.queue.progress(job.id)
        if progress.get("parent_ts"):
            return replace(job, channel=progress["parent_channel"], thread_ts=progress["parent_ts"])
        if progress.get("parent") == "none":
            return replace(job, channel=None)
        parent = await self.replier.post_parent(job)
        if parent.ts is None:
            await self.queue.set_progress(job.id, parent="none")
            return replace(job, channel=None)
        await self.queue.set_progress(
            job.id, parent_ts=parent.ts, parent_channel=parent.channel or job.channel
        )
        return replace(job, channel=parent.channel or job.channel, thread_ts=parent.ts)

    async def _reply_error(self, job: Job, reason: str) -> PostedReply:
        progress = await self.queue.progress(job.id)
        if progress.get("replied"):
            return PostedReply(job.channel, progress.get("reply_ts") or None, job.thread_ts)
        threaded = await self.open_thread(job)
        posted = await self.replier.deliver(threaded, None, reason)
        await self.queue.set_progress(job.id, replied="error", reply_ts=posted.ts or "", worker=self.name)
        return posted

    async def _answer(self, job: Job, diagnosis: Diagnosis) -> PostedReply:
        origin = job.channel
        threaded = await self.open_thread(job)
        data = diagnosis.to_dict()
        metrics.diagnosis_made(diagnosis.signature.id if diagnosis.signature else None, data["status"])
        await self.store.save(job.id, data, job=job, channel=origin, thread_ts=threaded.thread_ts)
        meta = dict(job.meta)
        fp = fingerprint(data)
        if fp:
            text = recurrence_text(await self.store.recurrence(fp, origin))
            if text:
                meta["recurrence"] = text
        posted = await self.replier.deliver(threaded, diagnosis, None, job_meta=meta)
        await self.queue.set_progress(job.id, replied="diagnosis", reply_ts=posted.ts or "", worker=self.name)
        if posted.ts:
            await self.store.set_reply(job.id, posted.ts)
        progress = await self.queue.progress(job.id)
        if progress.get("parent_ts") and threaded.channel:
            await self.replier.update_parent(threaded.channel, progress["parent_ts"], diagnosis, job.header)
        return posted

    # -- the diagnose job ---------------------------------------------------------------------

    async def _diagnose(self, job: Job, ctx: JobContext) -> None:
        if job.precomputed is not None:
            try:
                diagnosis = Diagnosis.from_dict(job.precomputed)
            except (KeyError, TypeError, ValueError) as exc:
                raise JobFailed(f"The attached report is not a Denpex diagnosis ({exc}).") from exc
        else:
            # Open the thread first so the user sees the job was taken while the logs download.
            diagnosis = await self._run_engine(await self.open_thread(job))
        # The original job: the store files it under the channel it came from.
        await self._answer(job, diagnosis)

    async def _run_engine(self, job: Job) -> Diagnosis:
        if not job.logs:
            raise JobFailed("No log was attached to this job.")
        if len(job.logs) > self.limits.max_logs:
            raise JobFailed(f"Too many logs in one job ({len(job.logs)}; at most {self.limits.max_logs}).")
        # Downloads go to a private directory that is removed whatever happens.
        with tempfile.TemporaryDirectory(prefix="denpex-job-") as tmp:
            files: list[tuple[str, str]] = []
            total = 0
            for i, ref in enumerate(job.logs):
                dest = Path(tmp) / str(i) / _file_name(ref.name)
                dest.parent.mkdir()
                total += await self._fetch(ref, dest, self.limits.max_log_bytes - total)
                files.append((ref.name, str(dest)))
            kind, payload = await self._in_pool(files)
        if kind == "ok":
            return Diagnosis.from_dict(payload)
        raise JobFailed(str(payload))

    async def _in_pool(self, files: list[tuple[str, str]]) -> tuple[str, Any]:
        pool = self._executor()
        loop = asyncio.get_running_loop()
        limit = self.limits.job_timeout_s
        future = loop.run_in_executor(pool, run_engine, self.engine, files, limit, self.limits.max_text_bytes)
        try:
            # The child stops itself at ``limit``; this deadline is for a child stuck in C code.
            return await asyncio.wait_for(future, timeout=limit + self.kill_grace_s)
        except TimeoutError:
            self._kill_pool()
            return "timeout", _timeout_message(limit)
        except concurrent.futures.process.BrokenProcessPool:
            self._kill_pool()
            raise RuntimeError("the diagnosis process died") from None

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a forked child would inherit the event loop and open sockets.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.concurrency, mp_context=multiprocessing.get_context("spawn")
            )
            self._own_pool = True
        return self._pool

    def _kill_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = getattr(pool, "_processes", None) or {}
        for process in list(processes.values()):
            with contextlib.suppress(Exception):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    # -- fetching logs ------------------------------------------------------------------------

    async def _fetch(self, ref: LogRef, dest: Path, budget: int) -> int:
        if ref.size is not None and ref.size > budget:
            raise JobFailed(_too_big(ref.name, self.limits.max_log_bytes))
        if ref.kind == "inline":
            data = (ref.text or "").encode("utf-8")
            if len(data) > budget:
                raise JobFailed(_too_big(ref.name, self.limits.max_log_bytes))
            dest.write_bytes(data)
            return len(data)
        if ref.kind == "slack_file":
            return await self._fetch_slack_file(ref, dest, budget)
        if ref.kind == "url":
            if self.url_fetcher is None or not ref.url:
                raise JobFailed("Fetching logs from a URL is not enabled on this Denpex.")
            try:
                size: int = await self.url_fetcher.fetch(ref.url, dest)
            except InputError as exc:
                raise JobFailed(str(exc)) from exc
            if size > budget:
                raise JobFailed(_too_big(ref.name, self.limits.max_log_bytes))
            return size
        raise JobFailed(f"Unknown log kind {ref.kind!r}.")

    async def _fetch_slack_file(self, ref: LogRef, dest: Path, budget: int) -> int:
        url = ref.url
        if not url:
            if not ref.file_id:
                raise JobFailed(f"{ref.name}: no Slack file id to download.")
            try:
                info = await self.replier.client.files_info(file=ref.file_id)
            except SlackApiError as exc:
                error = exc.response.get("error", "error") if exc.response else "error"
                if exc.response is not None and exc.response.status_code in (429, 500, 503):
                    raise
                raise JobFailed(f"Slack would not give me the file {ref.name} ({error}).") from exc
            file = info.get("file") or {}
            size = file.get("size")
            if isinstance(size, int) and size > budget:
                raise JobFailed(_too_big(ref.name, self.limits.max_log_bytes))
            url = file.get("url_private_download") or file.get("url_private")
            if not url:
                raise JobFailed(f"Slack gave no download link for {ref.name}.")
        headers = {"Authorization": f"Bearer {self.replier.client.token}"}
        session = self._http()
        async with session.get(url, headers=headers) as resp:
            if resp.status in (429, 500, 502, 503, 504):
                raise RuntimeError(f"download of {ref.name} answered HTTP {resp.status}")
            if resp.status != 200:
                raise JobFailed(f"Slack refused the download of {ref.name} (HTTP {resp.status}).")
            if resp.content_length is not None and resp.content_length > budget:
                raise JobFailed(_too_big(ref.name, self.limits.max_log_bytes))
            size = 0
            with dest.open("wb") as out:
                async for chunk in resp.content.iter_chunked(DOWNLOAD_CHUNK):
                    if size == 0 and resp.content_type == "text/html" and HTML_START.match(chunk):
                        raise JobFailed(
                            f"Slack sent a web page instead of {ref.name}: the bot token "
                            "probably lacks the files:read scope."
                        )
                    size += len(chunk)
                    if size > budget:
                        raise JobFailed(_too_big(ref.name, self.limits.max_log_bytes))
                    out.write(chunk)
        return size

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_read=60, sock_connect=10)
            )
        return self._session


# -- runs in the engine's process ------------------------------------------------------------


class _Alarm(Exception):
    pass


def _on_alarm(_signum: int, _frame: object) -> None:
    raise _Alarm


Engine = Callable[[list[tuple[str, str]], int], dict[str, Any]]


def diagnose_files(files: list[tuple[str, str]], max_text_bytes: int) -> dict[str, Any]:
    """The engine as the worker runs it: (name, path) pairs in, ``Diagnosis.to_dict()`` out."""
    from signatures import Limits, Source, diagnose

    sources = [Source(name=name, path=Path(path)) for name, path in files]
    return diagnose(sources, limits=Limits(max_bytes=max_text_bytes)).to_dict()


def run_engine(
    engine: Engine, files: list[tuple[str, str]], timeout_s: float, max_text_bytes: int
) -> tuple[str, Any]:
    """Run ``engine`` in this (pool) process under an alarm.

    Returns ("ok", diagnosis dict), ("input", message) or ("timeout", message).
    """
    import signatures  # noqa: F401  (imported before the alarm: an interrupted import breaks)

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return "ok", engine(files, max_text_bytes)
    except InputError as exc:
        return "input", str(exc)
    except _Alarm:
        return "timeout", _timeout_message(timeout_s)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _timeout_message(limit: float) -> str:
    return f"The diagnosis took longer than {limit:g} s and was stopped."


def _too_big(name: str, limit: int) -> str:
    return f"{name} is larger than the {limit / 1024 / 1024:g} MB this Denpex reads per job."


def _file_name(name: str) -> str:
    # Keep the extension (.gz, .zip matter to the engine) but nothing that could escape the dir.
    base = os.path.basename(name.replace("\\", "/")) or "log"
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)[:120].lstrip(".") or "log"


def _source(payload: str) -> str:
    # For metrics labels only: the job's source if the payload says it, else "unknown".
    return _field(payload, "source", 16) or "unknown"


def _job_id(payload: str) -> str | None:
    # For log lines only: the job id even when the payload does not parse as a Job.
    return _field(payload, "id", 64)


def _field(payload: str, key: str, max_len: int) -> str | None:
    try:
        value = json.loads(payload).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and len(value) <= max_len else None


def _salvage(payload: str) -> Job | None:
    # An unreadable job still deserves an error reply if we can tell where it came from.
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = {k: data.get(k) for k in ("channel", "thread_ts", "response_url", "id")}
    if not all(v is None or isinstance(v, str) for v in fields.values()):
        return None
    if not (fields["channel"] or fields["response_url"]):
        return None
    return Job(
        source="slash",
        dedupe_key="unreadable",
        channel=fields["channel"],
        thread_ts=fields["thread_ts"],
        response_url=fields["response_url"],
        id=fields["id"] or uuid.uuid4().hex,
    )


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


# -- wiring and python -m bot.worker -----------------------------------------------------------


def build_worker(
    settings: Any,
    redis: Any,
    *,
    keys: Any = None,
    name: str | None = None,
    visibility_timeout_ms: int = 60_000,
    max_deliveries: int = 3,
    client: Any = None,
) -> Worker:
    """A worker wired from ``bot.settings.Settings`` with every job kind installed, as in
    ``denpex serve`` (used by ``python -m bot.worker``)."""
    from bot import followup_jobs
    from bot.keys import Keys
    from bot.remote_logs import fetcher_from_settings
    from bot.reply import make_client

    keys = keys or Keys()
    retention_s = settings.retention_days * 24 * 3600
    queue = JobQueue(
        redis, keys=keys, visibility_timeout_ms=visibility_timeout_ms, max_deliveries=max_deliveries
    )
    store = Store(redis, keys=keys, retention_s=retention_s)
    evidence = followup_jobs.ThreadEvidence(redis, keys, retention_s)
    client = client or make_client(settings.slack_bot_token, settings.slack_api_url)
    worker = Worker(
        queue,
        store,
        followup_jobs.ThreadReplier(client, evidence, store=store),
        limits=WorkerLimits(max_log_bytes=settings.max_log_bytes, job_timeout_s=settings.job_timeout_s),
        name=name,
        concurrency=settings.workers,
        url_fetcher=fetcher_from_settings(settings),
    )
    followup_jobs.install(worker, evidence)
    return worker


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bot.worker", description=__doc__)
    parser.add_argument("--prefix", default="denpex", help="key prefix (tests use their own)")
    parser.add_argument("--name", default=None, help="consumer name (default: host-pid-random)")
    parser.add_argument("--visibility-ms", type=int, default=60_000)
    parser.add_argument("--max-deliveries", type=int, default=3)
    parser.add_argument("--drain", action="store_true", help="process what is queued, then exit")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    from bot.keys import Keys
    from bot.redis_conn import connect
    from bot.settings import load_settings

    settings = load_settings()
    if not settings.redis_url:
        log.error("REDIS_URL is not set: a separate worker process needs a shared Redis")
        return 2
    redis = await connect(settings.redis_url)
    worker = build_worker(
        settings,
        redis,
        keys=Keys(args.prefix),
        name=args.name,
        visibility_timeout_ms=args.visibility_ms,
        max_deliveries=args.max_deliveries,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if args.drain:
            await worker.drain()
        else:
            await worker.run(stop)
    finally:
        await worker.close()
        await redis.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one worker process until SIGTERM (or, with --drain, until the queue is empty)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return asyncio.run(_main(_parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
