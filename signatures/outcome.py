"""Crash or degradation: did the run die of the initiating problem, or keep going with it?

A degradation (a recompile limit hit, a loss scale at its floor, a loss gone NaN) is a problem
the run can keep training with, slower or computing garbage. It is a crash when the run died of
it: a failure of any kind follows it, or its own line is the exception that stopped the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from signatures.diagnosis import Status
from signatures.progress import Progress, slowdown
from signatures.ranking import TIER_BENIGN, Candidate, time_order
from signatures.shapes import ShapeKind
from signatures.spec import Outcome
from signatures.tracebacks import EXCEPTION_LINE

SLOWER_AT = 1.5  # a speed ratio below this is noise, not a slowdown worth naming


@dataclass(frozen=True)
class RunOutcome:
    """The status of the run and, for a degradation, what it did to the run in words."""

    status: Status
    words: str | None = None


def degrades(c: Candidate) -> bool:
    """Whether ``c`` is a problem a run can keep going with."""
    if c.signature is not None:
        return c.signature.outcome is Outcome.DEGRADATION
    shape = c.hit.matcher.shape
    return shape is not None and shape.kind is ShapeKind.DEGRADATION


def judge(top: Candidate, ranked: Sequence[Candidate], progress: Progress) -> RunOutcome:
    """Failure, unrecognized, degraded or clean, for the chosen initiating candidate."""
    if top.tier == TIER_BENIGN:
        return RunOutcome(Status.CLEAN)
    died = Status.FAILURE if top.signature is not None else Status.UNRECOGNIZED
    if not degrades(top) or _died_of_it(top, ranked):
        return RunOutcome(died)
    before, after = progress.around(top.hit.file_index, top.line, top.hit.rank)
    if len(after) < 2:
        return RunOutcome(Status.DEGRADED, "no crash follows it in the log")
    ratio = slowdown(before, after)
    if ratio is not None and ratio >= SLOWER_AT:
        return RunOutcome(Status.DEGRADED, f"the run kept training, {ratio:.1f}x slower after it")
    return RunOutcome(Status.DEGRADED, "the run kept training after it")


def _died_of_it(top: Candidate, ranked: Sequence[Candidate]) -> bool:
    # A failure of any kind after it, or an exception raised for it (its own FailOnRecompileLimitHit).
    return _raised(top) or any(
        c is not top and c.tier < TIER_BENIGN and (_raised(c) or not degrades(c)) and time_order(top, c) < 0
        for c in ranked
    )


def _raised(c: Candidate) -> bool:
    return EXCEPTION_LINE.match(c.hit.facts.message) is not None
