"""An exception whose message quotes another process's or callback's traceback carries it.

A runtime that catches an error in code it called may raise its own exception with the caught
traceback as its message: JAX's `XlaRuntimeError: INTERNAL: CustomCall failed: CpuCallback error:
Traceback (most recent call last):`, then the callback's frames, then `KeyboardInterrupt:`. The
carried exception, the one that ends the quoted traceback, states what failed; the carrier
only reports it, as a wrapper does.
"""

from __future__ import annotations

from signatures.candidate import TIER_BENIGN, TIER_WRAPPER, Candidate
from signatures.tracebacks import TRACEBACK_TITLE, exception_name

QUOTE_REACH = 400  # lines below the carrier within which the quoted traceback ends


def yield_to_quoted_exceptions(cands: list[Candidate]) -> None:
    for c in cands:
        message = c.hit.facts.message.rstrip()
        if c.tier >= TIER_BENIGN or not message.endswith(TRACEBACK_TITLE + ":"):
            continue
        if exception_name(message) is None:
            continue
        carried = any(
            x.hit.file_index == c.hit.file_index
            and 0 < x.line - c.line <= QUOTE_REACH
            and x.tier < TIER_BENIGN
            and exception_name(x.hit.facts.message.strip()) is not None
            for x in cands
        )
        if carried:
            c.tier, c.yields = max(c.tier, TIER_WRAPPER), True
