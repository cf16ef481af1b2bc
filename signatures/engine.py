"""``diagnose()``: from log sources to one Diagnosis, in bounded memory.

The pipeline: open each source (plain, .gz, .zip members, streams) -> scan its chunks for every
fingerprint at once -> verify the few matching lines -> pick the initiating failure by the
rules in ranking.py -> group what followed -> add the signature's knowledge -> redact.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from signatures import pooling
from signatures.advice import advise
from signatures.attribution import Attribution, Roster, attribute, rank_for_grouping, roster
from signatures.diagnosis import Diagnosis, Evidence, SignatureRef, Status
from signatures.environment import EVIDENCE_ONLY
from signatures.errors import InputTooLarge
from signatures.explain import confidence, downstream_groups, fix_steps, why
from signatures.flight_recorder import read_any, with_findings
from signatures.hits import TextScan
from signatures.lastwords import in_ruled_box, last_words
from signatures.library import Library
from signatures.missing import CLEAN_MISSING, missing_facts, ranks_seen
from signatures.missing import Evidence as MissingEvidence
from signatures.outcome import RunOutcome, judge
from signatures.progress import STEP, Progress
from signatures.ranking import (
    TIER_BENIGN,
    TIER_DEATH,
    TIER_UNKNOWN,
    TIER_WRAPPER,
    Candidate,
    candidates,
    ordered,
    time_order,
)
from signatures.redact import redact
from signatures.skipping import Skips, read_each
from signatures.sources import DEFAULT_LIMITS, Budget, Limits, Source, as_source, open_texts

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
    skips: Skips | None = None,
) -> list[TextScan]:
    """Read every text of every source; raise InputError on the first unreadable one, or with
    ``skips``, note it there and read the rest.

    With ``processes`` > 1 and several files on disk, files are read in a process pool (one file
    per task, as one log per rank is common); results are merged in the order given.
    """
    library = library or default_library()
    limits = limits or DEFAULT_LIMITS
    items = [as_source(s) for s in sources]
    if pooling.worth_a_pool(items, processes):
        # Imported only here: a small input, the common case, never loads the pool's module.
        from signatures import parallel

        per_source = parallel.scan_files(items, library, limits, processes, skips)
    else:
        budget = Budget(limits)
        per_source = [
            read_each(open_texts(src, limits, budget), lambda n, c: read_any(library, n, 0, c), skips)
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
    skips = Skips()
    scans = scan_sources(sources, library=library, limits=limits, processes=processes, skips=skips)
    if not scans and skips.first is not None:
        raise skips.first  # nothing could be read: the input error is the answer
    diagnosis = assemble(scans, library)
    return replace(diagnosis, skipped=tuple(skips.notes)) if skips.notes else diagnosis


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
    scans = with_findings(scans, library)  # flight-recorder dumps: their finding as one more text
    facts: dict[str, str] = {}
    for scan in scans:
        for key, value in scan.facts.items():
            facts.setdefault(key, redact(value))
    environment = {k: v for k, v in facts.items() if k not in EVIDENCE_ONLY}
    step = next((m.group(1) for s in scans for _, t in s.progress if (m := STEP.search(t))), None)
    if step is not None:
        facts.setdefault("step", step)
    read = _Read(
        environment,
        tuple(redact(s.name) for s in scans),
        sum(s.lines for s in scans),
        sum(s.bytes for s in scans),
    )
    if not any(s.has_text for s in scans):
        return read.onto(
            Diagnosis(
                status=Status.EMPTY,
                signature=None,
                confidence=1.0,
                initiating=None,
                why=("The input holds no text lines.",),
                summary="The log is empty: there is nothing to diagnose.",
                missing_facts=("Attach the log again: the file given holds no text.",),
            )
        )
    progress = Progress((scan.file_index, scan.progress) for scan in scans)
    stops = [(x.file_index, x.line) for scan in scans for x in scan.sightings if x.stop]
    ends = [(x.file_index, x.line) for scan in scans for x in scan.sightings if x.finished]
    ranked = ordered(candidates([h for scan in scans for h in scan.hits], library, progress, stops, ends))
    # Handled errors (retried, carried on from, "Exception ignored") are no finding of their own.
    ranked = [c for c in ranked if c.signature is not None or c.tier != TIER_BENIGN]
    if not ranked or ranked[0].tier == TIER_DEATH or _death_logged_as_error(ranked[0]):
        # Nothing stated a failure by its shape, or only a death no signature knows: what the
        # texts say in words as they end, before anything else found (what killed a process is
        # said before its death: ROCm's "HW Exception by GPU node-9 ... reason :GPU Hang", then
        # "Aborted (core dumped)").
        words = ordered(candidates(last_words(scans), library, progress, stops, ends))
        words = [c for c in words if c.tier != TIER_BENIGN and all(time_order(c, r) < 0 for r in ranked)]
        words = [c for c in words if not (ranked and in_ruled_box(c.hit))]  # a death's own box
        ranked = ordered(words + ranked) if words else ranked
    if not ranked:
        return read.onto(
            Diagnosis(
                status=Status.CLEAN,
                signature=None,
                confidence=0.8,
                initiating=None,
                why=("No line matched a failure signature or looked like an error.",),
                summary="No failure found in the log.",
                missing_facts=CLEAN_MISSING,
            )
        )
    top = ranked[0]
    sig = top.signature
    who = roster(scans, facts)
    place = attribute(top.head or top.hit, top.line, who)
    outcome = judge(top, ranked, progress)
    groups = downstream_groups(ranked[1:], top, scans, lambda h: rank_for_grouping(h, who))
    initiating = _evidence(top, place)
    local_only = place.local_rank if place.rank is None else None
    evidence = MissingEvidence(
        facts, top, ranks_seen(scans), len(scans), initiating.host is not None, local_only
    )
    reporting = sorted(
        {r for g in groups for r in g.ranks} | ({place.rank} if place.rank is not None else set())
    )
    conf = confidence(top, ranked)
    return read.onto(
        Diagnosis(
            status=outcome.status,
            signature=SignatureRef(sig.id, sig.title, sig.category, sig.role.value) if sig else None,
            confidence=conf,
            initiating=initiating,
            downstream=tuple(groups),
            why=tuple(why(top, groups, outcome.words, _how(place))),
            summary=_summary(top, outcome, initiating),
            root_causes=sig.root_causes if sig else (),
            fix=fix_steps(sig) if sig else (),
            decision_path=tuple(sig.decision_path.steps()) if sig else (),
            checklist=sig.confirm if sig else (),
            missing_facts=tuple(missing_facts(evidence, ranked, reporting, _launcher_rank(ranked, who, top))),
            related=tuple(sig.related) if sig else (),
            advice=advise(
                sig.restart if sig else None,
                status=outcome.status.value,
                confidence=conf,
                host=initiating.host,
            ),
        )
    )


@dataclass(frozen=True)
class _Read:
    """What was read, whatever was found in it."""

    environment: dict[str, str]
    files: tuple[str, ...]
    lines_read: int
    bytes_read: int

    def onto(self, d: Diagnosis) -> Diagnosis:
        return replace(
            d,
            environment=self.environment,
            files=self.files,
            lines_read=self.lines_read,
            bytes_read=self.bytes_read,
        )


def _summary(top: Candidate, outcome: RunOutcome, initiating: Evidence) -> str:
    sig = top.signature
    if outcome.status is Status.CLEAN:
        return f"No failure found. Most notable warning: {sig.title}." if sig else "No failure found."
    text = sig.summary if sig else f"An error no signature knows: {initiating.text.strip()[:300]}"
    if outcome.status is Status.DEGRADED:
        what = sig.summary if sig else f"A problem no signature knows: {initiating.text.strip()[:300]}"
        return f"Degraded, not crashed: {outcome.words}. {what}"
    return text


def _how(place: Attribution) -> str | None:
    if place.rank is None and place.local_rank is not None:
        return f"it names local rank {place.local_rank} only, and nothing maps that to a global rank"
    return place.how


def _launcher_rank(ranked: Sequence[Candidate], who: Roster, top: Candidate) -> int | None:
    # The launcher's failure table, or a wrapper line, names the rank that failed first.
    first = who.first_failure.get(top.hit.file_index) or next(iter(who.first_failure.values()), None)
    if first is not None:
        return first.rank
    named = next(
        (c.hit.groups["rank"] for c in ranked if c.tier == TIER_WRAPPER and "rank" in c.hit.groups), None
    )
    return int(named) if named is not None and named.isdigit() else None


def _evidence(c: Candidate, place: Attribution) -> Evidence:
    hit = c.hit
    before, after = hit.before, hit.after
    if c.line < hit.line:  # moved up to an `assert` echo: re-centre the context on it
        shift = hit.line - c.line
        after = (*before[len(before) - shift + 1 :], hit.text, *after)[: len(after)]
        before = before[: len(before) - shift]
    elif c.line > hit.line:  # moved down to the line a bare statement introduced
        shift = c.line - hit.line
        before = (*before, hit.text, *after[: shift - 1])[-max(len(before), 1) :]
        after = after[shift:]
    return Evidence(
        file=redact(hit.file),
        line=c.line,
        text=redact(c.text),
        rank=place.rank,
        host=redact(place.host) if place.host else None,
        time=hit.facts.time,
        before=tuple(redact(x) for x in before[-8:]),
        after=tuple(redact(x) for x in after[:8]),
    )


def _death_logged_as_error(top: Candidate) -> bool:
    # A launcher that logs a death at error level ("ERROR:launcher:Rank 0 crashed with exit code
    # 1.") says no more than the death itself: what the process said before it is the cause.
    return top.signature is None and top.death and top.tier == TIER_UNKNOWN
