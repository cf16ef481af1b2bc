"""Fetching a webhook's log_url: allow-list, schemes, redirects, addresses, size and time limits.

Every test talks to real aiohttp servers on 127.0.0.1; the allow-list names 127.0.0.1 explicitly,
because loopback is otherwise refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.fetch.remote import (
    AllowListError,
    RefusedURL,
    RemoteLogError,
    RemoteLogFetcher,
    RemoteLogTimeout,
    RemoteLogTooLarge,
    Resolve,
    check_url,
    parse_allowlist,
)
from tests.slack_requests import redis_for_app

__all__ = ["redis_for_app"]  # fixtures

LOG = b"[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n" * 100


@dataclass
class LogServer:
    """A log server on 127.0.0.1 whose routes the test sets; it records the paths it served."""

    routes: dict[str, Callable[[web.Request], object]] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    port: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    @property
    def entry(self) -> str:
        """This server's allow-list entry: its address and its port."""
        return f"127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(request.path)
        route = self.routes.get(request.path)
        if route is None:
            return web.Response(status=404)
        result = route(request)
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, web.StreamResponse)
        return result


@pytest.fixture
async def server() -> AsyncIterator[LogServer]:
    state = LogServer()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()


def found(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location})


def fetcher(
    allow: str,
    *,
    max_bytes: int = 1 << 20,
    timeout_s: float = 5.0,
    max_redirects: int = 5,
) -> RemoteLogFetcher:
    return RemoteLogFetcher(allow, max_bytes=max_bytes, timeout_s=timeout_s, max_redirects=max_redirects)


async def test_allow_listed_url_is_streamed_to_a_file(server: LogServer, tmp_path: Path) -> None:
    server.routes["/job/7.log"] = lambda r: web.Response(body=LOG)
    path = await fetcher(server.entry).fetch_to_temp(server.url("/job/7.log"), directory=tmp_path)
    assert path.read_bytes() == LOG
    assert path.suffix == ".log"


async def test_host_off_the_allow_list_is_refused_before_connecting(server: LogServer) -> None:
    server.routes["/a.log"] = lambda r: web.Response(body=LOG)
    with pytest.raises(RefusedURL, match="not on DENPEX_LOG_URL_ALLOWLIST"):
        await fetcher("logs.example.com").fetch_to_temp(server.url("/a.log"))
    assert server.hits == []


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/a.log", "file:///etc/passwd", "gopher://127.0.0.1/", "/relative.log"]
)
def test_schemes_other_than_http_are_refused(url: str) -> None:
    with pytest.raises(RefusedURL, match="http or https"):
        check_url(url, parse_allowlist("127.0.0.1"))


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(RefusedURL, match="credentials"):
        check_url("http://user:pw@127.0.0.1/a.log", parse_allowlist("127.0.0.1"))


async def test_redirect_on_the_list_is_followed(server: LogServer, tmp_path: Path) -> None:
    server.routes["/old.log"] = lambda r: found("/new.log")
    server.routes["/new.log"] = lambda r: web.Response(body=LOG)
    path = await fetcher(server.entry).fetch_to_temp(server.url("/old.log"), directory=tmp_path)
    assert path.read_bytes() == LOG
    assert server.hits == ["/old.log", "/new.log"]


async def test_redirect_off_the_list_is_not_followed(server: LogServer) -> None:
    # Same server, other name: "localhost" is not on the list, so the second hop is refused.
    server.routes["/a.log"] = lambda r: found(server.url("/b.log", host="localhost"))
    server.routes["/b.log"] = lambda r: web.Response(body=LOG)
    with pytest.raises(RefusedURL, match="localhost is not on"):
        await fetcher(server.entry).fetch_to_temp(server.url("/a.log"))
    assert server.hits == ["/a.log"]


async def test_redirect_to_a_metadata_address_is_refused(server: LogServer) -> None:
    target = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
    server.routes["/a.log"] = lambda r: found(target)
    with pytest.raises(RefusedURL, match="metadata"):
        await fetcher(f"{server.entry},169.254.169.254").fetch_to_temp(server.url("/a.log"))


