"""Fetch a log named by a webhook's ``log_url``, only from allow-listed hosts, within limits.

A log URL comes from outside, so it is a server-side request forgery risk. The rules:
- only http and https, only hosts and ports on ``DENPEX_LOG_URL_ALLOWLIST``: an entry is ``host``,
  ``*.domain`` or an IP (``[v6]`` with a port), optionally with ``:port``; an entry without a port
  allows only the scheme's own (443 for https, 80 for http);
- redirects are followed by hand, at most ``max_redirects``, and each hop's host and port are
  checked again;
- every address a host resolves to is checked at connect time (so DNS cannot change the answer
  between the check and the connection): never link-local, multicast, unspecified or a cloud
  metadata address, and loopback only when the loopback address or ``localhost`` is listed;
- the body is streamed to a file and cut off past ``max_bytes``; the whole fetch has one deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from bot.ops.settings import SettingsError
from signatures.errors import InputError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> addresses; replaceable in tests, where no DNS is available.
Resolve = Callable[[str, int], Awaitable[list[str]]]

# Instance metadata services hand out cloud credentials; no allow-list entry can open them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (classic)
    )
)
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CHUNK = 256 * 1024


class RemoteLogError(InputError):
    """A log URL could not be fetched; the message says why, in one line."""


class RefusedURL(RemoteLogError):
    """The URL, a redirect, or an address it resolves to is not allowed."""


class RemoteLogTooLarge(RemoteLogError):
    """The log passes the size limit."""


class RemoteLogTimeout(RemoteLogError):
    """The fetch did not finish in time."""


DEFAULT_PORTS = {"https": 443, "http": 80}


class AllowListError(SettingsError):
    """An entry of DENPEX_LOG_URL_ALLOWLIST cannot be read; the message names it."""


@dataclass(frozen=True)
class AllowEntry:
    """One allow-list entry: a host (``*.domain`` for its subdomains) and a port, or None for
    the scheme's default port only."""

    host: str
    port: int | None = None

    def covers(self, host: str) -> bool:
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and host != self.host[2:]
        return host == self.host


@dataclass(frozen=True)
class AllowList:
    """The hosts and ports a log URL may point at."""

    entries: frozenset[AllowEntry] = frozenset()

    @property
    def hosts(self) -> frozenset[str]:
        """Every listed host, whatever its port (for the loopback rule)."""
        return frozenset(e.host for e in self.entries)

    def host_listed(self, host: str) -> bool:
        """True when some entry covers ``host``, on any port."""
        return any(e.covers(host) for e in self.entries)

    def allows(self, host: str, port: int, scheme: str) -> bool:
        """True when an entry covers ``host`` on ``port`` (its own, or the scheme's default)."""
        default = DEFAULT_PORTS.get(scheme)
        return any(e.covers(host) and port == (e.port or default) for e in self.entries)


def parse_allowlist(value: str | Iterable[str] | AllowList | None) -> AllowList:
    """Read a comma-separated allow-list: ``host``, ``*.domain``, an IP, each optionally with
    ``:port`` (an IPv6 address with a port in brackets: ``[fd00::1]:8443``)."""
    if isinstance(value, AllowList):
        return value
    items = value.split(",") if isinstance(value, str) else (value or ())
    return AllowList(frozenset(_entry(item.strip().lower()) for item in items if item.strip()))


def _entry(raw: str) -> AllowEntry:
    host, port = raw, None
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        if rest:
            port = _port_of(raw, rest[1:] if rest.startswith(":") else "")
    elif _literal_ip(raw) is None and ":" in raw:
        host, _, text = raw.rpartition(":")
        port = _port_of(raw, text)
    host = host.rstrip(".")
    if not host or "/" in host or "@" in host:
        raise AllowListError(f"DENPEX_LOG_URL_ALLOWLIST: {raw!r} is not a host, *.domain or IP")
    # IP entries in one spelling, so "::FFFF:0A00:1" and "::ffff:10.0.0.1" are the same entry.
    ip = _literal_ip(host)
    return AllowEntry(str(ip) if ip else host, port)


