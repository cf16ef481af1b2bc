"""What the model is shown: the stored, redacted diagnosis and a bounded set of its evidence lines.

Never the raw log. Every line the model may cite carries a ``file:line`` label; the pack records
exactly what it holds, so the reply can say what was shared and citations can be checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from signatures import redact
from signatures.diagnosis import Diagnosis, Evidence

CHARS_PER_TOKEN = 4  # a rough, conservative rate for English and log text

SYSTEM_PROMPT = (
    "You are Denpex, helping an on-call ML infrastructure engineer with a failed training run. "
    "Answer only from the diagnosis and the numbered evidence lines given. Cite every log line you "
    "rely on as [file:line] exactly as labelled. If the evidence does not answer the question, say "
    "what is missing instead of guessing. Be brief: at most 8 sentences."
)


@dataclass(frozen=True)
class EvidenceLine:
    """One log line the model may cite."""

    file: str
    line: int
    text: str

    @property
    def label(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class EvidencePack:
    """The messages sent to the model and an account of what they hold."""

    messages: list[dict[str, str]]
    lines: tuple[EvidenceLine, ...]
    facts: tuple[str, ...] = field(default=())  # which parts of the diagnosis went in

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(e.label for e in self.lines)

    @property
    def size(self) -> int:
        """Characters sent, all messages together."""
        return sum(len(m["content"]) for m in self.messages)


def evidence_lines(d: Diagnosis, max_lines: int) -> tuple[EvidenceLine, ...]:
    """The engine's own selection, most telling first: the initiating line, its context, then the
    first line of every downstream group. At most ``max_lines``, redacted again."""
    out: list[EvidenceLine] = []
    seen: set[str] = set()

    def add(file: str, line: int, text: str) -> None:
        item = EvidenceLine(file, line, redact(text)[:1000])
        if item.label not in seen and len(out) < max_lines:
            seen.add(item.label)
            out.append(item)

    if d.initiating is not None:
        ev: Evidence = d.initiating
        add(ev.file, ev.line, ev.text)
        for i, text in enumerate(ev.before):
            add(ev.file, ev.line - len(ev.before) + i, text)
        for i, text in enumerate(ev.after):
            add(ev.file, ev.line + 1 + i, text)
    for group in d.downstream:
        add(group.first.file, group.first.line, group.first.text)
    return tuple(out)


def build_pack(d: Diagnosis, question: str, *, max_lines: int = 40, max_tokens: int = 3000) -> EvidencePack:
    """The chat messages for ``question`` about ``d``, within ``max_tokens`` (roughly)."""
    budget = max_tokens * CHARS_PER_TOKEN
    summary: dict[str, object] = {
        "status": d.status.value,
        "headline": d.headline,
        "signature": d.signature.to_dict() if d.signature else None,
        "confidence": round(d.confidence, 2),
        "initiating": {"file": d.initiating.file, "line": d.initiating.line, "rank": d.initiating.rank,
                       "host": d.initiating.host, "time": d.initiating.time} if d.initiating else None,
        "downstream": [
            {"title": g.signature.title if g.signature else "unrecognized error lines", "role": g.role,
             "count": g.count, "ranks": list(g.ranks[:16]), "first": f"{g.first.file}:{g.first.line}"}
            for g in d.downstream[:12]
        ],
        "environment": dict(d.environment),
        "why": list(d.why[:6]),
        "decision_path": list(d.decision_path[:10]),
        "root_causes": list(d.root_causes[:6]),
    }  # fmt: skip
    facts = tuple(k for k, v in summary.items() if v)
    lines = evidence_lines(d, max_lines)
    question = redact(question.strip())[:2000]
    room = budget - len(SYSTEM_PROMPT)
    head = f"Question: {question}\n\nDiagnosis (JSON):\n{redact(json.dumps(summary, ensure_ascii=False))}"
    while True:
        ordered = sorted(lines, key=lambda e: (e.file, e.line))
        numbered = "\n".join(f"[{e.label}] {e.text}" for e in ordered)
        user = f"{head}\n\nEvidence lines:\n{numbered or '(none kept)'}"
        if len(user) <= room or not lines:
            break
        lines = lines[:-1]  # over budget: drop the least telling line (the selection ends with echoes)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user[: max(room, 0)]},
    ]
    return EvidencePack(messages=messages, lines=lines, facts=facts)
