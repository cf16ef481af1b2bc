"""One watch: follow the logs, keep the incident's answer current, report when it changes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.watch.answer import Tracker
from bot.watch.follow import Follower
from bot.watch.metrics import WatchMetrics
from bot.watch.process import Command
from bot.watch.report import Sink
from signatures import Diagnosis
from signatures.incremental import Incident
from signatures.library import Library

POLL_S = 0.25  # between looks at the files when nothing new was there
QUIET_S = 1.0  # a log silent this long has its held-back last lines scanned
ASSEMBLE_S = 0.5  # the diagnosis is assembled at most this often while lines keep coming ...
ASSEMBLE_SHARE = 5  # ... and never sooner than 5 times its last cost: reading keeps 80% of the time
DRAIN_POLLS = 1000  # at the end, reads of what is left (at most this many MB per file)


@dataclass
class Session:
    """The loop of ``denpex watch``; ``step`` once per poll, ``finish`` when the process ended."""

    library: Library
    follower: Follower
    tracker: Tracker
    sinks: Sequence[Sink]
    metrics: WatchMetrics | None = None
    command: Command | None = None
    clock: Callable[[], float] = time.monotonic
    incident: Incident = field(init=False)
    latest: Diagnosis | None = None

    def __post_init__(self) -> None:
        self.incident = Incident(self.library)
        self._fed: dict[str, float] = {}  # when each log last gained bytes
        self._next_assembly = float("-inf")

    def step(self) -> bool:
        """Read what is new, update the answer, report if due; whether anything was read."""
        now = self.clock()
        read = self._read(now)
        for name, fed in self._fed.items():
            text = self.incident.texts[name]
            if now - fed >= QUIET_S and text.pending_bytes:
                text.flush()
        if self.incident.changed and now >= self._next_assembly:
            self._assemble(now)
        event = self.tracker.due(now)
        if event is not None and self.latest is not None:
            self._report(event, self.latest, None)
        return read

    def run(self, stop: Callable[[], bool]) -> None:
        """Step until ``stop()`` says the watched process is gone (or the watch was told to stop)."""
        while not stop():
            if not self.step():
                time.sleep(POLL_S)

    def finish(self, exit_code: int | None) -> Diagnosis:
        """Read what is left, complete every last line, and make the final report."""
        for _ in range(DRAIN_POLLS):
            if not self._read(self.clock()):
                break
        self.incident.close()
        self._assemble(self.clock())
        assert self.latest is not None
        self._report(self.tracker.final_event(self.latest), self.latest, exit_code)
        self.follower.close()
        for sink in self.sinks:
            sink.close()
        return self.latest

    def _read(self, now: float) -> bool:
        read = 0
        for piece in self.follower.poll():
            text = self.incident.text(piece.name)
            if piece.restarted:
                text.close()  # the old file's last line is as complete as it will get
            text.feed(piece.data)
            self._fed[piece.name] = now
            read += len(piece.data)
        if self.command is not None:
            for data in self.command.take():
                self.incident.text(self.command.name).feed(data)
                self._fed[self.command.name] = now
                read += len(data)
        if self.metrics is not None:
            self.metrics.bytes.inc(read)
            self.metrics.files.set(len(self.incident.texts))
        return read > 0

    def _assemble(self, now: float) -> None:
        self.latest = self.incident.diagnosis()
        cost = self.clock() - now
        self._next_assembly = now + max(ASSEMBLE_S, ASSEMBLE_SHARE * cost)
        self.tracker.see(self.latest, now)
        if self.metrics is not None:
            self.metrics.count((t.scan for t in self.incident.texts.values()), self.library)
            self.metrics.set_status(self.latest.status.value)

    def _report(self, event: str, d: Diagnosis, exit_code: int | None) -> None:
        for sink in self.sinks:
            sink.report(event, d, exit_code)
        if self.metrics is not None:
            self.metrics.reports.labels(event).inc()
