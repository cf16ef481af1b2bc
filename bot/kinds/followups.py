"""Answers in a diagnosis thread after the first reply: questions, buttons and feedback."""

from __future__ import annotations

import logging
from functools import cache

from rapidfuzz import fuzz
from slack_sdk.errors import SlackApiError

from bot.jobs.outcomes import JobFailed
from bot.jobs.store import Store, StoredDiagnosis
from bot.jobs.worker import Handler, JobContext
from bot.kinds.posting import answer_where_asked, in_thread, privately, stored_of_thread
from bot.model.answerer import ModelAnswerer
from bot.slack import answers as followup
from bot.slack.intents import menu
from bot.slack.model_reply import render_model_answer
from bot.slack.render import (
    escape,
    render_choices,
    render_evidence,
    render_signature,
    render_text,
)
from bot.slack.thread import label
from handlers.jobs import Job
from signatures import Library, default_library
from signatures.diagnosis import Diagnosis

log = logging.getLogger(__name__)

EVIDENCE_FILE_MIN = 3000  # characters of evidence text worth a file rather than a message


@cache
def library() -> Library:
    """The signature library, loaded once per process."""
    return default_library()


# Questions the model may take when one is configured: none of the intents, or "explain".
MODEL_INTENTS = (None, "meaning")


def make_followup(model: ModelAnswerer | None = None) -> Handler:
    """The handler for questions in a diagnosis thread; ``model`` answers what no intent takes."""

    async def handle_followup(job: Job, ctx: JobContext) -> None:
        """Answer from the stored diagnosis and its signature; the model only as a fallback."""
        stored = await stored_of_thread(ctx, job)
        d = Diagnosis.from_dict(stored.diagnosis)
        sig = library().by_id.get(stored.signature_id or "")
        rec = await _recurrence(ctx.store, stored)
        ans = followup.answer(job.text or "", d, sig, recurrence=rec)
        modelled = None
        if model is not None and ans.intent in MODEL_INTENTS:
            modelled = await model.answer(d, job.text or "", job.channel)
        if modelled is not None:
            known = ans.text if ans.intent is not None else ""
            message = render_model_answer(modelled.text, modelled.model, modelled.shared, known=known)
        elif ans.intent is None:
            message = render_choices(
                "I can't map that question to what I know about this failure. I can answer:",
                menu(),
            )
        else:
            message = render_text(ans.text, escaped=True)
        await in_thread(ctx, job, message)

    return handle_followup


handle_followup = make_followup()


async def _recurrence(store: Store, stored: StoredDiagnosis) -> followup.Recurrence | None:
    if not stored.fingerprint or not stored.channel:
        return None
    rec = await store.recurrence(stored.fingerprint, stored.channel)
    last = None
    for other in await store.history(stored.channel, 50):
        if other.id != stored.id and other.fingerprint == stored.fingerprint:
            last = label(other)
            break
    return followup.Recurrence(count=max(1, rec.in_channel), last_label=last)


async def handle_evidence(job: Job, ctx: JobContext) -> None:
    """The "Show evidence" button: wider context in the thread, a file when it is long."""
    stored = await stored_of_thread(ctx, job)
    message = render_evidence(Diagnosis.from_dict(stored.diagnosis))
    posted = await in_thread(ctx, job, message)
    # A retry that found its earlier answer does not attach the file again.
    if (
        message.file_text
        and len(message.file_text) > EVIDENCE_FILE_MIN
        and posted.channel
        and not posted.found
    ):
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
    await answer_where_asked(ctx, job, message)


async def handle_feedback(job: Job, ctx: JobContext) -> None:
    """Correct / Wrong diagnosis: counted once per user per diagnosis."""
    stored = await stored_of_thread(ctx, job)
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
    await privately(ctx, job, render_text(text))


async def handle_notice(job: Job, ctx: JobContext) -> None:
    """A plain message decided by a handler (a refused file, help for a mention)."""
    await answer_where_asked(ctx, job, render_text(job.text or ""))
