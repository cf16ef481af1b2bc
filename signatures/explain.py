"""The words of a diagnosis: why the initiating line won, what the others were, how sure it is."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from signatures.candidate import (
    TIER_BENIGN,
    TIER_DEATH,
    TIER_DEGRADED,
    TIER_DOWNSTREAM,
    TIER_INITIATING,
    TIER_LATE_UNKNOWN,
    TIER_UNKNOWN,
    TIER_WRAPPER,
    Candidate,
)
from signatures.diagnosis import DownstreamGroup, Evidence, SignatureRef
from signatures.hits import Hit, TextScan
from signatures.redact import redact
from signatures.spec import Signature

MAX_GROUPS = 20


def downstream_groups(
    rest: Sequence[Candidate], top: Candidate, scans: Sequence[TextScan], rank_of: Callable[[Hit], int | None]
) -> list[DownstreamGroup]:
    """The lines that lost to ``top``, grouped by signature (or shape), largest group first."""
    groups: dict[str, list[Candidate]] = {}
    for c in rest:
        if c.tier == TIER_BENIGN and top.tier != TIER_BENIGN:
            continue
        key = c.signature.id if c.signature else "(unrecognized)"
        groups.setdefault(key, []).append(c)
    out = []
    for members in groups.values():
        first = members[0]  # already in ranking order
        sig = first.signature
        ranks = sorted({r for c in members if (r := rank_of(c.hit)) is not None})
        total = len(members)
        capped = False
        if sig is not None:  # verified hits past the per-text cap still count
            pids = {c.hit.matcher.pid for c in members}
            total = max(total, sum(s.counts.get(pid, 0) for s in scans for pid in pids))
            # A pattern stops counting at its cap in a text: the count is then a lower bound.
            caps = {c.hit.matcher.pid: c.hit.matcher.cap for c in members}
            capped = any(s.counts.get(pid, 0) >= cap for s in scans for pid, cap in caps.items())
        out.append(
            DownstreamGroup(
                signature=SignatureRef(sig.id, sig.title, sig.category, sig.role.value) if sig else None,
                role=first.role if sig else "unknown",
                count=total,
                ranks=tuple(ranks),
                capped=capped,
                first=Evidence(
                    file=redact(first.hit.file),
                    line=first.line,
                    text=redact(first.text),
                    rank=rank_of(first.hit),
                ),
            )
        )
    out.sort(key=lambda g: (-g.count, g.signature.id if g.signature else ""))
    return out[:MAX_GROUPS]


def fix_steps(sig: Signature) -> tuple[dict[str, str], ...]:
    """The signature's fix as JSON-ready steps."""
    return tuple(
        {k: v for k, v in (("step", f.step), ("command", f.command), ("why", f.why)) if v} for f in sig.fix
    )


def _reason(top: Candidate) -> str:
    shape = top.hit.matcher.shape
    label = shape.label if shape is not None else "an exception"
    if top.tier == TIER_INITIATING:
        if top.signature is not None:
            return "the earliest initiating failure" + (
                " (named by the frames its traceback ends in)" if top.via_frames else ""
            )
        if top.hit.view.in_traceback:
            return "the earliest exception that ends a traceback; no signature knows it"
        return f"the earliest failure statement ({label}), printed just before the traceback it led to"
    if top.tier == TIER_UNKNOWN:
        return f"the earliest failure statement ({label}); no signature knows it"
    if top.tier == TIER_DEGRADED:
        return f"the earliest sign of a degraded run ({label}); no signature knows it"
    if top.tier == TIER_DEATH:
        return f"nothing states why; this is the earliest process death ({label})"
    if top.tier == TIER_DOWNSTREAM:
        return "no initiating failure is in the log; this is the earliest downstream symptom"
    if top.tier == TIER_LATE_UNKNOWN:
        return "it came after a downstream symptom; nothing earlier states a cause"
    if top.tier == TIER_WRAPPER:
        return "only a wrapper re-reporting a child's failure is in the log"
    return "only benign warnings are in the log"


def why(
    top: Candidate, groups: Sequence[DownstreamGroup], outcome: str | None, rank_how: str | None
) -> list[str]:
    """Why the initiating line was chosen, what the run did after it, and why the others lost."""
    name = top.signature.id if top.signature else "an unrecognized error"
    out = [f"{top.hit.file}:{top.line} ({name}) was chosen: {_reason(top)}."]
    if outcome:
        out.append(f"It did not stop the run: {outcome}.")
    if rank_how:
        out.append(f"Its rank comes from the log's structure: {rank_how}.")
    for g in groups[:8]:
        label = g.signature.id if g.signature else "unrecognized error lines"
        ranks = f" on ranks {rank_list(g.ranks)}" if g.ranks else ""
        if top.signature is not None and g.signature is not None and g.signature.id == top.signature.id:
            lost = "the same failure printed again (a traceback's last line, another rank, a retry)"
        elif g.role in ("downstream", "wrapper", "benign"):
            lost = f"it is a {g.role} signature, a consequence or re-report of an earlier failure"
        elif g.role == "unknown":
            lost = "no signature knows these lines and they came after the chosen one"
        else:
            lost = "it came later than the chosen line"
        out.append(f"{label} ×{g.count}{ranks} lost: {lost}.")
    return out


def rank_list(ranks: Sequence[int]) -> str:
    """Ranks in words, the first eight and a count of the rest."""
    if len(ranks) <= 8:
        return ", ".join(map(str, ranks))
    return ", ".join(map(str, ranks[:8])) + f" and {len(ranks) - 8} more"


def confidence(top: Candidate, ranked: Sequence[Candidate]) -> float:
    """How sure the diagnosis is, 0..1."""
    if top.tier == TIER_BENIGN:
        return 0.8
    if top.signature is None:
        return {TIER_INITIATING: 0.4, TIER_UNKNOWN: 0.35, TIER_DEGRADED: 0.35}.get(top.tier, 0.25)
    if top.tier == TIER_DOWNSTREAM:
        return 0.45
    if top.tier == TIER_WRAPPER:
        return 0.35
    score = 0.7 if top.via_frames else 0.9
    rivals = {c.signature.id for c in ranked[1:] if c.tier == TIER_INITIATING and c.signature}
    rivals.discard(top.signature.id)
    if rivals:
        score -= 0.1
    return round(min(score, 0.95), 2)
