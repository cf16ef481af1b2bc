"""Which statement leads a traceback: a line printed just before the traceback it introduces.

A process that fails often says so in a line of its own, then prints the traceback of the
exception it dies of ("ERROR: Unexpected bus error encountered in worker", the kernel's
`Assertion ... failed` lines). Only blank lines or more statements of the failure may stand
between them, however many (DeepSpeed's "kernel execution error" for thirteen calls): then the
statement and the traceback are one episode, and the statement leads it unless a signature knows
the exception the traceback ends in.
"""

from __future__ import annotations

from signatures.bursts import announces_only
from signatures.candidate import TIER_BENIGN, TIER_INITIATING, TIER_UNKNOWN, TIER_WRAPPER, Candidate
from signatures.episodes import first_after, leads_into_traceback
from signatures.library import Kind
from signatures.tracebacks import exception_name


def promote_episode_leads(cands: list[Candidate]) -> None:
    """A statement printed just before a traceback leads it, or gives way to it (module doc)."""
    # A statement printed just before a traceback ("ERROR: Unexpected bus error encountered in
    # worker", the kernel's `Assertion ... failed` lines) states the failure the traceback ends
    # in, first. When no signature knows that exception, the statement leads: it is earlier;
    # when one does, the statement gives way to it (Tune's "Trial task failed" over the actor's
    # ActorDiedError; vLLM's "EngineCore failed to start." over its logged ValueError). A statement
    # that only announces ("Rank[2] failed.": a few words, no cause) gives way to any exception.
    unknown = [c for c in cands if c.signature is None and c.tier == TIER_UNKNOWN]
    generic = {(c.hit.file_index, c.line) for c in unknown}
    raised = [x for x in cands if x.hit.matcher.kind is Kind.EXCEPTION or exception_name(x.hit.facts.message)]
    headers: dict[tuple[int, int], int] = {}  # (file, line) of a statement: the header it leads into
    for c in sorted(unknown, key=lambda c: (c.hit.file_index, -c.hit.line)):
        # a statement above another that leads into a traceback leads into it too, however many
        # statements of the failure stand between (the same cuBLAS error for twelve calls)
        header = leads_into_traceback(c, generic) or headers.get((c.hit.file_index, _next_line(c)))
        if header is not None:
            headers[(c.hit.file_index, c.hit.line)] = header
    for c in unknown:
        header = headers.get((c.hit.file_index, c.hit.line))
        if header is None:
            continue
        ending = first_after(raised, c.hit.file_index, header)
        unknown_end = ending is not None and ending.signature is None and ending.tier < TIER_BENIGN
        if ending is not None and unknown_end and announces_only(c):
            c.tier, c.yields = max(c.tier, ending.tier), True  # "Rank[2] failed.": the traceback says what
        elif ending is None or ending.signature is None or ending.tier >= TIER_WRAPPER:
            c.tier = TIER_INITIATING  # (a wrapper's exception, CalledProcessError, only re-reports)
        elif ending.tier < TIER_BENIGN:  # a known exception: the statement only introduced it
            c.tier, c.yields = max(c.tier, ending.tier), True


def _next_line(c: Candidate) -> int:
    # the number of the first line below ``c``'s that is not blank
    return next((c.hit.line + k for k, t in enumerate(c.hit.after, 1) if t.strip()), c.hit.line + 1)