async def test_redirect_loop_stops(server: LogServer) -> None:
    server.routes["/loop.log"] = lambda r: found("/loop.log")
    with pytest.raises(RefusedURL, match="redirected more than 3 times"):
        await fetcher(server.entry, max_redirects=3).fetch_to_temp(server.url("/loop.log"))
    assert len(server.hits) == 4


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("::ffff:169.254.169.254", "metadata"),
        ("0.0.0.0", "not a unicast"),
    ],
)
def test_metadata_and_link_local_literals_are_refused_even_when_listed(address: str, reason: str) -> None:
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(RefusedURL, match=reason):
        check_url(f"http://{host}/log", parse_allowlist(address))


def test_metadata_host_names_are_refused_even_when_listed() -> None:
    with pytest.raises(RefusedURL, match="metadata service"):
        check_url("http://metadata.google.internal/x", parse_allowlist("metadata.google.internal"))


def test_loopback_needs_its_own_allow_list_entry() -> None:
    allow = parse_allowlist("logs.example.com")
    with pytest.raises(RefusedURL):
        check_url("http://127.0.0.1/a.log", allow)
    assert check_url("http://127.0.0.1/a.log", parse_allowlist("127.0.0.1")).host == "127.0.0.1"


def test_wildcard_entries_cover_subdomains_only() -> None:
    allow = parse_allowlist("*.logs.example.com")
    assert check_url("https://a.logs.example.com/x", allow).host == "a.logs.example.com"
    for url in ("https://logs.example.com/x", "https://evil-logs.example.com/x"):
        with pytest.raises(RefusedURL):
            check_url(url, allow)


def resolving_to(*addresses: str) -> Resolve:
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


@pytest.mark.parametrize(
    ("addresses", "reason"),
    [
        (["169.254.169.254"], "metadata"),
        (["10.1.2.3", "169.254.169.254"], "metadata"),  # every address is checked
        (["fe80::1"], "link-local"),
        (["127.0.0.1"], "loopback"),  # a listed name that resolves to loopback
    ],
)
async def test_names_resolving_to_refused_addresses_are_refused_at_connect(
    server: LogServer, addresses: list[str], reason: str
) -> None:
    remote = RemoteLogFetcher(
        f"logs.internal:{server.port}",
        max_bytes=1 << 20,
        timeout_s=5.0,
        resolve=resolving_to(*addresses),
    )
    with pytest.raises(RefusedURL, match=reason):
        await remote.fetch_to_temp(f"http://logs.internal:{server.port}/a.log")
    assert server.hits == []


async def test_connection_goes_to_the_checked_address(server: LogServer, tmp_path: Path) -> None:
    server.routes["/a.log"] = lambda r: web.Response(body=LOG)
    remote = RemoteLogFetcher(
        f"logs.internal:{server.port},127.0.0.1",
        max_bytes=1 << 20,
        timeout_s=5.0,
        resolve=resolving_to("127.0.0.1"),
    )
    path = await remote.fetch_to_temp(f"http://logs.internal:{server.port}/a.log", directory=tmp_path)
    assert path.read_bytes() == LOG


async def test_declared_oversize_is_refused(server: LogServer, tmp_path: Path) -> None:
    server.routes["/big.log"] = lambda r: web.Response(body=b"x" * 5000)
    with pytest.raises(RemoteLogTooLarge, match="4096 bytes"):
        await fetcher(server.entry, max_bytes=4096).fetch_to_temp(server.url("/big.log"), directory=tmp_path)
    assert list(tmp_path.iterdir()) == []


async def test_streamed_oversize_without_length_is_cut_off(server: LogServer, tmp_path: Path) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(64):
            await response.write(b"y" * 1024)
        await response.write_eof()
        return response

    server.routes["/stream.log"] = endless
    with pytest.raises(RemoteLogTooLarge):
        await fetcher(server.entry, max_bytes=8192).fetch_to_temp(
            server.url("/stream.log"), directory=tmp_path
        )
    assert list(tmp_path.iterdir()) == []


async def test_slow_server_times_out(server: LogServer, tmp_path: Path) -> None:
    async def stalls(request: web.Request) -> web.StreamResponse:
        await server.release.wait()
        return web.Response(body=LOG)

    server.routes["/slow.log"] = stalls
    with pytest.raises(RemoteLogTimeout, match=r"did not answer within 0\.2 s"):
        await fetcher(server.entry, timeout_s=0.2).fetch_to_temp(server.url("/slow.log"), directory=tmp_path)
    assert list(tmp_path.iterdir()) == []


