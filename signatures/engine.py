"""``diagnose()``: from log sources to one Diagnosis, in bounded memory.

The pipeline: open each source (plain, .gz, .zip members, streams) -> scan its chunks for every
fingerprint at once -> verify the few matching lines -> pick the initiating failure by the
rules in ranking.py -> group what followed -> add the signature's knowledge -> redact.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from signatures.diagnosis import Diagnosis, DownstreamGroup, Evidence, SignatureRef, Status
from signatures.errors import InputTooLarge
from signatures.hits import TextScan, read_text
from signatures.library import Library
from signatures.lines import unwrap
from signatures.progress import Progress
from signatures.ranking import (
    TIER_BENIGN,
    TIER_DOWNSTREAM,
    TIER_INITIATING,
    TIER_UNKNOWN,
    TIER_WRAPPER,
    Candidate,
    candidates,
    ordered,
)
from signatures.redact import redact
from signatures.sources import DEFAULT_LIMITS, Budget, Limits, Source, as_source, open_texts
from signatures.spec import Signature

COLLECT_ENV = (
    "Attach the output of `python -m torch.utils.collect_env` from a failing node "
    "(torch, CUDA, NCCL and driver versions)."
)
MAX_MISSING = 4

__all__ = ["DEFAULT_LIMITS", "Finding", "Limits", "default_library", "diagnose", "find_all", "scan_sources"]


@functools.cache
def default_library(backend: str | None = None) -> Library:
    """The bundled library, loaded and compiled once per process."""
    return Library.load(backend=backend)


def scan_sources(
    sources: Iterable[Source | str | os.PathLike[str]],
    *,
    library: Library | None = None,
    limits: Limits | None = None,
    processes: int = 1,
) -> list[TextScan]:
    """Read every text of every source; raise InputError on the first unreadable one.

    With ``processes`` > 1 and several files on disk, files are read in a process pool (one file
    per task, as one log per rank is common); results are merged in the order given.
    """
    library = library or default_library()
    limits = limits or DEFAULT_LIMITS
    items = [as_source(s) for s in sources]
    from signatures import parallel

    if parallel.worth_a_pool(items, processes):
        per_source = parallel.scan_files(items, library, limits, processes)
    else:
        budget = Budget(limits)
        per_source = [
            [read_text(library, name, 0, chunks) for name, chunks in open_texts(src, limits, budget)]
            for src in items
        ]
    scans = [scan for group in per_source for scan in group]
    total = sum(s.bytes for s in scans)
    if total > limits.max_bytes:
        raise InputTooLarge(f"the logs add up to more than {limits.max_bytes} bytes, the limit")
    for index, scan in enumerate(scans):
        scan.renumber(index)
    return scans


def diagnose(
    sources: Iterable[Source | str | os.PathLike[str]],
    *,
    library: Library | None = None,
    limits: Limits | None = None,
    processes: int = 1,
) -> Diagnosis:
    """Name the initiating failure across ``sources`` (one diagnosis for all of them)."""
    library = library or default_library()
    scans = scan_sources(sources, library=library, limits=limits, processes=processes)
    return assemble(scans, library)


@dataclass(frozen=True)
class Finding:
    """A verified signature hit, for library-wide checks (healthy-corpus tests, lint)."""

    signature_id: str
    role: str
    file: str
    line: int
    text: str


def find_all(
    sources: Iterable[Source | str | os.PathLike[str]], library: Library | None = None
) -> list[Finding]:
    """Every verified signature hit in ``sources`` (after echo and advice filtering)."""
    library = library or default_library()
    out: dict[tuple[str, str, int], Finding] = {}  # one finding per signature and line
    for scan in scan_sources(sources, library=library):
        for hit in scan.hits:
            sig = hit.matcher.signature
            if sig is not None:
                out.setdefault(
                    (sig.id, hit.file, hit.line),
                    Finding(sig.id, sig.role.value, hit.file, hit.line, hit.text),
                )
    return list(out.values())


def assemble(scans: Sequence[TextScan], library: Library) -> Diagnosis:
    """Build the Diagnosis from what the texts held."""
    environment: dict[str, str] = {}
    for scan in scans:
        for key, value in scan.facts.items():
            environment.setdefault(key, redact(value))
    hits = [h for scan in scans for h in scan.hits]
    progress = Progress((scan.file_index, scan.progress) for scan in scans)
    ranked = ordered(candidates(hits, library, progress))
    # Handled exceptions (retried, or "Exception ignored") are no finding of their own.
    ranked = [c for c in ranked if c.signature is not None or c.tier != TIER_BENIGN]
    files = tuple(redact(s.name) for s in scans)
    lines_read = sum(s.lines for s in scans)
    bytes_read = sum(s.bytes for s in scans)
    if not ranked:
        return Diagnosis(
            status=Status.CLEAN,
            signature=None,
            confidence=0.8,
            initiating=None,
            why=("No line matched a failure signature or looked like an error.",),
            summary="No failure found in the log.",
            missing_facts=CLEAN_MISSING,
            environment=environment,
            files=files,
            lines_read=lines_read,
            bytes_read=bytes_read,
        )
    top = ranked[0]
    sig = top.signature
    status = _status(top)
    groups = _downstream(ranked[1:], top, scans)
    initiating = _evidence(top)
    why = _why(top, groups, ranked)
    summary = sig.summary if sig else f"An error no signature knows: {initiating.text.strip()[:300]}"
    if status is Status.CLEAN:
        summary = f"No failure found. Most notable warning: {sig.title}." if sig else "No failure found."
    return Diagnosis(
        status=status,
        signature=SignatureRef(sig.id, sig.title, sig.category, sig.role.value) if sig else None,
        confidence=_confidence(top, ranked, groups),
        initiating=initiating,
        downstream=tuple(groups),
        why=tuple(why),
        summary=summary,
        root_causes=sig.root_causes if sig else (),
        fix=_fix_steps(sig) if sig else (),
        decision_path=tuple(sig.decision_path.steps()) if sig else (),
        checklist=sig.confirm if sig else (),
        missing_facts=tuple(_missing(top, ranked, groups, environment, scans)),
        related=tuple(sig.related) if sig else (),
        environment=environment,
        files=files,
        lines_read=lines_read,
        bytes_read=bytes_read,
    )


def _status(top: Candidate) -> Status:
    if top.tier == TIER_BENIGN:
        return Status.CLEAN
    if top.signature is None:
        return Status.UNRECOGNIZED
    return Status.FAILURE


def _evidence(c: Candidate) -> Evidence:
    hit = c.hit
    before, after = hit.before, hit.after
    if c.line != hit.line:  # moved to an `assert` echo: re-centre the context on it
        shift = hit.line - c.line
        after = (*before[len(before) - shift + 1 :], hit.text, *after)[: len(after)]
        before = before[: len(before) - shift]
    return Evidence(
        file=redact(hit.file),
        line=c.line,
        text=redact(c.text),
        rank=hit.rank if hit.rank is not None else _nearby_rank(hit.before[-2:], hit.after[:3]),
        host=redact(hit.host) if hit.host else None,
        time=hit.facts.time,
        before=tuple(redact(x) for x in before[-8:]),
        after=tuple(redact(x) for x in after[:8]),
    )


def _nearby_rank(before: Sequence[str], after: Sequence[str]) -> int | None:
    """The rank of an untagged line, when the lines around it all carry one and the same rank.

    A rank often prints its exception once bare and then again as a `[rank0]:` traceback; in an
    interleaved log, neighbours of several ranks make this return None.
    """
    below = {facts.rank for line in after if (facts := unwrap(line)).rank is not None}
    above = {facts.rank for line in before if (facts := unwrap(line)).rank is not None}
    # The lines below must be that rank re-printing it; lines above alone prove nothing.
    if len(below) == 1 and above <= below:
        return below.pop()
    return None


def _downstream(rest: list[Candidate], top: Candidate, scans: Sequence[TextScan]) -> list[DownstreamGroup]:
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
        ranks = sorted({r for c in members if (r := c.hit.rank) is not None})
        total = len(members)
        if sig is not None:  # verified hits past the per-text cap still count
            pids = {c.hit.matcher.pid for c in members}
            total = max(total, sum(s.counts.get(pid, 0) for s in scans for pid in pids))
        out.append(
            DownstreamGroup(
                signature=SignatureRef(sig.id, sig.title, sig.category, sig.role.value) if sig else None,
                role=first.role if sig else "unknown",
                count=total,
                ranks=tuple(ranks),
                first=Evidence(
                    file=redact(first.hit.file), line=first.line, text=redact(first.text), rank=first.hit.rank
                ),
            )
        )
    out.sort(key=lambda g: (-g.count, g.signature.id if g.signature else ""))
    return out[:20]


def _fix_steps(sig: Signature) -> tuple[dict[str, str], ...]:
    return tuple(
        {k: v for k, v in (("step", f.step), ("command", f.command), ("why", f.why)) if v} for f in sig.fix
    )


def _why(top: Candidate, groups: list[DownstreamGroup], ranked: list[Candidate]) -> list[str]:
    where = f"{top.hit.file}:{top.line}"
    name = top.signature.id if top.signature else "an unrecognized error"
    if top.tier == TIER_INITIATING:
        reason = "the earliest initiating failure"
        if top.via_frames:
            reason += " (named by the frames its traceback ends in)"
        if top.signature is None:
            reason = "the earliest exception that ends a traceback; no signature knows it"
    elif top.tier == TIER_UNKNOWN:
        reason = "the earliest error line; no signature knows it and nothing more specific was found"
    elif top.tier == TIER_DOWNSTREAM:
        reason = "no initiating failure is in the log; this is the earliest downstream symptom"
    elif top.tier == TIER_WRAPPER:
        reason = "only a wrapper re-reporting a child's failure is in the log"
    else:
        reason = "only benign warnings are in the log"
    out = [f"{where} ({name}) was chosen: {reason}."]
    for g in groups[:8]:
        label = g.signature.id if g.signature else "unrecognized error lines"
        ranks = f" on ranks {_ranks(g.ranks)}" if g.ranks else ""
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


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) <= 8:
        return ", ".join(map(str, ranks))
    return ", ".join(map(str, ranks[:8])) + f" and {len(ranks) - 8} more"


def _confidence(top: Candidate, ranked: list[Candidate], groups: list[DownstreamGroup]) -> float:
    if top.tier == TIER_BENIGN:
        return 0.8
    if top.signature is None:
        return 0.4 if top.tier == TIER_INITIATING else 0.3
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


def _missing(
    top: Candidate,
    ranked: list[Candidate],
    groups: list[DownstreamGroup],
    env: dict[str, str],
    scans: Sequence[TextScan],
) -> list[str]:
    out: list[str] = []
    sig = top.signature
    # A launcher's wrapper often names the rank that failed first ("rank : 12 (local_rank: 4)").
    named_by_launcher = next(
        (c.hit.groups["rank"] for c in ranked if c.tier == TIER_WRAPPER and "rank" in c.hit.groups), None
    )
    if top.tier == TIER_DOWNSTREAM and named_by_launcher is not None:
        out.append(
            f"The launcher says rank {named_by_launcher} failed first, but its error is not in the logs "
            f"given: attach rank {named_by_launcher}'s log."
        )
    elif top.tier in (TIER_DOWNSTREAM, TIER_WRAPPER):
        reporting = sorted(
            {r for g in groups for r in g.ranks} | ({top.hit.rank} if top.hit.rank is not None else set())
        )
        world = int(env["world_size"]) if env.get("world_size", "").isdigit() else None
        silent = [r for r in range(world) if r not in reporting] if world and world <= 4096 else []
        named = top.hit.groups.get("rank") or top.hit.groups.get("local_rank")
        if top.tier == TIER_WRAPPER and named:
            out.append(
                f"The launcher only re-reports a failure of rank {named}: "
                f"attach rank {named}'s own log, which holds the real error."
            )
        elif silent and len(silent) <= 16:
            out.append(
                f"Only consequences were found. Ranks {_ranks(silent)} did not report them: attach "
                f"{'that rank' if len(silent) == 1 else 'those ranks'}' "
                f"log{'s' if len(silent) > 1 else ''}, where the first failure is likely."
            )
        else:
            given = "only one log was given" if len(scans) == 1 else f"only {len(scans)} logs were given"
            out.append(
                f"Only consequences were found and {given}: attach the logs of every rank (or the "
                "launcher's full output) so the rank that failed first can be found."
            )
    if sig is not None:
        for fact in sig.missing_facts:
            if fact.unless_env and all(k in env for k in fact.unless_env):
                continue
            out.append(fact.ask)
    if (
        top.tier != TIER_BENIGN
        and not {"torch", "cuda"} <= env.keys()
        and not any("collect_env" in x for x in out)
    ):
        out.append(COLLECT_ENV)
    if top.signature is None and top.tier <= TIER_UNKNOWN:
        out.insert(
            0, "No signature knows this error: attach the full traceback and the lines just before it."
        )
    return out[:MAX_MISSING]


CLEAN_MISSING = (
    "If the job did fail, attach the end of every rank's log (the launcher's output and each "
    "rank's stderr): this log shows no error.",
)
