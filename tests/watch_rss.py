"""Memory of a running `denpex watch` while a writer appends a long log: for the test and the bench.

The watch runs as the real CLI with ``--metrics-port``; how far it has read comes from its own
``denpex_watch_read_bytes_total``, its memory from ``/proc/<pid>/status`` (VmRSS).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("--metrics-port", "0", "--metrics-addr", "127.0.0.1")  # any free port, said on stderr
READ = re.compile(r"^denpex_watch_read_bytes_total (\S+)$", re.MULTILINE)


@dataclass
class Measurement:
    """RSS samples (bytes read, RSS in bytes) and what the watch said at its end."""

    samples: list[tuple[int, int]] = field(default_factory=list)
    metrics: str = ""
    final: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def growth_after(self, warm: int) -> int:
        """RSS growth from the first sample past ``warm`` bytes read to the largest after it."""
        after = [rss for read, rss in self.samples if read >= warm]
        return max(after) - after[0]


def rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def read_bytes(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    m = READ.search(text)
    return (int(float(m.group(1))) if m else 0), text


def follow_and_measure(folder: Path, megabytes: int, timeout: float = 600.0) -> Measurement:
    """Watch a log while ``megabytes`` MB are appended to it; sample the watch's RSS meanwhile."""
    log = folder / "train.log"
    log.touch()
    watch = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "watch", str(log), "--json", "--settle", "0", *METRICS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert watch.stderr is not None
        first = watch.stderr.readline().decode()
        url = re.search(r"http://\S+/metrics", first).group(0)  # type: ignore[union-attr]
        start = time.monotonic()
        writer = subprocess.Popen(
            [sys.executable, "-m", "tests.watch_writer", str(log), "--generate", str(megabytes)], cwd=ROOT
        )
        m = Measurement()
        total = megabytes << 20
        while True:
            read, m.metrics = read_bytes(url)
            m.samples.append((read, rss(watch.pid)))
            if read >= total and writer.poll() is not None:
                break
            assert time.monotonic() - start < timeout, f"read {read} of {total} bytes in {timeout} s"
            time.sleep(0.1)
        m.seconds = time.monotonic() - start
        watch.send_signal(signal.SIGTERM)
        out, _ = watch.communicate(timeout=60)
        m.final = json.loads(out.decode().splitlines()[-1])
        return m
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
