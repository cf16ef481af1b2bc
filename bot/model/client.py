"""An OpenAI-compatible chat-completions client (vLLM, Ollama, llama.cpp server, hosted APIs).

Bounded in time as a whole (retries included), retried on 429 and 5xx with backoff that honours
Retry-After, and never raising anything but ``ModelUnavailable`` for what the model side does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class ModelUnavailable(Exception):
    """The model did not answer usefully in time; the message says why (for logs, not users)."""


@dataclass(frozen=True)
class ModelReply:
    text: str
    model: str  # as the server names it


class ModelClient:
    """POSTs to ``{base_url}/chat/completions``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 20.0,
        retries: int = 2,
        max_answer_tokens: int = 600,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = retries
        self.max_answer_tokens = max_answer_tokens
        self._session: aiohttp.ClientSession | None = None

    async def complete(self, messages: list[dict[str, str]]) -> ModelReply:
        """The model's answer to ``messages``; ModelUnavailable after the time limit or retries."""
        try:
            return await asyncio.wait_for(self._complete(messages), timeout=self.timeout_s)
        except TimeoutError:
            raise ModelUnavailable(f"no answer within {self.timeout_s:g} s") from None

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _complete(self, messages: list[dict[str, str]]) -> ModelReply:
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": 0.2,
            "max_tokens": self.max_answer_tokens,
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        last = "no attempt"
        for attempt in range(self.retries + 1):
            try:
                async with self._http().post(self.url, json=body, headers=headers) as resp:
                    if resp.status in RETRY_STATUSES:
                        last = f"HTTP {resp.status}"
                        await asyncio.sleep(_backoff(resp.headers.get("Retry-After"), attempt))
                        continue
                    if resp.status != 200:
                        raise ModelUnavailable(f"HTTP {resp.status}")
                    data = await resp.json(content_type=None)
            except (aiohttp.ClientError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(_backoff(None, attempt))
                continue
            return _reply(data, self.model)
        raise ModelUnavailable(f"gave up after {self.retries + 1} attempts ({last})")

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self._session


def _backoff(retry_after: str | None, attempt: int) -> float:
    if retry_after and retry_after.strip().isdigit() and len(retry_after.strip()) <= 4:
        return min(float(retry_after), 10.0)
    return min(0.5 * 2**attempt, 4.0)


def _reply(data: Any, asked_model: str) -> ModelReply:
    try:
        text = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ModelUnavailable("the answer has no choices[0].message.content") from None
    if not isinstance(text, str) or not text.strip():
        raise ModelUnavailable("the answer is empty")
    model = data.get("model") if isinstance(data, dict) else None
    return ModelReply(text=text.strip(), model=model if isinstance(model, str) and model else asked_model)
