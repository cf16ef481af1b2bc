"""Worker handlers for everything after the first diagnosis: follow-up questions, buttons,
more evidence in the thread, and the ``/denpex`` look-ups.

Each handler posts its own answer and records that it did (job progress), so a retried job never
answers twice. Raw log text never outlives its job: a thread keeps only Slack file ids and the
redacted text of pasted logs, enough to fetch and diagnose the whole thread again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from typing import Any

import redis.asyncio as aioredis
from rapidfuzz import fuzz
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot import followup
from bot.keys import Keys
from bot.render import (
    RenderedMessage,
    escape,
    render_choices,
    render_diagnosis,
    render_evidence,
    render_signature,
    render_text,
)
from bot.reply import PostedReply, SlackReplier
from bot.store import DEFAULT_RETENTION_S, Store, StoredDiagnosis, fingerprint
from bot.worker import KIND_DIAGNOSE, JobContext, JobFailed, Worker
from handlers.jobs import Job, LogRef
from signatures import Library, default_library, redact
from signatures.diagnosis import Diagnosis, Status

log = logging.getLogger(__name__)

DONE_REACTION = "white_check_mark"
FAILED_REACTION = "warning"
MAX_LISTED = 40
EVIDENCE_FILE_MIN = 3000  # characters of evidence text worth a file rather than a message


@cache
def library() -> Library:
    """The signature library, loaded once per process."""
    return default_library()


class ThreadEvidence:
    """Per thread: the logs it holds (as references) and the missing facts already asked."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys | None = None,
        retention_s: int = DEFAULT_RETENTION_S,
    ) -> None:
        self.redis = redis
        self.keys = keys or Keys()
        self.retention_s = retention_s

    async def record(self, channel: str, thread_ts: str, logs: Iterable[LogRef]) -> None:
        """Remember where the thread's logs are; pasted text is kept only in redacted form."""
        key = self.keys.thread_logs(channel, thread_ts)
        known = {_identity(r) for r in await self.logs(channel, thread_ts)}
        for ref in logs:
            if ref.kind == "inline":
                # Kept bounded (head and tail, where failures and their cascades are) and redacted,
                # off the event loop: the web process shares this loop when workers run in it.
                excerpt = _excerpt(ref.text or "")
                ref = replace(ref, text=await asyncio.to_thread(redact, excerpt))
            if _identity(ref) in known:
                continue
            known.add(_identity(ref))
            await self.redis.rpush(key, json.dumps(ref.to_dict()))
        await self.redis.expire(key, self.retention_s)

    async def logs(self, channel: str, thread_ts: str) -> list[LogRef]:
        """Every log reference recorded for the thread, oldest first."""
        raw = await self.redis.lrange(self.keys.thread_logs(channel, thread_ts), 0, -1)
        return [LogRef.from_dict(json.loads(r)) for r in raw]

    async def asked(self, channel: str, thread_ts: str) -> set[str]:
        """Missing facts already asked in the thread."""
        members = await self.redis.smembers(self.keys.thread_asked(channel, thread_ts))
        return {m.decode() if isinstance(m, bytes) else m for m in members}

    async def mark_asked(self, channel: str, thread_ts: str, facts: Sequence[str]) -> None:
        """Never ask these again in this thread."""
        if facts:
            key = self.keys.thread_asked(channel, thread_ts)
            await self.redis.sadd(key, *facts)
            await self.redis.expire(key, self.retention_s)


INLINE_HEAD = 64 * 1024
INLINE_TAIL = 448 * 1024


def _excerpt(text: str) -> str:
    """At most INLINE_HEAD + INLINE_TAIL characters of a pasted log, cut at line ends."""
    if len(text) <= INLINE_HEAD + INLINE_TAIL:
        return text
    head = text[:INLINE_HEAD].rsplit("\n", 1)[0]
    tail = text[-INLINE_TAIL:].split("\n", 1)[-1]
    skipped = len(text) - len(head) - len(tail)
    return f"{head}\n[... {skipped} characters of this log were not kept ...]\n{tail}"


def _identity(ref: LogRef) -> tuple[str, str]:
    return (ref.kind, ref.file_id or ref.url or ref.name)


