"""What to do with the job next: restart it, restart it without a host, stop, or look first.

Advice a scheduler can act on, derived from the signature that names the failure. The rules, one
test each in tests/test_advice.py:

1. Only a failure gets advice: a clean, empty or degraded run (one that kept going) has none
   (``advice`` is null), because nothing ended the job that a restart could answer.
2. The signature's restart class decides: ``transient`` -> restart from the last checkpoint,
   ``node`` -> restart without the initiating line's host, ``deterministic`` -> stop retrying,
   ``unknown`` -> investigate.
3. An unrecognized failure is ``unknown``: investigate.
4. A ``node`` failure whose log does not name the host is investigate: there is no host to
   exclude, and a plain restart may land on the same bad host.
5. Confidence is the diagnosis' confidence; investigate is never above INVESTIGATE_MAX.

History (the same failure on the same job twice in a row, a host failing across jobs) sharpens
the advice in ``bot/kinds/advising.py``, which needs the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from signatures.spec import Restart, RestartClass

# Statuses that ended a job; any other (clean, empty, degraded) gets no advice.
ADVISED_STATUSES = frozenset({"failure", "unrecognized"})
INVESTIGATE_MAX = 0.5  # "look first" is never sure of itself
UNRECOGNIZED_REASON = "no signature knows this error, so the log cannot tell whether a restart helps"


class Decision(StrEnum):
    RESTART = "restart"  # from the last checkpoint, on any hosts
    RESTART_EXCLUDING = "restart-excluding"  # from the last checkpoint, without exclude_hosts
    STOP = "stop"  # a restart would fail the same way: stop the retries
    INVESTIGATE = "investigate"  # the log cannot tell: a person decides


_DECISIONS = {
    RestartClass.TRANSIENT: Decision.RESTART,
    RestartClass.NODE: Decision.RESTART_EXCLUDING,
    RestartClass.DETERMINISTIC: Decision.STOP,
    RestartClass.UNKNOWN: Decision.INVESTIGATE,
}


class AdviceFormatError(ValueError):
    """A stored or received ``advice`` object that is not one this version can read."""


@dataclass(frozen=True)
class Advice:
    decision: Decision
    restart_class: RestartClass
    reason: str  # one line; reads after the decision's own words (see ``line``)
    confidence: float
    exclude_hosts: tuple[str, ...] = ()
    history: tuple[str, ...] = ()  # what earlier runs added ("3rd failure on gpu-7 this week")

    @property
    def line(self) -> str:
        """The advice in one sentence: 'Restart without gpu-node-07: uncorrectable ECC error'."""
        if self.decision is Decision.RESTART_EXCLUDING:
            head = f"Restart without {', '.join(self.exclude_hosts)}"
        else:
            head = _HEADS[self.decision]
        return f"{head}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (the ``advice`` key of a diagnosis)."""
        return {
            "decision": self.decision.value,
            "class": self.restart_class.value,
            "exclude_hosts": list(self.exclude_hosts),
            "reason": self.reason,
            "confidence": round(self.confidence, 2),
            "history": list(self.history),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Advice:
        """Rebuild the JSON form; AdviceFormatError (a ValueError) names what is wrong."""
        if not isinstance(data, dict):
            raise AdviceFormatError("advice must be an object")
        try:
            decision = Decision(str(data.get("decision")))
            restart_class = RestartClass(data.get("class", RestartClass.UNKNOWN.value))
            confidence = float(data.get("confidence", 0.0))
        except (TypeError, ValueError) as exc:
            raise AdviceFormatError(f"advice: {exc}") from None
        hosts, history = data.get("exclude_hosts", []), data.get("history", [])
        reason = data.get("reason", "")
        if not isinstance(reason, str) or not _strings(hosts) or not _strings(history):
            raise AdviceFormatError("advice: reason, exclude_hosts and history must be text")
        return cls(decision, restart_class, reason, confidence, tuple(hosts), tuple(history))


_HEADS = {
    Decision.RESTART: "Restart from the last checkpoint",
    Decision.STOP: "Do not restart",
    Decision.INVESTIGATE: "Investigate before restarting",
}


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def advise(restart: Restart | None, *, status: str, confidence: float, host: str | None) -> Advice | None:
    """The advice for a diagnosis with this status, whose signature has ``restart`` (None when no
    signature names the failure) and whose initiating line was printed on ``host``."""
    if status not in ADVISED_STATUSES:
        return None
    if restart is None or status != "failure":
        restart = Restart(RestartClass.UNKNOWN, UNRECOGNIZED_REASON)
    decision = _DECISIONS[restart.cls]
    reason = restart.reason
    hosts: tuple[str, ...] = ()
    if decision is Decision.RESTART_EXCLUDING:
        if host:
            hosts = (host,)
        else:
            decision = Decision.INVESTIGATE
            reason += " (the log does not name the host: find it in dmesg or sacct's NodeList first)"
    if decision is Decision.INVESTIGATE:
        confidence = min(confidence, INVESTIGATE_MAX)
    return Advice(decision, restart.cls, reason, round(confidence, 2), hosts)
