"""The diagnose job: fetch the logs, run the engine, store the diagnosis, answer in the thread."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.fetch.logs import LogFetcher, safe_file_name
from bot.jobs.engine_pool import EnginePool
from bot.jobs.limits import WorkerLimits
from bot.jobs.outcomes import JobFailed, PostedReply
from bot.jobs.store import fingerprint, recurrence_text
from bot.jobs.worker import JobContext, Worker
from bot.kinds.advising import remember, with_history
from bot.ops import metrics
from bot.pages.links import ReportLinks
from bot.slack.render import META_REPORT_URL
from handlers.jobs import Job
from signatures.diagnosis import Diagnosis


class DiagnoseKind:
    """Handles ``diagnose`` jobs; ``run_engine`` is also how a thread's logs are diagnosed again."""

    def __init__(
        self,
        limits: WorkerLimits,
        engine_pool: EnginePool,
        fetcher: LogFetcher,
        links: ReportLinks | None = None,
    ) -> None:
        self.limits = limits
        self.engine_pool = engine_pool
        self.fetcher = fetcher
        self.links = links  # None: no "Open full report" button

    def report_meta(self, diagnosis_id: str) -> dict[str, str]:
        """The job_meta entry that puts a fresh signed report link on a diagnosis message."""
        url = self.links.url_for(diagnosis_id) if self.links else None
        return {META_REPORT_URL: url} if url else {}

    async def handle(self, job: Job, ctx: JobContext) -> None:
        """Diagnose the job's logs (or read its attached report) and answer once."""
        worker = ctx.worker
        if job.precomputed is not None:
            try:
                diagnosis = Diagnosis.from_dict(job.precomputed)
            except (KeyError, TypeError, ValueError) as exc:
                raise JobFailed(f"The attached report is not a Denpex diagnosis ({exc}).") from exc
        else:
            # Open the thread first so the user sees the job was taken while the logs download.
            diagnosis = await self.run_engine(await worker.open_thread(job))
        # The original job: the store files it under the channel it came from.
        await answer(worker, job, diagnosis, report_meta=self.report_meta(job.id))

    async def run_engine(self, job: Job) -> Diagnosis:
        """Download the job's logs into a private folder and diagnose them in the engine pool."""
        if not job.logs:
            raise JobFailed("No log was attached to this job.")
        if len(job.logs) > self.limits.max_logs:
            raise JobFailed(f"Too many logs in one job ({len(job.logs)}; at most {self.limits.max_logs}).")
        # Downloads go to a private directory that is removed whatever happens.
        with tempfile.TemporaryDirectory(prefix="denpex-job-") as tmp:
            files: list[tuple[str, str]] = []
            total = 0
            for i, ref in enumerate(job.logs):
                dest = Path(tmp) / str(i) / safe_file_name(ref.name)
                dest.parent.mkdir()
                total += await self.fetcher.fetch(ref, dest, self.limits.max_log_bytes - total)
                files.append((ref.name, str(dest)))
            kind, payload = await self.engine_pool.run(files)
        if kind == "ok":
            return Diagnosis.from_dict(payload)
        raise JobFailed(str(payload))


async def answer(
    worker: Worker, job: Job, diagnosis: Diagnosis, *, report_meta: dict[str, str] | None = None
) -> PostedReply:
    """Store ``diagnosis``, post it in the job's thread, record that, and update the parent."""
    origin = job.channel
    threaded = await worker.open_thread(job)
    diagnosis = await with_history(worker.store, diagnosis, job.id, job.meta)  # before this run counts
    data = diagnosis.to_dict()
    metrics.diagnosis_made(diagnosis.signature.id if diagnosis.signature else None, data["status"])
    await worker.store.save(job.id, data, job=job, channel=origin, thread_ts=threaded.thread_ts)
    await remember(worker.store, diagnosis, job.id, job.meta)
    meta = {**job.meta, **(report_meta or {})}  # stored first (above): the link opens at once
    fp = fingerprint(data)
    if fp:
        text = recurrence_text(await worker.store.recurrence(fp, origin))
        if text:
            meta["recurrence"] = text
    retrying = await worker.begin_reply(job)
    posted: PostedReply = await worker.replier.deliver(
        threaded, diagnosis, None, job_meta=meta, retrying=retrying
    )
    await worker.queue.set_progress(job.id, replied="diagnosis", reply_ts=posted.ts or "", worker=worker.name)
    if posted.ts:
        await worker.store.set_reply(job.id, posted.ts)
    progress = await worker.queue.progress(job.id)
    if progress.get("parent_ts") and threaded.channel:
        await worker.replier.update_parent(
            threaded.channel, progress["parent_ts"], diagnosis, job.header, mention=job.user
        )
    return posted
