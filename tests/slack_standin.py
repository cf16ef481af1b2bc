"""A local stand-in for Slack's Web API: an aiohttp server on 127.0.0.1 that records every call.

Point a client at it with ``AsyncWebClient(token=standin.token, base_url=standin.api_url)``.
It answers the methods Denpex uses, serves file downloads the way Slack does (an HTML login
page with status 200 when the bot token is missing), offers ``response_url`` endpoints, and can
be told to fail the next calls of a method with 429 or 500 to exercise retries, or to do a call
and answer it only after the client gave up (``answer_late``). Message metadata is kept and
returned by ``conversations.history`` and ``conversations.replies`` with
``include_all_metadata``; ``chat.delete`` removes a message (``deleted`` keeps it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_TOKEN = "xoxb-denpex-test"
BOT_USER_ID = "UDENPEXBOT"
BOT_ID = "BDENPEXBOT"
TEAM_ID = "TDENPEX"

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in</body></html>"


@dataclass
class Call:
    """One request the stand-in received."""

    method: str  # Web API method ("chat.postMessage"), or "download", "response_url", "upload"
    args: dict[str, Any]  # query, form and JSON body merged
    headers: dict[str, str]
    status: int = 200  # what the stand-in answered


@dataclass
class StoredFile:
    id: str
    name: str
    data: bytes
    mimetype: str = "text/plain"
    channel: str | None = None
    ts: str | None = None
    thread_ts: str | None = None
    user: str = "UUPLOADER"


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    user: str = BOT_USER_ID
    metadata: dict[str, Any] | None = None


@dataclass
class _Fault:
    status: int
    remaining: int
    retry_after: int
    error: str | None = None  # with status 200: answer {"ok": false, "error": error}
    landed: bool = False  # do the call (post the message), then answer the failure


@dataclass
class _Late:
    delay_s: float
    remaining: int


@dataclass
class SlackStandin:
    """The server state: calls, messages, files and scheduled faults."""

    token: str = BOT_TOKEN
    calls: list[Call] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    files: dict[str, StoredFile] = field(default_factory=dict)
    # Channels where chat.postMessage answers this error ("not_in_channel", "channel_not_found").
    channel_errors: dict[str, str] = field(default_factory=dict)
    # Extra JSON merged into a method's answer, e.g. {"auth.test": {"user_id": "U1"}}.
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_url: str = ""
    # The token downloads accept (default: ``token``); set another to get Slack's login page.
    download_token: str | None = None
    # While set and not released, downloads wait (to catch a worker in the middle of a job).
    hold_downloads: asyncio.Event | None = None
    # Messages removed by chat.delete, in the order they were deleted.
    deleted: list[Message] = field(default_factory=list)
    _faults: dict[str, list[_Fault]] = field(default_factory=lambda: defaultdict(list))
    _late: dict[str, list[_Late]] = field(default_factory=lambda: defaultdict(list))
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None

    # -- setup -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The ``base_url`` for slack_sdk clients (ends with ``/api/``)."""
        return f"{self.base_url}/api/"

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/files/{file_id}/{name}", self._download)
        app.router.add_post("/response/{key}", self._response_url)
        app.router.add_post("/upload/{file_id}", self._upload)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.base_url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        """Stop the server (held downloads are released so none keeps it waiting)."""
        if self.hold_downloads is not None:
            self.hold_downloads.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def fail_next(
        self,
        method: str,
        status: int = 200,
        times: int = 1,
        retry_after: int = 1,
        error: str | None = None,
        landed: bool = False,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with ``status`` (429 or 5xx), or with
        ``{"ok": false, "error": error}`` when ``error`` is given; with ``landed`` the call is
        done all the same (a message posted behind a 500)."""
        self._faults[method].append(_Fault(status, times, retry_after, error, landed))

    def answer_late(self, method: str, delay_s: float, times: int = 1) -> None:
        """Do the next ``times`` calls of ``method`` (a message is posted), but answer each only
        after ``delay_s``: past the client's timeout, the client sees a failure though it landed."""
        self._late[method].append(_Late(delay_s, times))

    def top_level(self, channel: str) -> list[Message]:
        """Messages posted in ``channel`` outside any thread (parents), oldest first."""
        return [m for m in self.messages if m.channel == channel and m.thread_ts is None]

    def add_file(
        self,
        name: str,
        data: bytes,
        *,
        file_id: str | None = None,
        channel: str | None = None,
        ts: str | None = None,
        thread_ts: str | None = None,
        mimetype: str = "text/plain",
    ) -> dict[str, Any]:
        """Store a file that ``files.info`` and downloads will serve; returns its file object."""
        fid = file_id or f"F{len(self.files) + 1:08d}"
        self.files[fid] = StoredFile(fid, name, data, mimetype, channel, ts, thread_ts)
        return self.file_object(fid)

    def file_object(self, file_id: str) -> dict[str, Any]:
        """The file object Slack would return for ``file_id``."""
        f = self.files[file_id]
        url = f"{self.base_url}/files/{f.id}/{f.name}"
        obj: dict[str, Any] = {
            "id": f.id,
            "name": f.name,
            "title": f.name,
            "mimetype": f.mimetype,
            "filetype": "text",
            "size": len(f.data),
            "mode": "hosted",
            "user": f.user,
            "url_private": url,
            "url_private_download": url + "?download=1",
            "shares": {},
        }
        if f.channel and f.ts:
            share = {"ts": f.ts, "channel_name": f.channel}
            if f.thread_ts:
                share["thread_ts"] = f.thread_ts
            obj["shares"] = {"public": {f.channel: [share]}}
        return obj

    def response_url(self, key: str = "cmd") -> str:
        """A ``response_url`` that records what is posted to it."""
        return f"{self.base_url}/response/{key}"

    # -- queries for tests -------------------------------------------------------------------

    def calls_to(self, method: str) -> list[Call]:
        """Every call of ``method``, answered or not."""
        return [c for c in self.calls if c.method == method]

    def answered(self, method: str) -> list[Call]:
        """Calls of ``method`` that got a 200 answer."""
        return [c for c in self.calls_to(method) if c.status == 200]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """Messages posted as replies in one thread, oldest first."""
        return [m for m in self.messages if m.channel == channel and m.thread_ts == thread_ts]

    # -- handlers ----------------------------------------------------------------------------

    def _next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def _take_late(self, method: str) -> float:
        for late in self._late.get(method, []):
            if late.remaining > 0:
                late.remaining -= 1
                return late.delay_s
        return 0.0

    def _take_fault(self, method: str) -> _Fault | None:
        for fault in self._faults.get(method, []):
            if fault.remaining > 0:
                fault.remaining -= 1
                return fault
        return None

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    args.update(body)
            else:
                form = await request.post()
                args.update({k: v for k, v in form.items() if isinstance(v, str)})
        for key in ("blocks", "attachments"):
            if isinstance(args.get(key), str):
                with contextlib.suppress(ValueError):
                    args[key] = json.loads(args[key])
        return args

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        call = Call(method, await self._args(request), dict(request.headers))
        self.calls.append(call)
        fault = self._take_fault(method)
        if fault is not None and fault.error is not None:
            return web.json_response({"ok": False, "error": fault.error}, status=fault.status)
        if fault is not None:
            if fault.landed:
                self._answer(method, call.args)
            call.status = fault.status
            headers = {"Retry-After": str(fault.retry_after)} if fault.status == 429 else {}
            error = "ratelimited" if fault.status == 429 else "internal_error"
            return web.json_response({"ok": False, "error": error}, status=fault.status, headers=headers)
        auth = request.headers.get("Authorization", "")
        bearer = auth.startswith("Bearer ")
        token = auth.removeprefix("Bearer ") if bearer else call.args.get("token")
        if token != self.token:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        body = self._answer(method, call.args)
        body.update(self.overrides.get(method, {}))
        delay = self._take_late(method)
        if delay:
            # Done already (the message is in ``messages``); only the answer is late.
            await asyncio.sleep(delay)
        return web.json_response(body)

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://denpex.slack.com/",
                "team": "denpex",
                "user": "denpex",
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "bot_id": BOT_ID,
            }
        if method in ("chat.postMessage", "chat.postEphemeral"):
            channel = str(args.get("channel", ""))
            if channel in self.channel_errors:
                return {"ok": False, "error": self.channel_errors[channel]}
            ts = self._next_ts()
            if method == "chat.postEphemeral":
                return {"ok": True, "message_ts": ts}
            msg = Message(
                channel,
                ts,
                str(args.get("text") or ""),
                list(args.get("blocks") or []),
                args.get("thread_ts") or None,
                metadata=args.get("metadata") if isinstance(args.get("metadata"), dict) else None,
            )
            self.messages.append(msg)
            return {
                "ok": True,
                "channel": channel,
                "ts": ts,
                "message": {
                    "type": "message",
                    "user": BOT_USER_ID,
                    "text": msg.text,
                    "ts": ts,
                    "thread_ts": msg.thread_ts,
                },
            }
        if method == "chat.update":
            for m in self.messages:
                if m.channel == args.get("channel") and m.ts == args.get("ts"):
                    m.text = str(args.get("text") or m.text)
                    m.blocks = list(args.get("blocks") or m.blocks)
                    return {"ok": True, "channel": m.channel, "ts": m.ts, "text": m.text}
            return {"ok": False, "error": "message_not_found"}
        if method == "chat.delete":
            for m in self.messages:
                if m.channel == args.get("channel") and m.ts == args.get("ts"):
                    self.messages.remove(m)
                    self.deleted.append(m)
                    return {"ok": True, "channel": m.channel, "ts": m.ts}
            return {"ok": False, "error": "message_not_found"}
        if method in ("reactions.add", "reactions.remove"):
            return {"ok": True}
        if method == "files.info":
            fid = str(args.get("file", ""))
            if fid not in self.files:
                return {"ok": False, "error": "file_not_found"}
            return {"ok": True, "file": self.file_object(fid)}
        if method == "files.getUploadURLExternal":
            fid = f"FU{len(self.files) + 1:07d}"
            self.files[fid] = StoredFile(fid, str(args.get("filename", "upload")), b"")
            return {"ok": True, "upload_url": f"{self.base_url}/upload/{fid}", "file_id": fid}
        if method == "files.completeUploadExternal":
            raw = args.get("files", "[]")
            items = json.loads(raw) if isinstance(raw, str) else raw
            out = []
            for item in items:
                f = self.files.get(item["id"])
                if f is not None:
                    f.channel = args.get("channel_id") or args.get("channel")
                    f.thread_ts = args.get("thread_ts")
                    out.append({"id": f.id, "name": f.name, "title": item.get("title", f.name)})
            return {"ok": True, "files": out}
        if method == "conversations.history":
            channel = str(args.get("channel", ""))
            msgs = [m for m in self.messages if m.channel == channel and m.thread_ts is None]
            return {
                "ok": True,
                "has_more": False,
                "messages": [
                    {"type": "message", "user": m.user, "text": m.text, "ts": m.ts, **_metadata(m, args)}
                    for m in reversed(msgs)
                ],
            }
        if method == "conversations.replies":
            channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
            msgs = [m for m in self.messages if m.channel == channel and (m.ts == ts or m.thread_ts == ts)]
            return {
                "ok": True,
                "has_more": False,
                "messages": [
                    {
                        "type": "message",
                        "user": m.user,
                        "text": m.text,
                        "ts": m.ts,
                        "thread_ts": m.thread_ts or m.ts,
                        **_metadata(m, args),
                    }
                    for m in msgs
                ],
            }
        # Unknown methods answer ok so a new call never breaks a test silently: it is recorded.
        return {"ok": True}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        call = Call("download", {"file_id": request.match_info["file_id"]}, dict(request.headers))
        self.calls.append(call)
        fault = self._take_fault("download")
        if fault is not None:
            call.status = fault.status
            return web.Response(status=fault.status, text="error")
        if self.hold_downloads is not None:
            await self.hold_downloads.wait()
        f = self.files.get(request.match_info["file_id"])
        expected = self.download_token or self.token
        if request.headers.get("Authorization") != f"Bearer {expected}":
            # What Slack does without a valid token: a login page, status 200.
            return web.Response(body=LOGIN_PAGE, content_type="text/html")
        if f is None:
            call.status = 404
            return web.Response(status=404, text="not found")
        return web.Response(
            body=f.data,
            content_type="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{f.name}"'},
        )

    async def _response_url(self, request: web.Request) -> web.StreamResponse:
        call = Call("response_url", await self._args(request), dict(request.headers))
        call.args["key"] = request.match_info["key"]
        self.calls.append(call)
        fault = self._take_fault("response_url")
        if fault is not None:
            call.status = fault.status
            return web.Response(status=fault.status, text="error")
        return web.Response(text="ok")

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        data = await request.read()
        self.calls.append(
            Call(
                "upload",
                {"file_id": request.match_info["file_id"], "size": len(data)},
                dict(request.headers),
            )
        )
        f = self.files.get(request.match_info["file_id"])
        if f is not None:
            f.data = data
        return web.Response(text="OK - " + str(len(data)))


def _metadata(message: Message, args: dict[str, Any]) -> dict[str, Any]:
    # Slack returns message metadata only to callers that ask for it.
    if message.metadata and args.get("include_all_metadata") in (True, "1", "true", 1):
        return {"metadata": message.metadata}
    return {}