def _port_of(raw: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise AllowListError(f"DENPEX_LOG_URL_ALLOWLIST: {raw!r} has no valid port (1-65535) after ':'")
    return int(text)


def host_allowed(host: str, allowlist: AllowList) -> bool:
    """True when ``host`` is listed exactly, or falls under a ``*.domain`` entry (any port)."""
    return allowlist.host_listed(host.lower().rstrip(".").strip("[]"))


def address_refusal(ip: IPAddress, allowlist: frozenset[str]) -> str | None:
    """Why connecting to ``ip`` is refused, or None when it is fine (``allowlist``: the listed
    hosts, for the loopback rule)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_multicast or ip.is_unspecified:
        return f"{ip} is not a unicast address"
    if ip.is_loopback and str(ip) not in allowlist and "localhost" not in allowlist:
        return f"{ip} is a loopback address that is not on the allow-list"
    return None


def check_url(url: str | URL, allowlist: AllowList) -> URL:
    """Parse and check one URL (scheme, host, port, literal address); raise RefusedURL if refused."""
    try:
        parsed = url if isinstance(url, URL) else URL(url)
    except (ValueError, TypeError) as exc:
        raise RefusedURL(f"log_url is not a valid URL ({exc})") from exc
    if parsed.scheme not in ("http", "https"):
        raise RefusedURL(f"log_url must be http or https, not {parsed.scheme or 'no scheme'!r}")
    host = (parsed.host or "").lower().rstrip(".")
    if not host:
        raise RefusedURL("log_url has no host")
    if parsed.user or parsed.password:
        raise RefusedURL("log_url must not carry credentials")
    if host in METADATA_HOSTS:
        raise RefusedURL(f"log_url host {host} is a cloud metadata service")
    literal = _literal_ip(host)
    if literal is not None:
        # A literal loopback address passes only when it is itself on the list (checked next).
        why = address_refusal(literal, allowlist.hosts | {str(literal)})
        if why:
            raise RefusedURL(f"log_url refused: {why}")
        host = str(literal)
    if not allowlist.host_listed(host):
        raise RefusedURL(f"log_url host {host} is not on DENPEX_LOG_URL_ALLOWLIST")
    port = parsed.port or DEFAULT_PORTS[parsed.scheme]
    if not allowlist.allows(host, port, parsed.scheme):
        raise RefusedURL(
            f"log_url port {port} of {host} is not on DENPEX_LOG_URL_ALLOWLIST "
            f"(an entry without a port allows only {DEFAULT_PORTS[parsed.scheme]} for {parsed.scheme})"
        )
    return parsed


class RemoteLogFetcher:
    """Fetch allow-listed log URLs into files, with size, time and redirect limits."""

    def __init__(
        self,
        allowlist: str | Iterable[str] | AllowList | None,
        *,
        max_bytes: int,
        timeout_s: float,
        max_redirects: int = 5,
        resolve: Resolve | None = None,
    ) -> None:
        self.allowlist = parse_allowlist(allowlist)
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects
        self._resolve = resolve or _system_resolve

    def check(self, url: str) -> URL:
        """Check a URL before queueing it (the fetch checks again, hop by hop)."""
        return check_url(url, self.allowlist)

    async def fetch_to_temp(self, url: str, *, directory: str | Path | None = None) -> Path:
        """Fetch ``url`` into a new temporary file and return its path (the caller deletes it)."""
        suffix = "".join(PurePosixPath(URL(url).path).suffixes[-2:])[:16]
        fd, name = tempfile.mkstemp(prefix="denpex-log-", suffix=suffix, dir=directory)
        os.close(fd)
        path = Path(name)
        try:
            await self.fetch(url, path)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path

    async def fetch(self, url: str, dest: Path) -> int:
        """Stream ``url`` into ``dest``; return the number of bytes written."""
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._fetch(url, dest)
        except TimeoutError as exc:
            raise RemoteLogTimeout(f"log_url did not answer within {self.timeout_s:g} s") from exc

    async def _fetch(self, url: str, dest: Path) -> int:
        resolver = _CheckingResolver(self._resolve, self.allowlist.hosts)
        # No DNS cache and no proxy from the environment: each connection resolves through the
        # checking resolver, and goes where the check said.
        connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session:
            current = check_url(url, self.allowlist)
            for _ in range(self.max_redirects + 1):
                try:
                    async with session.get(current, allow_redirects=False, auto_decompress=False) as response:
                        if response.status in REDIRECT_STATUSES:
                            location = response.headers.get("Location")
                            if not location:
                                raise RemoteLogError("log_url redirected without a Location")
                            current = check_url(current.join(URL(location)), self.allowlist)
                            continue
                        if response.status != 200:
                            raise RemoteLogError(f"log_url answered HTTP {response.status}")
                        return await self._save(response, dest)
                except aiohttp.ClientError as exc:
                    raise RemoteLogError(f"log_url could not be fetched ({type(exc).__name__})") from exc
            raise RefusedURL(f"log_url redirected more than {self.max_redirects} times")

    async def _save(self, response: aiohttp.ClientResponse, dest: Path) -> int:
        declared = response.content_length
        if declared is not None and declared > self.max_bytes:
            raise RemoteLogTooLarge(_too_large(self.max_bytes))
        size = 0
        with dest.open("wb") as out:
            async for chunk in response.content.iter_chunked(CHUNK):
                size += len(chunk)
                if size > self.max_bytes:
                    raise RemoteLogTooLarge(_too_large(self.max_bytes))
                out.write(chunk)
        return size


class _CheckingResolver(AbstractResolver):
    """Resolve a host and refuse the connection if any of its addresses is refused."""

    def __init__(self, resolve: Resolve, allowlist: frozenset[str]) -> None:
        self._resolve = resolve
        self._allowlist = allowlist

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await self._resolve(host, port)
        if not addresses:
            raise RefusedURL(f"log_url host {host} did not resolve")
        results: list[ResolveResult] = []
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            # Every address is checked, not only the one used: a host with one safe and one
            # metadata address could otherwise be steered to the second.
            if why := address_refusal(ip, self._allowlist):
                raise RefusedURL(f"log_url host {host} refused: {why}")
            family_of = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
            results.append(
                {
                    "hostname": host,
                    "host": str(ip),
                    "port": port,
                    "family": family_of,
                    "proto": 0,
                    "flags": 0,
                }
            )
        return results

    async def close(self) -> None:
        return None


async def _system_resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RefusedURL(f"log_url host {host} did not resolve") from exc
    addresses: list[str] = []
    for info in infos:
        address: Any = info[4][0]
        if str(address) not in addresses:
            addresses.append(str(address))
    return addresses


def _literal_ip(host: str) -> IPAddress | None:
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host.strip("[]"))
    return None


def _too_large(limit: int) -> str:
    return f"log_url is larger than the limit of {limit} bytes"


def fetcher_from_settings(settings: Any) -> RemoteLogFetcher:
    """The fetcher the worker uses, with the operator's allow-list and limits."""
    return RemoteLogFetcher(
        settings.log_url_allowlist,
        max_bytes=settings.max_log_bytes,
        timeout_s=settings.job_timeout_s,
    )
