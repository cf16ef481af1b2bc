"""One line's best reading while the picking rules run: the hit, its signature, its tier."""

from __future__ import annotations

from dataclasses import dataclass

from signatures.hits import Hit
from signatures.spec import Signature

# How strongly a line claims to be the initiating failure, strongest first (ranking.py rule 1).
TIER_INITIATING = 0
TIER_UNKNOWN = 1  # an error no signature knows, without a traceback to vouch for it
TIER_DEGRADED = 2  # a run going on worse (limit hit, non-finite loss) that no signature knows
TIER_DEATH = 3  # a process death no signature knows: what killed it is usually printed before
TIER_DOWNSTREAM = 4
TIER_LATE_UNKNOWN = 5  # an unknown error after a downstream symptom: likely its consequence
TIER_WRAPPER = 6
TIER_BENIGN = 7


@dataclass
class Candidate:
    """One line's best reading: which signature (if any) names it, and how strongly."""

    hit: Hit
    signature: Signature | None
    tier: int
    via_frames: bool = False  # named by where its traceback ends, not by its text
    line: int = 0  # the evidence line (an `assert` echo can move it up)
    text: str = ""
    death: bool = False  # the line also reports how a process died (exit code, signal)
    shapes: frozenset[str] = frozenset()  # every generic shape the line has
    yields: bool = False  # a line of torchrun's failure table that is not the first failure's statement
    head: Hit | None = None  # the tagged record that opened this untagged line's report: whose it is

    @property
    def role(self) -> str:
        return self.signature.role.value if self.signature else "unknown"

    @property
    def priority(self) -> int:
        return self.signature.priority if self.signature else -1000
