"""A redis-server of a test's own: started, killed and restarted at will, AOF on if asked.

Tests that stop Redis, or read its append-only file, cannot share the suite's ``REDIS_URL``.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.exceptions

from bot.jobs.connection import connect


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisProcess:
    """A redis-server in ``directory``, with the append-only file fsynced on every write."""

    def __init__(self, directory: Path, *, appendonly: bool = True) -> None:
        self.port = free_port()
        self.directory = directory
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else []
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "no", *aof, "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def aof_bytes(self) -> bytes:
        """Every byte of the append-only file(s) (Redis 7 keeps several in ``appendonlydir``)."""
        files = [p for p in self.directory.rglob("*") if p.is_file() and ".aof" in p.name]
        assert files, f"no append-only file under {self.directory}"
        return b"".join(p.read_bytes() for p in sorted(files))

    async def wait_ready(self, timeout_s: float = 20) -> None:
        """Return once the server answers (it takes a moment to start, or to load its AOF)."""
        deadline = time.monotonic() + timeout_s
        while not await self.ready():
            assert time.monotonic() < deadline, f"redis-server on port {self.port} did not start"
            await asyncio.sleep(0.05)

    async def ready(self) -> bool:
        try:
            client = await connect(self.url)
        except redis.exceptions.ConnectionError:
            return False
        await client.aclose()
        return True


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server with AOF on, in this test's temporary directory; killed afterwards."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RedisProcess(tmp_path)
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
