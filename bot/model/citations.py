"""Citations in a model's answer, checked against the evidence it was shown."""

from __future__ import annotations

import re
from dataclasses import dataclass

# [rank12.log:2] or [logs/rank 3.log:120]: a label as the pack wrote it.
CITATION = re.compile(r"\[([^\[\]\n]{1,300}?):(\d{1,9})\]")


@dataclass(frozen=True)
class CheckedAnswer:
    text: str  # the answer with unknown citations marked
    cited: tuple[str, ...]  # labels cited that are in the evidence, in order of first use
    unknown: tuple[str, ...]  # labels cited that the model was never shown


def check_citations(answer: str, shown: frozenset[str]) -> CheckedAnswer:
    """Keep citations of lines the model was shown; mark any other as not in the evidence."""
    cited: list[str] = []
    unknown: list[str] = []

    def mark(m: re.Match[str]) -> str:
        label = f"{m.group(1).strip()}:{m.group(2)}"
        if label in shown:
            if label not in cited:
                cited.append(label)
            return f"[{label}]"
        if label not in unknown:
            unknown.append(label)
        return f"[{label}: not in the evidence I shared]"

    return CheckedAnswer(CITATION.sub(mark, answer), tuple(cited), tuple(unknown))
