"""Prometheus counters of a watch, per signature and role, for a team's own alert rules.

Labels are bounded sets: signature ids come from the library, roles and events are fixed words.
A separate registry: a watch beside a training job exposes its own metrics, not the server's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from signatures.hits import TextScan
from signatures.library import Library

STATUSES = ("failure", "unrecognized", "degraded", "clean", "empty")


@dataclass
class WatchMetrics:
    """The counters, and what was counted already (the engine keeps totals; these follow them)."""

    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        self.hits = Counter(
            "denpex_watch_signature_hits",
            "Log lines matching a signature, by signature id and role (initiating, downstream, benign).",
            ["signature", "role"],
            registry=r,
        )
        self.reports = Counter("denpex_watch_reports", "Reports made, by event.", ["event"], registry=r)
        self.bytes = Counter("denpex_watch_read_bytes", "Log bytes read.", registry=r)
        self.files = Gauge("denpex_watch_files", "Log files followed.", registry=r)
        self.status = Gauge(
            "denpex_watch_status",
            "1 for the current status of the incident's answer, 0 for the others.",
            ["status"],
            registry=r,
        )
        self._counted: dict[tuple[int, int], int] = {}  # (file index, pattern id) -> hits counted

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve ``GET /metrics`` from a thread; the port it listens on (``port`` 0: any free one)."""
        server, _ = start_http_server(port, addr, registry=self.registry)
        return int(server.server_port)

    def count(self, scans: Iterable[TextScan], library: Library) -> None:
        """Add the signature hits found since the last call."""
        for scan in scans:
            for pid, total in scan.counts.items():
                sig = library.matchers[pid].signature
                before = self._counted.get((scan.file_index, pid), 0)
                if sig is None or total <= before:
                    continue
                self._counted[(scan.file_index, pid)] = total
                self.hits.labels(sig.id, sig.role.value).inc(total - before)

    def set_status(self, status: str) -> None:
        """Mark ``status`` as the current one."""
        for name in STATUSES:
            self.status.labels(name).set(1 if name == status else 0)
