"""More evidence in a diagnosis thread: diagnose the thread's logs again and say what changed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.jobs.store import StoredDiagnosis
from bot.jobs.worker import JobContext
from bot.kinds.advising import with_history
from bot.kinds.diagnose import DiagnoseKind
from bot.kinds.posting import in_thread
from bot.slack.render import render_diagnosis
from bot.slack.thread import ThreadEvidence, ThreadReplier, log_identity
from handlers.jobs import Job, LogRef
from signatures.diagnosis import Diagnosis, Status

log = logging.getLogger(__name__)


def make_rediagnose(evidence: ThreadEvidence, diagnose: DiagnoseKind) -> Callable[[Job, JobContext], Any]:
    """The handler for more evidence in a diagnosis thread."""

    async def handle_rediagnose(job: Job, ctx: JobContext) -> None:
        channel, thread = job.channel, job.thread_ts
        stored = await ctx.store.by_thread(channel, thread) if channel and thread else None
        if stored is None or not channel or not thread:
            # Not (or no longer) a diagnosis thread: diagnose the new logs on their own.
            await diagnose.handle(job, ctx)
            return
        previous = Diagnosis.from_dict(stored.diagnosis)
        refs = _unique([*await evidence.logs(channel, thread), *job.logs])
        new = await diagnose.run_engine(replace(job, logs=refs))
        asked = await evidence.asked(channel, thread)
        new = replace(new, missing_facts=tuple(f for f in new.missing_facts if f not in asked))
        new = await with_history(ctx.store, new, stored.id, stored.meta or {})  # the same run's history
        changed = describe_change(previous, new, [r.name for r in job.logs])
        await ctx.store.save(stored.id, new.to_dict(), job=job, channel=channel, thread_ts=thread)
        await evidence.record(channel, thread, job.logs)
        await evidence.mark_asked(channel, thread, new.missing_facts)
        message = render_diagnosis(new, job_meta={"changed": changed, **diagnose.report_meta(stored.id)})
        posted = await in_thread(ctx, job, message)
        if posted.ts:
            await ctx.store.set_reply(stored.id, posted.ts)
        await _update_original(ctx, stored, new, channel, thread, diagnose.report_meta(stored.id))
        if isinstance(ctx.replier, ThreadReplier):
            await ctx.replier.finish_reaction(job, ok=True)

    return handle_rediagnose


def _unique(refs: Sequence[LogRef]) -> list[LogRef]:
    seen: set[tuple[str, str]] = set()
    out = []
    for r in refs:
        if log_identity(r) not in seen:
            seen.add(log_identity(r))
            out.append(r)
    return out


async def _update_original(
    ctx: JobContext,
    stored: StoredDiagnosis,
    new: Diagnosis,
    channel: str,
    thread: str,
    report_meta: dict[str, str],
) -> None:
    """Put the new headline on the first diagnosis message (and on Denpex's own parent)."""
    if stored.reply_ts:
        note = "Updated with more evidence from this thread; the newest reply below says what changed."
        message = render_diagnosis(new, job_meta={"changed": note, **report_meta})
        try:
            await ctx.replier.client.chat_update(
                channel=channel, ts=stored.reply_ts, text=message.text[:3900], blocks=message.blocks
            )
        except SlackApiError as exc:
            log.info("could not update %s: %s", stored.reply_ts, exc.response.get("error"))
    if stored.source in ("slash", "webhook", "report"):
        await ctx.replier.update_parent(channel, thread, new, (stored.meta or {}).get("header"))


def _who(d: Diagnosis) -> str:
    ev = d.initiating
    if ev is None:
        return "the new evidence"
    if ev.rank is not None:
        return f"rank {ev.rank}'s log"
    return f"{ev.file}"


def describe_change(old: Diagnosis, new: Diagnosis, added: Sequence[str]) -> str:
    """One sentence on what the new evidence changed ("rank 12's log shows the first failure;
    it is X, not Y")."""
    names = ", ".join(added) or "the new evidence"
    if new.status is Status.FAILURE and new.signature:
        if old.signature is None:
            return f"{_who(new)} names the failure: it is {new.signature.title}."
        if old.signature.id != new.signature.id:
            return (
                f"{_who(new)} shows the first failure; it is {new.signature.title}, "
                f"not {old.signature.title}."
            )
        o, n = old.initiating, new.initiating
        if o and n and (o.file, o.line, o.rank) != (n.file, n.line, n.rank):
            return f"Still {new.signature.title}, but {_who(new)} shows it first ({n.file}:{n.line})."
    elif new.status is not old.status:
        return f"With {names} the result is now: {new.headline}."
    gained = sorted(set(new.environment) - set(old.environment))
    extra = f" It adds environment facts: {', '.join(gained)}." if gained else ""
    return f"{names} does not change the diagnosis: still {new.headline}.{extra}"
