"""Free-form follow-ups answered by the team's own model, from the redacted evidence only.

Deterministic answers come first (``bot.slack.intents``); this runs only for a question no intent
takes, or for "explain". Any trouble on the model side (time limit, errors, allowance used up)
returns None, and the caller answers as it would without a model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.model.allowance import ModelAllowance
from bot.model.citations import check_citations
from bot.model.client import ModelClient, ModelUnavailable
from bot.model.pack import EvidencePack, build_pack
from signatures import redact
from signatures.diagnosis import Diagnosis

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelAnswer:
    text: str  # the model's answer, redacted, unknown citations marked
    model: str
    cited: tuple[str, ...]
    shared: str  # one sentence: what was sent


class ModelAnswerer:
    """Builds the evidence pack, asks the model, checks its citations."""

    def __init__(
        self,
        client: ModelClient,
        allowance: ModelAllowance | None = None,
        *,
        max_lines: int = 40,
        max_tokens: int = 3000,
    ) -> None:
        self.client = client
        self.allowance = allowance
        self.max_lines = max_lines
        self.max_tokens = max_tokens

    async def answer(self, d: Diagnosis, question: str, channel: str | None) -> ModelAnswer | None:
        """The model's cited answer, or None when it cannot give one now."""
        if self.allowance is not None and channel and not await self.allowance.take(channel):
            log.info("model allowance used up for %s", channel)
            return None
        pack = build_pack(d, question, max_lines=self.max_lines, max_tokens=self.max_tokens)
        try:
            reply = await self.client.complete(pack.messages)
        except ModelUnavailable as exc:
            log.warning("model %s gave no answer: %s", self.client.model, exc)
            return None
        checked = check_citations(redact(reply.text), pack.labels)
        return ModelAnswer(checked.text, reply.model, checked.cited, shared_sentence(pack))

    async def close(self) -> None:
        """Close the client's HTTP session."""
        await self.client.close()


def shared_sentence(pack: EvidencePack) -> str:
    """What left the deployment, in one sentence for the reply's context line."""
    files: dict[str, list[int]] = {}
    for e in pack.lines:
        files.setdefault(e.file, []).append(e.line)
    where = "; ".join(f"{name} lines {', '.join(map(str, sorted(nums)))}" for name, nums in files.items())
    lines = f"{len(pack.lines)} redacted log line(s) ({where})" if pack.lines else "no log lines"
    return (
        f"Sent: the diagnosis summary ({', '.join(pack.facts)}), {lines} and your question; "
        f"{pack.size:,} characters in all. No raw log was sent."
    )
