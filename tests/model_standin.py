"""A local stand-in for an OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp).

It records every request, answers with ``reply`` (a function of the request body), and can be told
to answer the next requests with an HTTP status (429, 500) or to hang until the test ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class ModelStandin:
    reply: Callable[[dict[str, Any]], str] = lambda body: "I cannot tell from this."
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)  # statuses for the next requests, in order
    hang: bool = False
    base_url: str = ""
    _runner: web.AppRunner | None = None
    _release: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def sent_text(self) -> str:
        """Everything every request sent, as one string (to search for what must not be there)."""
        return "\n".join(json.dumps(r) for r in self.requests)

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self.fail_next:
            status = self.fail_next.pop(0)
            return web.json_response(
                {"error": {"message": "busy"}}, status=status, headers={"Retry-After": "0"}
            )
        if self.hang:
            await self._release.wait()
        content = self.reply(body)
        return web.json_response(
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            }
        )
