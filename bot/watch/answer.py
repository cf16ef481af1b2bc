"""When the incident's answer changed enough to report: one report per change, not per line.

The answer's key is what a person acts on: the status, the signature, the initiating line and the
ranks in the cascade. A new key is reported once it has held for ``settle`` seconds, so that an
error the run then trains past (a handled error) or a burst of ranks failing together is not a
string of reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from signatures import Diagnosis, Status

DEGRADED = "degraded"
FAILURE = "failure"
CASCADE = "cascade"
FINAL = "final"
EVENTS = (DEGRADED, FAILURE, CASCADE, FINAL)
FAILING = (Status.FAILURE, Status.UNRECOGNIZED)


@dataclass(frozen=True)
class AnswerKey:
    """The facts of a diagnosis that a report is about."""

    status: Status
    signature: str | None
    initiating: tuple[str, int] | None  # (file, line)
    cascade: frozenset[int]  # ranks that re-reported the failure downstream

    @classmethod
    def of(cls, d: Diagnosis) -> AnswerKey:
        """The key of ``d``."""
        where = (d.initiating.file, d.initiating.line) if d.initiating else None
        ranks = frozenset(r for group in d.downstream for r in group.ranks)
        return cls(d.status, d.signature.id if d.signature else None, where, ranks)


def event_between(reported: AnswerKey | None, new: AnswerKey) -> str | None:
    """The event that ``new`` is after the last reported key, or None when it is no news."""
    if new.status not in (*FAILING, Status.DEGRADED):
        return None  # clean or empty: nothing to alert on (the final report says it)
    kind = DEGRADED if new.status is Status.DEGRADED else FAILURE
    if reported is None or (reported.status in FAILING) != (new.status in FAILING):
        return kind
    if (reported.signature, reported.initiating) != (new.signature, new.initiating):
        return kind
    return CASCADE if new.cascade - reported.cascade else None


@dataclass
class Tracker:
    """Decides, diagnosis after diagnosis, which ones to report."""

    settle: float
    reported: AnswerKey | None = None
    _pending: AnswerKey | None = field(default=None, repr=False)
    _since: float = 0.0

    def see(self, d: Diagnosis, now: float) -> None:
        """Note the current diagnosis (its key starts to settle if it is new)."""
        key = AnswerKey.of(d)
        if key != self._pending:
            self._pending, self._since = key, now

    def due(self, now: float) -> str | None:
        """The event to report now, if the current key is news and has settled; it counts as reported."""
        if self._pending is None or now - self._since < self.settle:
            return None
        event = event_between(self.reported, self._pending)
        if event is not None:
            self.reported = self._pending
        return event

    def final_event(self, d: Diagnosis) -> str:
        """The last report: always ``final``, with whatever the answer is at the end."""
        self.reported = AnswerKey.of(d)
        return FINAL
