"""What the engine answers: plain dataclasses, and their stable JSON form."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from signatures.advice import Advice


class Status(StrEnum):
    FAILURE = "failure"  # a known signature names the initiating failure; the run died or will die
    UNRECOGNIZED = "unrecognized"  # an error no signature knows; the first line stating it
    DEGRADED = "degraded"  # the run kept going, losing speed, memory or correctness to a problem
    CLEAN = "clean"  # no failure; at most benign warnings
    EMPTY = "empty"  # the input held no text lines


@dataclass(frozen=True)
class SignatureRef:
    id: str
    title: str
    category: str
    role: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "category": self.category, "role": self.role}


@dataclass(frozen=True)
class Evidence:
    """One log line, where it is, and who printed it. Text is redacted."""

    file: str
    line: int  # 1-based, in that file
    text: str  # the whole line as in the file
    rank: int | None = None
    host: str | None = None
    time: str | None = None  # ISO 8601 when the line carried a timestamp
    before: tuple[str, ...] = ()  # context lines above, oldest first
    after: tuple[str, ...] = ()  # context lines below

    def to_dict(self, *, context: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "rank": self.rank,
            "host": self.host,
            "time": self.time,
        }
        if context:
            out["before"] = list(self.before)
            out["after"] = list(self.after)
        return out


@dataclass(frozen=True)
class DownstreamGroup:
    """Lines that followed the initiating failure and only re-report it."""

    signature: SignatureRef | None  # None: unknown error lines after the cause
    role: str
    count: int
    ranks: tuple[int, ...]
    first: Evidence
    capped: bool = False  # counting stopped at a per-file cap: ``count`` is a lower bound

    def to_dict(self) -> dict[str, Any]:
        return {
            "signature": self.signature.id if self.signature else None,
            "title": self.signature.title if self.signature else None,
            "role": self.role,
            "count": self.count,
            "ranks": list(self.ranks),
            "capped": self.capped,
            "first": {"file": self.first.file, "line": self.first.line, "text": self.first.text},
        }


@dataclass(frozen=True)
class Diagnosis:
    status: Status
    signature: SignatureRef | None
    confidence: float
    initiating: Evidence | None
    downstream: tuple[DownstreamGroup, ...] = ()
    why: tuple[str, ...] = ()  # why the initiating line won, and why the others lost
    summary: str = ""
    root_causes: tuple[str, ...] = ()
    fix: tuple[dict[str, str], ...] = ()  # {step, command?, why?}
    decision_path: tuple[str, ...] = ()
    checklist: tuple[str, ...] = ()
    missing_facts: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    lines_read: int = 0
    bytes_read: int = 0
    advice: Advice | None = None  # what to do with the job next; None when nothing ended it
    skipped: tuple[str, ...] = ()  # inputs left out, "name: why", so no log is dropped unsaid

    @property
    def headline(self) -> str:
        """The diagnosis in a few words, saying whether the run crashed or kept going."""
        if self.status is Status.FAILURE and self.signature:
            return self.signature.title
        if self.status is Status.UNRECOGNIZED:
            return "Unrecognized failure"
        if self.status is Status.DEGRADED:
            what = self.signature.title if self.signature else "a problem no signature knows"
            return f"Degraded, not crashed: {what}"
        if self.status is Status.EMPTY:
            return "Empty log: no text to read"
        return "No failure found"

    def to_dict(self, *, context: bool = True) -> dict[str, Any]:
        """The stable JSON form; other tools consume these keys."""
        return {
            "status": self.status.value,
            "signature": self.signature.to_dict() if self.signature else None,
            "confidence": round(self.confidence, 2),
            "initiating": self.initiating.to_dict(context=context) if self.initiating else None,
            "downstream": [g.to_dict() for g in self.downstream],
            "why": list(self.why),
            "summary": self.summary,
            "root_causes": list(self.root_causes),
            "fix": [dict(step) for step in self.fix],
            "decision_path": list(self.decision_path),
            "checklist": list(self.checklist),
            "missing_facts": list(self.missing_facts),
            "related": list(self.related),
            "environment": dict(self.environment),
            "files": list(self.files),
            "lines_read": self.lines_read,
            "bytes_read": self.bytes_read,
            "advice": self.advice.to_dict() if self.advice else None,
            "skipped": list(self.skipped),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        """Rebuild a stored diagnosis (the inverse of ``to_dict``)."""
        sig = data.get("signature")
        init = data.get("initiating")
        return cls(
            status=Status(data["status"]),
            signature=SignatureRef(**sig) if sig else None,
            confidence=float(data.get("confidence", 0.0)),
            initiating=_evidence(init) if init else None,
            downstream=tuple(
                DownstreamGroup(
                    signature=SignatureRef(g["signature"], g.get("title") or g["signature"], "", g["role"])
                    if g.get("signature")
                    else None,
                    role=g["role"],
                    count=g["count"],
                    ranks=tuple(g["ranks"]),
                    first=_evidence(g["first"]),
                    capped=bool(g.get("capped", False)),
                )
                for g in data.get("downstream", [])
            ),
            why=tuple(data.get("why", [])),
            summary=data.get("summary", ""),
            root_causes=tuple(data.get("root_causes", [])),
            fix=tuple(data.get("fix", [])),
            decision_path=tuple(data.get("decision_path", [])),
            checklist=tuple(data.get("checklist", [])),
            missing_facts=tuple(data.get("missing_facts", [])),
            related=tuple(data.get("related", [])),
            environment=dict(data.get("environment", {})),
            files=tuple(data.get("files", [])),
            lines_read=int(data.get("lines_read", 0)),
            bytes_read=int(data.get("bytes_read", 0)),
            advice=Advice.from_dict(data["advice"]) if data.get("advice") else None,  # older: none
            skipped=tuple(str(x) for x in data.get("skipped") or ()),
        )


def _evidence(d: dict[str, Any]) -> Evidence:
    return Evidence(
        file=d["file"],
        line=d["line"],
        text=d["text"],
        rank=d.get("rank"),
        host=d.get("host"),
        time=d.get("time"),
        before=tuple(d.get("before", [])),
        after=tuple(d.get("after", [])),
    )