async def test_http_errors_are_reported(server: LogServer) -> None:
    with pytest.raises(RemoteLogError, match="HTTP 404"):
        await fetcher(server.entry).fetch_to_temp(server.url("/missing.log"))


# -- ports ------------------------------------------------------------------------------------


def test_an_entry_without_a_port_allows_only_the_schemes_own() -> None:
    allow = parse_allowlist("logs.example.com")
    assert check_url("https://logs.example.com/a.log", allow).port == 443
    assert check_url("http://logs.example.com/a.log", allow).port == 80
    for url in (
        "https://logs.example.com:8443/a.log",
        "http://logs.example.com:443/a.log",  # 443 is https's port, not http's
        "https://logs.example.com:80/a.log",
        "http://logs.example.com:6379/",
    ):
        with pytest.raises(
            RefusedURL, match=r"port \d+ of logs.example.com is not on DENPEX_LOG_URL_ALLOWLIST"
        ):
            check_url(url, allow)


@pytest.mark.parametrize(
    ("entry", "allowed", "refused"),
    [
        ("logs.example.com:8443", "https://logs.example.com:8443/a", "https://logs.example.com/a"),
        ("*.logs.example.com:9000", "http://a.logs.example.com:9000/a", "http://a.logs.example.com/a"),
        ("10.0.0.7:8080", "http://10.0.0.7:8080/a", "http://10.0.0.7:8081/a"),
        ("[fd00::7]:8443", "https://[fd00::7]:8443/a", "https://[fd00::7]/a"),
        ("fd00::7", "https://[fd00::7]/a", "https://[fd00::7]:8443/a"),
    ],
)
def test_an_entry_with_a_port_allows_that_port_only(entry: str, allowed: str, refused: str) -> None:
    allow = parse_allowlist(entry)
    assert check_url(allowed, allow)
    with pytest.raises(RefusedURL, match="port"):
        check_url(refused, allow)


@pytest.mark.parametrize(
    "entry", ["logs.example.com:https", "logs.example.com:70000", "[fd00::7]8443", ":8443"]
)
def test_a_malformed_entry_is_named(entry: str) -> None:
    with pytest.raises(AllowListError, match="DENPEX_LOG_URL_ALLOWLIST"):
        parse_allowlist(f"ok.example.com,{entry}")


async def test_a_redirect_to_another_port_of_a_listed_host_is_refused(server: LogServer) -> None:
    other = LogServer()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", other.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    other.port = runner.addresses[0][1]
    other.routes["/b.log"] = lambda r: web.Response(body=LOG)
    try:
        server.routes["/a.log"] = lambda r: found(other.url("/b.log"))
        with pytest.raises(RefusedURL, match=f"port {other.port} of 127.0.0.1 is not on"):
            await fetcher(server.entry).fetch_to_temp(server.url("/a.log"))
        assert (server.hits, other.hits) == (["/a.log"], [])
    finally:
        await runner.cleanup()


async def test_the_webhook_refuses_an_unlisted_port_before_queueing(
    slack_api: Any, redis_for_app: Any
) -> None:
    import json
    import time

    from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
    from tests.slack_requests import Denpex

    env = {
        "DENPEX_WEBHOOK_SECRET": "whsec-ports-0123456789",
        "DENPEX_LOG_URL_ALLOWLIST": "logs.example.com,logs.example.com:8443",
    }
    async with Denpex(slack_api, redis_for_app, env=env) as app:
        answers = []
        for n, url in enumerate(
            ("https://logs.example.com:8443/a.log", "https://logs.example.com:9443/a.log")
        ):
            body = json.dumps({"job_id": f"ports-{n}", "channel": "C1", "log_url": url}).encode()
            ts = str(int(time.time()))
            headers = {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign(env["DENPEX_WEBHOOK_SECRET"], ts, body)}
            resp = await app.http.post(PATH, data=body, headers=headers)
            answers.append((resp.status, await resp.json()))
        assert answers[0][0] == 202
        assert answers[1][0] == 400 and "port 9443" in answers[1][1]["error"]
        assert (await app.runtime.queue.stats())["length"] == 1
