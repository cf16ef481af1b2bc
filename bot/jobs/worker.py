"""The worker loop: take a job off the queue, hand it to its kind's handler, acknowledge.

Every job ends in a reply. Expected failures (file too big, binary, corrupt archive, download
refused, a login page instead of the file, the time limit) raise ``JobFailed`` and become an error
reply in the job's thread. Anything else is a bug or a transient outage: the entry stays
pending and is tried again, and after ``max_deliveries`` it goes to the dead-letter stream with
an error reply. Entries are acknowledged only after their reply is posted.

What a job does lives in ``bot.kinds``; this module knows only the queue's contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import redis.exceptions

from bot.jobs.engine_pool import EnginePool
from bot.jobs.outcomes import ROLE_GAVE_UP, ROLE_REPLY, JobFailed, PostedReply, Replier, ReplyFailed
from bot.jobs.payload import job_id_of, salvage, source_of
from bot.jobs.queue import Delivery, JobQueue
from bot.jobs.store import Store
from bot.ops import metrics
from bot.ops.logs import bind_job
from handlers.jobs import Job, JobFormatError

log = logging.getLogger(__name__)

# Redis unreachable or restarting: wait and retry, never exit or drop the job.
REDIS_DOWN = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)

__all__ = ["REDIS_DOWN", "Handler", "JobContext", "JobFailed", "Worker"]


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
    def replier(self) -> Any:
        """Posts in Slack (a ``bot.slack.reply.SlackReplier`` in every real wiring)."""
        return self.worker.replier

    @property
    def queue(self) -> JobQueue:
        """The job queue (for job progress)."""
        return self.worker.queue


Handler = Callable[[Job, JobContext], Awaitable[None]]


class Worker:
    """Consumes the job stream as one named consumer of the group.

    ``handlers`` maps a job kind to what does it (``bot.kinds`` builds the table); a job of a
    kind without a handler gets an error reply.
    """

    def __init__(
        self,
        queue: JobQueue,
        store: Store,
        replier: Replier,
        *,
        handlers: Mapping[str, Handler] | None = None,
        engine_pool: EnginePool | None = None,
        name: str | None = None,
        concurrency: int = 1,
        retry_backoff_ms: int = 5_000,  # then x4 per attempt: 5 s, 20 s, 80 s
        poll_block_ms: int = 1_000,
        shutdown_grace_s: float = 20.0,
    ) -> None:
        self.queue = queue
        self.store = store
        self.replier: Any = replier
        self.engine_pool = engine_pool
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.concurrency = max(1, concurrency)
        self.retry_backoff_ms = retry_backoff_ms
        self.poll_block_ms = poll_block_ms
        self.shutdown_grace_s = shutdown_grace_s
        self.handlers: dict[str, Handler] = {}
        for kind, handler in (handlers or {}).items():
            self.register_handler(kind, handler)
        self.processed = 0  # deliveries finished (answered, dead-lettered or skipped)
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run ``closer`` when the worker closes (an HTTP session a job kind opened, say)."""
        self._closers.append(closer)

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
        """Release the engine's process pool and whatever the job kinds opened."""
        closers, self._closers = self._closers, []
        for closer in closers:
            await closer()
        if self.engine_pool is not None:
            self.engine_pool.close()

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
        with bind_job(job_id_of(delivery.payload)):
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
            metrics.job_failed(source_of(delivery.payload))
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
            await self._give_up(delivery, salvage(delivery.payload), f"unreadable job: {exc}")
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
        # An earlier attempt began posting the answer (or, for jobs queued before intents were
        # recorded, was delivered before): it may be in Slack already.
        maybe_posted = delivery.deliveries > 1 or "reply_intent" in progress
        if maybe_posted and await self._already_answered(job, progress):
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
        if not thread_ts and channel and "parent_intent" in progress:
            # The parent may be posted though its ts was never recorded: find it by its metadata.
            thread_ts = await self.replier.find_parent(job, channel, float(progress["parent_intent"]))
            if thread_ts:
                await self.queue.set_progress(job.id, parent_ts=thread_ts, parent_channel=channel)
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
                await self._reply_error(job, text, role=ROLE_GAVE_UP)
            except Exception:
                log.exception("could not post the error reply for %s", delivery.entry_id)
        await self.queue.dead_letter(delivery, reason)
        metrics.job_dead_lettered(source_of(delivery.payload))
        self.processed += 1

    # -- replies ------------------------------------------------------------------------------

    async def open_thread(self, job: Job) -> Job:
        """Post the job's parent message once (a retry reuses it); returns the job with its
        thread, or without a channel when the bot cannot post there.

        The intent is recorded before posting, so a retry after a post whose answer was lost
        (Slack answered after the client's timeout, Redis failed before the ts was recorded)
        looks for that parent in Slack instead of posting a second one.
        """
        if job.thread_ts or not job.channel:
            return job
        progress = await self.queue.progress(job.id)
        if progress.get("parent_ts"):
            return replace(job, channel=progress["parent_channel"], thread_ts=progress["parent_ts"])
        if progress.get("parent") == "none":
            return replace(job, channel=None)
        earlier = await self.queue.mark_intent(job.id, "parent_intent")
        since = earlier if earlier is not None else time.time()
        parent = await self.replier.post_parent(job, retrying=earlier is not None, since=since)
        if parent.ts is None:
            await self.queue.set_progress(job.id, parent="none")
            return replace(job, channel=None)
        await self.queue.set_progress(
            job.id, parent_ts=parent.ts, parent_channel=parent.channel or job.channel
        )
        return replace(job, channel=parent.channel or job.channel, thread_ts=parent.ts)

    async def begin_reply(self, job: Job) -> bool:
        """Record that the job is about to post its answer; True when an earlier attempt had
        begun to (the replier then looks for that answer before posting one)."""
        return await self.queue.mark_intent(job.id, "reply_intent") is not None

    async def _reply_error(self, job: Job, reason: str, *, role: str = ROLE_REPLY) -> PostedReply:
        progress = await self.queue.progress(job.id)
        if progress.get("replied"):
            return PostedReply(job.channel, progress.get("reply_ts") or None, job.thread_ts)
        threaded = await self.open_thread(job)
        # The note that a job was given up on is posted once too, but it is no answer: a retried
        # dead letter still posts its real one.
        retrying = await self.queue.mark_intent(job.id, f"{role}_intent") is not None
        posted = await self.replier.deliver(threaded, None, reason, retrying=retrying, role=role)
        if role == ROLE_REPLY:
            await self.queue.set_progress(job.id, replied="error", reply_ts=posted.ts or "", worker=self.name)
        return posted


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
