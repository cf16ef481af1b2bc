"""The ``/denpex`` look-ups that read the store and the library: history, signatures, stats."""

from __future__ import annotations

from rapidfuzz import fuzz

from bot.jobs.store import Store
from bot.jobs.worker import JobContext
from bot.kinds.followups import library
from bot.kinds.posting import privately
from bot.slack.render import escape, render_text
from bot.slack.thread import label
from handlers.jobs import Job
from signatures.diagnosis import Diagnosis

MAX_LISTED = 40


async def handle_history(job: Job, ctx: JobContext) -> None:
    """``/denpex history [N]``: the newest diagnoses in the channel."""
    count = int(job.text or 10)
    entries = await ctx.store.history(job.channel or "", count) if job.channel else []
    if not entries:
        await privately(ctx, job, render_text("No diagnoses in this channel yet."))
        return
    lines = [f"*Last {len(entries)} diagnoses in this channel*"]
    for e in entries:
        d = Diagnosis.from_dict(e.diagnosis)
        sig = f" (`{escape(d.signature.id)}`)" if d.signature else ""
        lines.append(f"• {escape(label(e))}: {escape(d.headline)}{sig}")
    await privately(ctx, job, render_text("\n".join(lines), escaped=True))


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
        await privately(ctx, job, render_text(f"No signature matches {query!r}."))
        return
    lines = [f"*{len(sigs)} signature(s)*" + (f" matching {escape(query)}" if query else "")]
    lines += [f"• `{escape(s.id)}` {escape(s.title)} ({escape(s.category)})" for s in sigs[:MAX_LISTED]]
    if len(sigs) > MAX_LISTED:
        lines.append(f"… and {len(sigs) - MAX_LISTED} more; add a query to narrow it.")
    await privately(ctx, job, render_text("\n".join(lines), escaped=True))


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
        await privately(ctx, job, render_text("No diagnoses or feedback recorded yet."))
        return
    lines = ["*Signature · diagnoses · correct · wrong*"]
    lines += [f"• `{escape(i)}` · {n} · {ok} · {bad}" for i, n, ok, bad in rows[:MAX_LISTED]]
    await privately(ctx, job, render_text("\n".join(lines), escaped=True))
