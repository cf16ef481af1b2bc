"""A bare exception line is vouched for by a traceback that ends in the same exception.

An exception line with no traceback above it is an error no signature knows, and weighs less
than one a traceback vouches for. When the same exception (the same class and message, numbers
aside) ends a traceback later in the same file, the bare line is the same failure printed first:
another process's copy whose traceback the paste cut or whose lines were interleaved with the
others' (``ValueError: Expected input batch_size (79) to match target batch_size (47).`` above a
traceback ending in ``... (511) to match target batch_size (23).``). It is vouched for as well,
and the earlier of the two states the failure.
"""

from __future__ import annotations

from signatures.candidate import TIER_INITIATING, TIER_UNKNOWN, Candidate
from signatures.lines import numbers_aside
from signatures.tracebacks import exception_name


def vouch_for_echoes(cands: list[Candidate]) -> None:
    """A bare exception line that a later vouched one repeats, numbers aside, is vouched for too."""
    vouched: dict[tuple[int, str], int] = {}  # (file, exception numbers aside): its last vouched line
    for c in cands:
        if c.signature is None and c.tier == TIER_INITIATING and c.line == c.hit.line:
            key = (c.hit.file_index, _shape(c.hit.facts.message))
            vouched[key] = max(vouched.get(key, c.line), c.line)
    for c in cands:
        if c.signature is not None or c.tier != TIER_UNKNOWN or exception_name(c.hit.facts.message) is None:
            continue
        if vouched.get((c.hit.file_index, _shape(c.hit.facts.message)), -1) > c.line:
            c.tier = TIER_INITIATING


def _shape(message: str) -> str:
    return numbers_aside(message.strip())