class ThreadReplier(SlackReplier):
    """The worker's replier, plus what a thread needs afterwards: the logs it was built from,
    the facts it asked, and the emoji on the file's message (working -> done)."""

    def __init__(
        self, client: Any, evidence: ThreadEvidence, *, store: Store | None = None, **kw: Any
    ) -> None:
        super().__init__(client, **kw)
        self.evidence = evidence
        self.store = store

    async def deliver(
        self,
        job: Job,
        diagnosis: Diagnosis | None,
        error: str | None,
        *,
        job_meta: dict[str, str] | None = None,
    ) -> PostedReply:
        """Post as usual, then record the thread's logs and swap the working emoji."""
        if diagnosis is not None and job_meta and job_meta.get("recurrence"):
            last = await self._last_seen(job, diagnosis)
            if last:
                job_meta = {**job_meta, "recurrence": f"{job_meta['recurrence']}, last on {last}"}
        posted = await super().deliver(job, diagnosis, error, job_meta=job_meta)
        thread = job.thread_ts or posted.thread_ts or posted.ts
        if diagnosis is not None and job.channel and thread:
            await self.evidence.record(job.channel, thread, job.logs)
            await self.evidence.mark_asked(job.channel, thread, diagnosis.missing_facts)
        await self.finish_reaction(job, ok=diagnosis is not None)
        return posted

    async def _last_seen(self, job: Job, diagnosis: Diagnosis) -> str | None:
        """'job llama-pretrain, 2024-05-01 10:20 UTC' for the previous diagnosis of the same
        failure in this channel."""
        fp = fingerprint(diagnosis.to_dict())
        if self.store is None or not job.channel or not fp:
            return None
        for other in await self.store.history(job.channel, 50):
            if other.id != job.id and other.fingerprint == fp:
                return _label(other)
        return None

    async def finish_reaction(self, job: Job, *, ok: bool) -> None:
        """Replace the working emoji on the file's message with done or failed."""
        working, ts = job.meta.get("reaction"), job.meta.get("message_ts")
        if not working or not ts or not job.channel:
            return
        for method, name in (
            (self.client.reactions_remove, working),
            (self.client.reactions_add, DONE_REACTION if ok else FAILED_REACTION),
        ):
            try:
                await method(channel=job.channel, timestamp=ts, name=name)
            except SlackApiError as exc:  # a courtesy: never fail the job over an emoji
                log.info("reaction %s on %s: %s", name, ts, exc.response.get("error"))


# -- posting helpers -----------------------------------------------------------------------


async def _in_thread(ctx: JobContext, job: Job, message: RenderedMessage) -> PostedReply:
    posted = await ctx.replier.post(job, message, thread_ts=job.thread_ts)
    await ctx.queue.set_progress(job.id, replied=job.kind, reply_ts=posted.ts or "")
    return posted


async def _privately(ctx: JobContext, job: Job, message: RenderedMessage) -> None:
    """An ephemeral answer to the person who asked (slash commands, feedback)."""
    if job.response_url:
        resp = await AsyncWebhookClient(job.response_url).send(
            text=message.text, blocks=message.blocks, response_type="ephemeral"
        )
        if resp.status_code != 200:
            raise RuntimeError(f"response_url answered HTTP {resp.status_code}")
    elif job.channel and job.user:
        kwargs: dict[str, Any] = {"thread_ts": job.thread_ts} if job.thread_ts else {}
        await ctx.replier.client.chat_postEphemeral(
            channel=job.channel, user=job.user, text=message.text, blocks=message.blocks, **kwargs
        )
    else:
        raise JobFailed(message.text)
    await ctx.queue.set_progress(job.id, replied=job.kind)


async def _answer(ctx: JobContext, job: Job, message: RenderedMessage) -> None:
    """In the thread when the job came from one, privately otherwise."""
    if job.thread_ts and job.channel:
        await _in_thread(ctx, job, message)
    else:
        await _privately(ctx, job, message)


async def _stored(ctx: JobContext, job: Job) -> StoredDiagnosis:
    stored = None
    if job.channel and job.thread_ts:
        stored = await ctx.store.by_thread(job.channel, job.thread_ts)
    if stored is None:
        raise JobFailed("I no longer have the diagnosis of this thread (it may have expired).")
    return stored


# -- handlers ------------------------------------------------------------------------------


async def handle_followup(job: Job, ctx: JobContext) -> None:
    """Answer a question in a diagnosis thread from the stored diagnosis and its signature."""
    stored = await _stored(ctx, job)
    d = Diagnosis.from_dict(stored.diagnosis)
    sig = library().by_id.get(stored.signature_id or "")
    rec = await _recurrence(ctx.store, stored)
    ans = followup.answer(job.text or "", d, sig, recurrence=rec)
    if ans.intent is None:
        message = render_choices(
            "I can't map that question to what I know about this failure. I can answer:",
            followup.menu(),
        )
    else:
        message = render_text(ans.text, escaped=True)
    await _in_thread(ctx, job, message)


