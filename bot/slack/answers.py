"""Follow-up questions in a diagnosis thread: map each to an intent, answer from what is known.

Answers come from two places only: the signature's entry in the library (fix, root causes,
checklists, ``follow_ups``) and the stored, redacted diagnosis of this thread (its initiating
line, downstream groups, environment). Nothing is invented; an intent with nothing to say says so.
Which intent a question asks is ``bot.slack.intents``' business.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rapidfuzz import fuzz, process

from bot.slack.intents import BY_NAME, match_intent, normalise
from bot.slack.render import downstream_summary, escape, where
from signatures.diagnosis import Diagnosis, Status
from signatures.spec import Signature

FOLLOW_UP_MATCH = 88.0  # a question this close to a YAML follow_up gets that answer verbatim


@dataclass(frozen=True)
class Answer:
    intent: str | None
    text: str  # Slack mrkdwn, already escaped


@dataclass(frozen=True)
class Recurrence:
    """Earlier diagnoses of the same signature in this channel (from the store)."""

    count: int  # including this one
    last_label: str | None = None  # "job llama-pretrain, 2 days ago"


def _yaml_follow_up(sig: Signature | None, question: str, intent: str | None) -> str | None:
    if sig is None or not sig.follow_ups:
        return None
    q = normalise(question)
    scored = process.extractOne(
        q, [normalise(f.question) for f in sig.follow_ups], scorer=fuzz.token_sort_ratio
    )
    if scored is not None and scored[1] >= FOLLOW_UP_MATCH:
        return sig.follow_ups[scored[2]].answer
    for f in sig.follow_ups:
        if intent and f.intent == intent:
            return f.answer
    return None


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"• {escape(i)}" for i in items)


def _numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{n}. {escape(i)}" for n, i in enumerate(items, 1))


def _quote(text: str) -> str:
    safe = escape(text).replace("`", "'")
    return f"`{safe}`"


def answer(
    question: str,
    d: Diagnosis,
    sig: Signature | None,
    *,
    recurrence: Recurrence | None = None,
) -> Answer:
    """Answer ``question`` from the stored diagnosis and its signature; intent None: not mapped."""
    intent = match_intent(question)
    if intent is None:
        return Answer(None, "")
    builder = _BUILDERS[intent]
    yaml_answer = _yaml_follow_up(sig, question, intent)
    text = builder(d, sig, recurrence)
    if yaml_answer:
        text = f"{escape(yaml_answer)}\n{text}" if text else escape(yaml_answer)
    if not text:
        name = BY_NAME[intent].label.rstrip("?").lower()
        text = f"I have nothing on record about {escape(name)} for this diagnosis."
    return Answer(intent, text)


def _a_fix(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    steps = []
    for step in d.fix:
        line = escape(step.get("step", ""))
        if step.get("command"):
            line += f"\n    {_quote(step['command'])}"
        if step.get("why"):
            line += f"\n    _{escape(step['why'])}_"
        steps.append(line)
    if not steps:
        return ""
    return "*Fix*\n" + "\n".join(f"{n}. {s}" for n, s in enumerate(steps, 1))


def _a_root_cause(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    parts = []
    if d.root_causes:
        parts.append("*Likely root causes*\n" + _bullets(d.root_causes))
    if sig is not None and sig.mechanism:
        parts.append(f"*How it happens:* {escape(sig.mechanism)}")
    return "\n".join(parts)


def _a_confirm(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    items = list(d.checklist) or (list(sig.confirm) if sig else [])
    out = []
    if items:
        out.append("*To confirm*\n" + _bullets(items))
    if d.decision_path:
        out.append("*Decision path*\n" + _numbered(d.decision_path))
    return "\n".join(out)


def _a_collect(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    out = []
    if sig is not None:
        out.append(f"*Before restarting, capture:* {escape(sig.decision_path.evidence)}")
    if d.missing_facts:
        out.append("*Still missing*\n" + _bullets(d.missing_facts))
    if not out and d.status is not Status.FAILURE:
        out.append(
            "Attach the logs of every rank (or the rank that failed first), "
            "`python -m torch.utils.collect_env`, `nvidia-smi` and `dmesg -T` from the node."
        )
    return "\n".join(out)


def _a_hw_sw(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    if sig is None:
        return ""
    p = sig.decision_path
    return (
        f"*Run one control:* {escape(p.control)}\n"
        f"• If it follows the workload: {escape(p.follows_workload)}\n"
        f"• If it follows the node: {escape(p.follows_node)}"
    )


def _a_recurrence(d: Diagnosis, sig: Signature | None, r: Recurrence | None) -> str:
    out = []
    if r is not None:
        if r.count > 1:
            last = f", last on {escape(r.last_label)}" if r.last_label else ""
            out.append(f"Seen {r.count} times in this channel{last}.")
        else:
            out.append("This is the first time I have seen it in this channel.")
    if sig is not None and sig.prevention:
        out.append("*To keep it from coming back*\n" + _bullets(sig.prevention))
    return "\n".join(out)


def _a_scale(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    out = []
    ranks = {g for grp in d.downstream for g in grp.ranks}
    if d.initiating is not None and d.initiating.rank is not None:
        ranks.add(d.initiating.rank)
    if ranks:
        out.append(f"This run shows {len(ranks)} rank(s) in the logs I read.")
    if sig is not None and sig.affected:
        out.append("*Who it affects*\n" + _bullets(sig.affected))
    return "\n".join(out)


def _a_prevention(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    if sig is None or not sig.prevention:
        return ""
    return "*Prevention*\n" + _bullets(sig.prevention)


def _a_related(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    related = list(dict.fromkeys([*d.related, *(sig.related if sig else ())]))
    if not related:
        return "No related signatures are listed for this one."
    return "*Related*\n" + "\n".join(f"• `{escape(r)}`" for r in related)


def _a_meaning(d: Diagnosis, sig: Signature | None, _r: Recurrence | None) -> str:
    if sig is None:
        if d.initiating is not None:
            return f"No signature knows this line: {_quote(d.initiating.text)}"
        return ""
    out = [f"*{escape(sig.title)}:* {escape(sig.summary)}"]
    if sig.mechanism:
        out.append(escape(sig.mechanism))
    return "\n".join(out)


def _a_which_rank(d: Diagnosis, _s: Signature | None, _r: Recurrence | None) -> str:
    ev = d.initiating
    if ev is None:
        return "No failing line was found, so no rank can be named."
    who = f"Rank {ev.rank}" if ev.rank is not None else "The log does not name the rank; the line"
    return f"{who} failed first, at {where(replace(ev, rank=None))}:\n{_quote(ev.text)}"


def _a_where(d: Diagnosis, _s: Signature | None, _r: Recurrence | None) -> str:
    ev = d.initiating
    if ev is None:
        return "No failing line was found in the logs I read."
    facts = [f"in `{escape(ev.file)}` at line {ev.line}"]
    facts.append(f"on host {escape(ev.host)}" if ev.host else "(the log names no host)")
    facts.append(f"at {escape(ev.time)}" if ev.time else "(the line carries no timestamp)")
    return "It started " + " ".join(facts) + f":\n{_quote(ev.text)}"


def _a_environment(d: Diagnosis, _s: Signature | None, _r: Recurrence | None) -> str:
    if not d.environment:
        return (
            "The logs carry no environment facts. Paste `python -m torch.utils.collect_env` "
            "or `nvidia-smi` output in this thread and I will take it into account."
        )
    return "*Environment found in the logs*\n" + "\n".join(
        f"• {escape(k)}: `{escape(v)}`" for k, v in sorted(d.environment.items())
    )


def _a_evidence(d: Diagnosis, _s: Signature | None, _r: Recurrence | None) -> str:
    ev = d.initiating
    if ev is None:
        return ""
    lines = [*ev.before[-3:], ev.text, *ev.after[:2]]
    code = "\n".join(escape(x).replace("```", "`\u200b``") for x in lines)
    return f"{where(ev)}\n```{code}```"


def _a_is_root_cause(d: Diagnosis, _s: Signature | None, _r: Recurrence | None) -> str:
    if d.status is not Status.FAILURE:
        return "No known failure was named, so there is no cause to defend."
    out = []
    if d.why:
        out.append("*Why this line and not the others*\n" + _bullets(d.why))
    if d.downstream:
        out.append("*These only re-report it*\n" + "\n".join(f"• {s}" for s in downstream_summary(d)))
    return "\n".join(out)


def _a_downstream(d: Diagnosis, _s: Signature | None, _r: Recurrence | None) -> str:
    if not d.downstream:
        return "No other rank reported an error after the first failure in the logs I read."
    lines = []
    for g, summary in zip(d.downstream, downstream_summary(d), strict=True):
        lines.append(f"• {summary}; first at {where(g.first)}")
    return "*After the first failure*\n" + "\n".join(lines)


_BUILDERS: dict[str, Callable[[Diagnosis, Signature | None, Recurrence | None], str]] = {
    "fix": _a_fix,
    "root_cause": _a_root_cause,
    "confirm": _a_confirm,
    "collect": _a_collect,
    "hardware_or_software": _a_hw_sw,
    "recurrence": _a_recurrence,
    "scale": _a_scale,
    "prevention": _a_prevention,
    "related": _a_related,
    "meaning": _a_meaning,
    "which_rank": _a_which_rank,
    "where_started": _a_where,
    "environment": _a_environment,
    "evidence": _a_evidence,
    "is_root_cause": _a_is_root_cause,
    "downstream": _a_downstream,
}
