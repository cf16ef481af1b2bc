"""Block Kit for a diagnosis: pure functions from a ``Diagnosis`` to a Slack message.

Log text is hostile input: everything taken from a log is escaped (``&``, ``<``, ``>``) so a
``<!channel>`` or ``<@U123>`` inside a log never pings anyone. Every message stays inside Slack's
limits (50 blocks, 3,000 characters per section, 150 per header) and carries a fallback ``text``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot.slack import blocks as bk
from bot.slack.advice import advice_section
from bot.slack.blocks import (
    MAX_BLOCKS,
    MAX_FALLBACK,
    MAX_SECTION,
    TRUNCATED,
    RenderedMessage,
    button,
    clip,
    escape,
    escape_keeping_mention,
)
from bot.slack.downstream import downstream_line, downstream_summary
from signatures.diagnosis import Diagnosis, Evidence, Status
from signatures.display import human_time
from signatures.spec import Signature

CONTEXT_BEFORE = 3
CONTEXT_AFTER = 2

# action_ids of the buttons; handlers/actions.py listens for exactly these.
ACTION_EVIDENCE = "denpex_show_evidence"
ACTION_CORRECT = "denpex_feedback_correct"
ACTION_WRONG = "denpex_feedback_wrong"
ACTION_EXPLAIN = "denpex_explain"
ACTION_ASK = "denpex_ask"
ACTIONS = (ACTION_EVIDENCE, ACTION_CORRECT, ACTION_WRONG, ACTION_EXPLAIN, ACTION_ASK)
# A link button: Slack opens the URL and still sends the click, which bot/web/reports.py acknowledges.
ACTION_REPORT = "denpex_open_report"
# The job_meta key of the signed link to the diagnosis' full report; only bot/kinds sets it.
META_REPORT_URL = "report_url"


def where(ev: Evidence) -> str:
    """``file:line · rank 3 · host a · time t`` for one evidence line (escaped)."""
    parts = [f"`{escape(ev.file)}:{ev.line}`"]
    if ev.rank is not None:
        parts.append(f"rank {ev.rank}")
    if ev.host:
        parts.append(f"host {escape(ev.host)}")
    if ev.time:
        parts.append(escape(human_time(ev.time) or ev.time))
    return " · ".join(parts)


def _initiating_lines(ev: Evidence, before: int, after: int) -> list[str]:
    above = list(ev.before)[-before:] if before else []
    below = list(ev.after)[:after] if after else []
    return [*above, ev.text, *below]


def _headline(d: Diagnosis) -> str:
    if d.status is Status.FAILURE and d.signature:
        return f"🔴 {d.signature.title}"
    if d.status is Status.UNRECOGNIZED:
        return "🟠 Unrecognized failure"
    if d.status is Status.DEGRADED:
        return f"🟡 {d.headline}"
    if d.status is Status.EMPTY:
        return "⚪ Empty log"
    return "🟢 No failure found"


def fallback_text(d: Diagnosis) -> str:
    """The notification text: headline, category, confidence, and the initiating line."""
    if d.status is Status.FAILURE and d.signature:
        text = f"{d.signature.title} ({d.signature.category}, {round(d.confidence * 100)}% confidence)"
    else:
        text = d.headline
    if d.initiating is not None:
        text += f": {d.initiating.text.strip()}"
    return escape(clip(text, MAX_FALLBACK))


def _value(d: Diagnosis) -> str:
    return d.signature.id if d.signature else d.status.value


def action_buttons(d: Diagnosis, report_url: str | None = None) -> dict[str, Any]:
    """The buttons under every diagnosis; "Open full report" first when there is a link."""
    value = _value(d)
    elements = [{**button("Open full report", ACTION_REPORT, value), "url": report_url}] if report_url else []
    elements += [
        button("Show evidence", ACTION_EVIDENCE, value),
        button("Correct", ACTION_CORRECT, value, "primary"),
        button("Wrong diagnosis", ACTION_WRONG, value, "danger"),
    ]
    if d.signature is not None:
        elements.append(button("Explain", ACTION_EXPLAIN, d.signature.id))
    return {"type": "actions", "block_id": "denpex_diagnosis_actions", "elements": elements}


def _numbered(items: Iterable[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def _bullets(items: Iterable[str]) -> str:
    return "\n".join(f"• {item}" for item in items)


def _fix_lines(d: Diagnosis) -> list[str]:
    out = []
    for step in d.fix:
        line = escape(step.get("step", ""))
        if step.get("command"):
            command = escape(step["command"]).replace("`", "'")
            line += f"\n    `{command}`"
        out.append(line)
    return out


def _short_step(step: str) -> str:
    # "Capture the evidence: ..." -> keep the full step but cut long ones to one line.
    return clip(step, 220, "…")


def render_diagnosis(d: Diagnosis, *, job_meta: Mapping[str, str] | None = None) -> RenderedMessage:
    """The diagnosis message posted in the incident thread."""
    meta = dict(job_meta or {})
    blocks: list[dict[str, Any]] = [bk.header(_headline(d))]
    optional: list[dict[str, Any]] = []  # dropped from the end first when over the size budget
    if d.advice is not None:  # the 3 a.m. question first: requeue it or not
        blocks.append(advice_section(d.advice))

    if meta.get("changed"):
        blocks.append(bk.section(f":arrows_counterclockwise: *What changed:* {escape(meta['changed'])}"))

    if d.status is Status.FAILURE and d.signature:
        facts = [
            f"*Category:* {escape(d.signature.category)}",
            f"*Confidence:* {round(d.confidence * 100)}%",
            f"*Signature:* `{escape(d.signature.id)}`",
        ]
        blocks.append(bk.section(" · ".join(facts)))
        if d.summary:
            blocks.append(bk.section(escape(d.summary)))
    elif d.status is Status.UNRECOGNIZED:
        blocks.append(
            bk.section(
                "No signature in the library matches this failure. "
                "The first line that states an error is below."
            )
        )
    elif d.status is Status.DEGRADED:
        # Crash or not is the first thing on-call needs to know: say it in words.
        blocks.append(bk.section(escape(d.summary)))
    elif d.status is Status.EMPTY:
        blocks.append(bk.section("The file holds no text lines: attach the log again."))
    else:
        files = len(d.files) or 1
        blocks.append(
            bk.section(
                f"No failure found in {d.lines_read:,} lines of {files} "
                f"file{'s' if files != 1 else ''}. If the job did fail, attach the log of the "
                "rank that exited first, the scheduler's job output (sacct / kubectl logs) "
                "and `dmesg -T` from its node."
            )
        )

    if meta.get("recurrence"):
        blocks.append(bk.context(f":repeat: {escape(meta['recurrence'])}"))

    ev = d.initiating
    long_evidence = more_context = False
    if ev is not None:
        label = {Status.FAILURE: "*Initiating line*", Status.DEGRADED: "*Where it degraded*"}.get(
            d.status, "*First error line*"
        )
        lines = _initiating_lines(ev, CONTEXT_BEFORE, CONTEXT_AFTER)
        section = bk.code_section(f"{label} — {where(ev)}", lines)
        # Cut to fit: the whole evidence goes into a file in the thread.
        long_evidence = TRUNCATED in section["text"]["text"] or not all(
            escape(line).replace("```", "`\u200b``") in section["text"]["text"] for line in lines
        )
        more_context = len(ev.before) > CONTEXT_BEFORE or len(ev.after) > CONTEXT_AFTER
        blocks.append(section)

    if d.downstream:
        text = "*What followed downstream*\n" + _bullets(downstream_summary(d))
        blocks.append(bk.section(text))

    if d.status in (Status.FAILURE, Status.DEGRADED):
        if d.root_causes:
            blocks.append(bk.section("*Likely root causes*\n" + _bullets(escape(c) for c in d.root_causes)))
        if d.fix:
            blocks.append(bk.section("*Fix*\n" + _numbered(_fix_lines(d))))
        if d.decision_path:
            path = _numbered(escape(_short_step(s)) for s in d.decision_path)
            optional.append(bk.section("*How to confirm before acting*\n" + path))
    elif d.status is Status.UNRECOGNIZED:
        blocks.append(
            bk.section(
                "*What to attach in this thread:* the logs of all ranks (or the rank that failed "
                "first), `python -m torch.utils.collect_env`, `nvidia-smi` and `dmesg -T` from "
                "the node."
            )
        )

    if d.missing_facts:
        asks = _bullets(escape(f) for f in d.missing_facts)
        optional.insert(0, bk.section(f":question: *Can you tell me, in this thread?*\n{asks}"))

    footer = []
    if d.files:
        names = ", ".join(escape(f) for f in d.files[:5])
        more = f" and {len(d.files) - 5} more" if len(d.files) > 5 else ""
        footer.append(f"Read {d.lines_read:,} lines of {names}{more}")
    footer += [f"skipped {escape(note)}" for note in d.skipped]
    if meta.get("job"):
        footer.append(f"job {escape(meta['job'])}")
    if long_evidence:
        footer.append("the full evidence is in the file below")
    elif more_context:
        footer.append("press *Show evidence* for more context")
    if footer:
        optional.append(bk.context(" · ".join(footer)))

    actions = action_buttons(d, meta.get(META_REPORT_URL))
    blocks = bk.fit(blocks, optional, actions)
    return RenderedMessage(
        text=fallback_text(d),
        blocks=blocks,
        file_text=evidence_text(d) if long_evidence else None,
    )


def evidence_text(d: Diagnosis) -> str:
    """Plain text of all the evidence (for a file in the thread); log text is not escaped here."""
    out = [f"{d.headline}", ""]
    if d.initiating is not None:
        ev = d.initiating
        out.append(f"Initiating line: {ev.file}:{ev.line} rank={ev.rank} host={ev.host} time={ev.time}")
        out.extend(f"  {line}" for line in ev.before)
        out.append(f"> {ev.text}")
        out.extend(f"  {line}" for line in ev.after)
        out.append("")
    for g in d.downstream:
        out.append(f"Downstream: {downstream_line(g)}; ranks {list(g.ranks)}")
        out.append(f"  first at {g.first.file}:{g.first.line}: {g.first.text}")
    if d.why:
        out.append("")
        out.append("Why this line:")
        out.extend(f"  - {w}" for w in d.why)
    if d.environment:
        out.append("")
        out.append("Environment:")
        out.extend(f"  {k}: {v}" for k, v in sorted(d.environment.items()))
    return "\n".join(out) + "\n"


def render_evidence(d: Diagnosis) -> RenderedMessage:
    """The "Show evidence" answer: wider context, downstream first lines, and why this line won."""
    blocks: list[dict[str, Any]] = [bk.header("Evidence")]
    ev = d.initiating
    if ev is not None:
        blocks.append(bk.code_section(f"*Initiating line* — {where(ev)}", [*ev.before, ev.text, *ev.after]))
    for g in d.downstream[:10]:
        ranks = ", ".join(str(r) for r in g.ranks[:20]) + (" …" if len(g.ranks) > 20 else "")
        title = f"*{downstream_line(g)}*" + (f" (ranks {ranks})" if ranks else "")
        blocks.append(bk.code_section(f"{title} — first at {where(g.first)}", [g.first.text]))
    if d.why:
        blocks.append(bk.section("*Why this line*\n" + _bullets(escape(w) for w in d.why)))
    if d.environment:
        env = _bullets(f"{escape(k)}: `{escape(v)}`" for k, v in sorted(d.environment.items()))
        blocks.append(bk.section("*Environment*\n" + env))
    if len(blocks) == 1:
        blocks.append(bk.section("No evidence lines were kept for this diagnosis."))
    blocks = bk.fit(blocks[: MAX_BLOCKS - 1], [], bk.context("Log text is redacted before storage."))
    return RenderedMessage(
        text=f"Evidence for: {escape(d.headline)}", blocks=blocks, file_text=evidence_text(d)
    )


def render_error(reason: str) -> RenderedMessage:
    """A clear reply for a job that could not be diagnosed (too big, binary, timed out...)."""
    text = escape(clip(reason.strip() or "Something went wrong.", MAX_SECTION - 40))
    return RenderedMessage(
        text=f"Could not diagnose this: {text}",
        blocks=[bk.section(f":warning: *Could not diagnose this.* {text}")],
    )


def render_parent(header: str, *, mention: str | None = None) -> RenderedMessage:
    """The parent message a thread hangs from (slash commands, webhooks); ``mention`` is the
    requesting user, whose mention in the header stays a mention."""
    text = escape_keeping_mention(clip(header.strip() or "Denpex diagnosis", MAX_SECTION), mention)
    return RenderedMessage(text=text, blocks=[bk.section(f":mag: {text}")])


def render_headline(
    d: Diagnosis, header: str | None = None, *, mention: str | None = None
) -> RenderedMessage:
    """A parent message updated with the diagnosis headline (chat.update; text stays < 4,000)."""
    head = _headline(d)
    prefix = f"{escape_keeping_mention(clip(header, 1000), mention)} — " if header else ""
    text = clip(f"{prefix}{head}", 3900)
    return RenderedMessage(text=text, blocks=[bk.section(f":mag: {text}")])


def render_text(text: str, *, escaped: bool = False) -> RenderedMessage:
    """A plain answer in one section (follow-up answers, help, listings)."""
    body = text if escaped else escape(text)
    chunks = [body[i : i + MAX_SECTION] for i in range(0, len(body), MAX_SECTION)][:MAX_BLOCKS]
    return RenderedMessage(
        text=clip(body, MAX_FALLBACK), blocks=[bk.section(c) for c in chunks] or [bk.section(" ")]
    )


def render_choices(prompt: str, choices: Sequence[tuple[str, str]]) -> RenderedMessage:
    """A prompt with one button per (label, value); used when a question could not be mapped."""
    blocks: list[dict[str, Any]] = [bk.section(escape(prompt))]
    for start in range(0, len(choices), 5):
        chunk = choices[start : start + 5]
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {**button(label, ACTION_ASK, value), "action_id": f"{ACTION_ASK}_{start + i}"}
                    for i, (label, value) in enumerate(chunk)
                ],
            }
        )
    labels = ", ".join(label for label, _ in choices)
    return RenderedMessage(
        text=clip(f"{escape(prompt)} {escape(labels)}", MAX_FALLBACK), blocks=blocks[:MAX_BLOCKS]
    )


def render_signature(sig: Signature) -> RenderedMessage:
    """The "Explain" answer: a signature's full entry from the library."""
    blocks: list[dict[str, Any]] = [
        bk.header(sig.title),
        bk.context(
            f"`{escape(sig.id)}` · {escape(sig.category)} · {escape(sig.severity.value)} · "
            f"role {escape(sig.role.value)}"
        ),
        bk.section(f"{escape(sig.summary)}\n\n*How it happens:* {escape(sig.mechanism)}"),
    ]
    if sig.root_causes:
        blocks.append(bk.section("*Root causes*\n" + _bullets(escape(c) for c in sig.root_causes)))
    if sig.confirm:
        blocks.append(bk.section("*To confirm*\n" + _bullets(escape(c) for c in sig.confirm)))
    if sig.fix:
        steps = []
        for step in sig.fix:
            line = escape(step.step)
            if step.command:
                command = escape(step.command).replace("`", "'")
                line += f"\n    `{command}`"
            if step.why:
                line += f"\n    _{escape(step.why)}_"
            steps.append(line)
        blocks.append(bk.section("*Fix*\n" + _numbered(steps)))
    if sig.prevention:
        blocks.append(bk.section("*Prevention*\n" + _bullets(escape(p) for p in sig.prevention)))
    steps = sig.decision_path.steps()
    blocks.append(bk.section("*Decision path*\n" + _numbered(escape(s) for s in steps)))
    if sig.related:
        blocks.append(bk.context("Related: " + ", ".join(f"`{escape(r)}`" for r in sig.related)))
    if sig.references:
        blocks.append(bk.context("References: " + " ".join(escape(r) for r in sig.references[:5])))
    return RenderedMessage(
        text=f"{escape(sig.title)}: {escape(sig.summary)}"[:MAX_FALLBACK],
        blocks=blocks[:MAX_BLOCKS],
    )