async def _recurrence(store: Store, stored: StoredDiagnosis) -> followup.Recurrence | None:
    if not stored.fingerprint or not stored.channel:
        return None
    rec = await store.recurrence(stored.fingerprint, stored.channel)
    label = None
    for other in await store.history(stored.channel, 50):
        if other.id != stored.id and other.fingerprint == stored.fingerprint:
            label = _label(other)
            break
    return followup.Recurrence(count=max(1, rec.in_channel), last_label=label)


def _label(stored: StoredDiagnosis) -> str:
    when = datetime.fromtimestamp(stored.created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta = stored.meta or {}
    job = meta.get("job_name") or meta.get("job") or meta.get("job_id")
    return f"job {job}, {when}" if job else when


async def handle_evidence(job: Job, ctx: JobContext) -> None:
    """The "Show evidence" button: wider context in the thread, a file when it is long."""
    stored = await _stored(ctx, job)
    message = render_evidence(Diagnosis.from_dict(stored.diagnosis))
    posted = await _in_thread(ctx, job, message)
    if message.file_text and len(message.file_text) > EVIDENCE_FILE_MIN and posted.channel:
        try:
            await ctx.replier.client.files_upload_v2(
                channel=posted.channel,
                thread_ts=job.thread_ts,
                content=message.file_text,
                filename="denpex-evidence.txt",
                title="Full evidence",
            )
        except SlackApiError as exc:
            log.warning("evidence file not attached: %s", exc.response.get("error"))


async def handle_explain(job: Job, ctx: JobContext) -> None:
    """The "Explain" button and ``/denpex explain ID``: a signature's full entry."""
    wanted = (job.meta.get("value") or "").strip().lower()
    lib = library()
    sig = lib.by_id.get(wanted)
    if sig is None:
        ids = [s.id for s in lib.signatures]
        close = sorted(ids, key=lambda i: fuzz.ratio(i, wanted), reverse=True)[:3]
        hint = ", ".join(f"`{escape(i)}`" for i in close)
        message = render_text(
            f"No signature `{escape(wanted)}`. Did you mean {hint}? See `/denpex signatures`.",
            escaped=True,
        )
    else:
        message = render_signature(sig)
    await _answer(ctx, job, message)


async def handle_feedback(job: Job, ctx: JobContext) -> None:
    """Correct / Wrong diagnosis: counted once per user per diagnosis."""
    stored = await _stored(ctx, job)
    verdict = "correct" if job.text == "correct" else "wrong"
    if not job.user:
        raise JobFailed("Feedback needs a user.")
    first = await ctx.store.record_feedback(stored.id, job.user, verdict)
    if not first:
        text = "You already gave feedback on this diagnosis; it counts once."
    elif verdict == "correct":
        text = "Thanks, recorded as correct."
    else:
        text = (
            "Thanks, recorded as wrong. If you know the real cause, say it in this thread, or "
            "drop more logs here (another rank, `dmesg`, `nvidia-smi`) and I will look again."
        )
    await _privately(ctx, job, render_text(text))


async def handle_notice(job: Job, ctx: JobContext) -> None:
    """A plain message decided by a handler (a refused file, help for a mention)."""
    await _answer(ctx, job, render_text(job.text or ""))


async def handle_history(job: Job, ctx: JobContext) -> None:
    """``/denpex history [N]``: the newest diagnoses in the channel."""
    count = int(job.text or 10)
    entries = await ctx.store.history(job.channel or "", count) if job.channel else []
    if not entries:
        await _privately(ctx, job, render_text("No diagnoses in this channel yet."))
        return
    lines = [f"*Last {len(entries)} diagnoses in this channel*"]
    for e in entries:
        d = Diagnosis.from_dict(e.diagnosis)
        sig = f" (`{escape(d.signature.id)}`)" if d.signature else ""
        lines.append(f"• {escape(_label(e))}: {escape(d.headline)}{sig}")
    await _privately(ctx, job, render_text("\n".join(lines), escaped=True))


async def handle_signatures(job: Job, ctx: JobContext) -> None:
    """``/denpex signatures [query]``: the failures Denpex knows, best matches first."""
    query = (job.text or "").strip().lower()
    sigs = list(library().signatures)
    if query:
        scored = [
            (max(fuzz.partial_ratio(query, f"{s.id} {s.title} {' '.join(s.tags)}".lower()), 0), s)
            for s in sigs
        ]
        sigs = [s for score, s in sorted(scored, key=lambda x: -x[0]) if score >= 70]
    if not sigs:
        await _privately(ctx, job, render_text(f"No signature matches {query!r}."))
        return
    lines = [f"*{len(sigs)} signature(s)*" + (f" matching {escape(query)}" if query else "")]
    lines += [f"• `{escape(s.id)}` {escape(s.title)} ({escape(s.category)})" for s in sigs[:MAX_LISTED]]
    if len(sigs) > MAX_LISTED:
        lines.append(f"… and {len(sigs) - MAX_LISTED} more; add a query to narrow it.")
    await _privately(ctx, job, render_text("\n".join(lines), escaped=True))


async def signature_counts(store: Store) -> list[tuple[str, int, int, int]]:
    """(signature id, diagnoses, confirmed, disputed) for every signature with any count."""
    # Read the counters themselves, not the library: retired signatures keep their history.
    pattern = store.keys.signature_stats("*")
    head = pattern[:-1]
    out = []
    async for key in store.redis.scan_iter(match=pattern, count=500):
        sig_id = (key.decode() if isinstance(key, bytes) else str(key))[len(head) :]
        st = await store.signature_stats(sig_id)
        if st.diagnoses or st.confirmed or st.disputed:
            out.append((sig_id, st.diagnoses, st.confirmed, st.disputed))
    return sorted(out, key=lambda r: (-r[1], r[0]))


async def handle_stats(job: Job, ctx: JobContext) -> None:
    """``/denpex stats``: per-signature diagnoses and feedback."""
    rows = await signature_counts(ctx.store)
    if not rows:
        await _privately(ctx, job, render_text("No diagnoses or feedback recorded yet."))
        return
    lines = ["*Signature · diagnoses · correct · wrong*"]
    lines += [f"• `{escape(i)}` · {n} · {ok} · {bad}" for i, n, ok, bad in rows[:MAX_LISTED]]
    await _privately(ctx, job, render_text("\n".join(lines), escaped=True))


def make_rediagnose(evidence: ThreadEvidence) -> Callable[[Job, JobContext], Any]:
    """The handler for more evidence in a diagnosis thread."""

    async def handle_rediagnose(job: Job, ctx: JobContext) -> None:
        channel, thread = job.channel, job.thread_ts
        stored = await ctx.store.by_thread(channel, thread) if channel and thread else None
        if stored is None or not channel or not thread:
            # Not (or no longer) a diagnosis thread: diagnose the new logs on their own.
            await ctx.worker.handlers[KIND_DIAGNOSE](job, ctx)
            return
        previous = Diagnosis.from_dict(stored.diagnosis)
        refs = _unique([*await evidence.logs(channel, thread), *job.logs])
        new = await _engine(ctx.worker, replace(job, logs=refs))
        asked = await evidence.asked(channel, thread)
        new = replace(new, missing_facts=tuple(f for f in new.missing_facts if f not in asked))
        changed = describe_change(previous, new, [r.name for r in job.logs])
        await ctx.store.save(stored.id, new.to_dict(), job=job, channel=channel, thread_ts=thread)
        await evidence.record(channel, thread, job.logs)
        await evidence.mark_asked(channel, thread, new.missing_facts)
        message = render_diagnosis(new, job_meta={"changed": changed})
        posted = await _in_thread(ctx, job, message)
        if posted.ts:
            await ctx.store.set_reply(stored.id, posted.ts)
        await _update_original(ctx, stored, new, channel, thread)
        if isinstance(ctx.replier, ThreadReplier):
            await ctx.replier.finish_reaction(job, ok=True)

    return handle_rediagnose


async def _engine(worker: Worker, job: Job) -> Diagnosis:
    # The worker's own fetch + engine run (downloads, limits, process pool, time limit).
    return await worker._run_engine(job)


def _unique(refs: Sequence[LogRef]) -> list[LogRef]:
    seen: set[tuple[str, str]] = set()
    out = []
    for r in refs:
        if _identity(r) not in seen:
            seen.add(_identity(r))
            out.append(r)
    return out


async def _update_original(
    ctx: JobContext, stored: StoredDiagnosis, new: Diagnosis, channel: str, thread: str
) -> None:
    """Put the new headline on the first diagnosis message (and on Denpex's own parent)."""
    if stored.reply_ts:
        note = "Updated with more evidence from this thread; the newest reply below says what changed."
        message = render_diagnosis(new, job_meta={"changed": note})
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


def install(worker: Worker, evidence: ThreadEvidence) -> None:
    """Register every handler of this module on ``worker``."""
    handlers = {
        "followup": handle_followup,
        "evidence": handle_evidence,
        "explain": handle_explain,
        "feedback": handle_feedback,
        "notice": handle_notice,
        "history": handle_history,
        "signatures": handle_signatures,
        "stats": handle_stats,
        "rediagnose": make_rediagnose(evidence),
    }
    for kind, fn in handlers.items():
        worker.register_handler(kind, fn)
