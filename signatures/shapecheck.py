"""Whether a line the scan found really has its shape: the per-line check of the generic layer.

The scan finds a shape's lines by literals; this check reads the line's record (its level, what
follows it) and says whether it states a failure: a warning quoting an error, a message that says
it worked around the problem, or a quiet record does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from signatures.lines import LineFacts
from signatures.ncclwarn import nccl_warning_failed
from signatures.shapes import Shape, ShapeKind
from signatures.shapewords import ERROR_LEVELS, QUIET_LEVELS

# Python's warnings module: "path.py:744: UserWarning: ...". A warning, whatever it quotes.
PY_WARNING = re.compile(r"^\S.*?:\d+: (?:[A-Z]\w*)?Warning: ")
# A line that says in itself that the error was worked around.
_SELF_RECOVERY = re.compile(r"\binstead\.?[ \t]*$|\b(?:falling back|will retry|retrying)\b", re.IGNORECASE)


# A signal and the exit it causes together (a bare "Received SIGTERM: 15" is one when not quiet)
_SIGNAL_EXIT = re.compile(r"\b[Rr]eceived SIG[A-Z]{2,4}\b.{0,40}\b(?:exiting|shutting down|terminat|abort)")


def _traceback_next(after: Sequence[str]) -> bool:
    following = next((line for line in after[:2] if line.strip()), "")
    return following.lstrip().startswith("Traceback (most recent call last)")


def shape_holds(
    shape: Shape, raw: str, facts: LineFacts, matched: bool, after: Callable[[], Sequence[str]]
) -> bool:
    """Whether a line the scan found really has ``shape``; ``matched``: its verify regex matched."""
    if PY_WARNING.match(facts.message) or _SELF_RECOVERY.search(facts.message):
        return False
    if shape.name == "logged-error":
        return matched or facts.level in ERROR_LEVELS
    # A degradation is logged as a warning or as progress; a framework may report an exception
    # at any level (TensorFlow's coordinator logs it as INFO, an op's failed status as WARNING).
    if shape.kind is ShapeKind.DEGRADATION or shape.name in ("reported-exception", "os-error", "op-failed"):
        return matched
    if not matched:
        return False
    if shape.kind is ShapeKind.DEATH and _SIGNAL_EXIT.search(facts.message):
        return True  # a launcher says at any level that it got a signal and is exiting
    if facts.level in QUIET_LEVELS:
        # A failure logged as a warning and followed at once by a traceback is what the
        # traceback is about (TensorFlow's "W ... OP_REQUIRES failed ... Resource exhausted").
        return facts.level == "W" and shape.kind is ShapeKind.ERROR and _traceback_next(after())
    if shape.name == "nccl-warning":
        return nccl_warning_failed(raw, facts.message, after())
    return True
