"""The engine over logs that are still growing: scan each new byte once, keep hits, not text.

A followed log is fed in pieces as it is written. Each run of complete lines is scanned by the
same ``read_text`` as a whole file, with the lines just before it (for tracebacks) and a few lines
after it (for context) carried across pieces. What it found is merged into one ``TextScan`` per
log, within the engine's allowances (a pattern's cap, the newest generic hits, the newest
progress lines), so memory stays flat however long the run. The diagnosis is assembled again
from those hits (cheap) whenever they change, never from the text.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

from signatures.diagnosis import Diagnosis
from signatures.hits import (
    AFTER_LINES,
    ANSI_BYTES,
    BEFORE_LINES,
    CONTEXT_KEPT,
    TAIL_KEPT,
    TAILED,
    Hit,
    TextScan,
    read_text,
)
from signatures.lastlines import keep_last_lines
from signatures.lastwords import states_failure
from signatures.library import CAP_STRUCTURE, Kind, Library
from signatures.lines import rank_from_name
from signatures.progress import KEPT as PROGRESS_KEPT

MAX_LINE = 1 << 20  # a "line" this long without a newline is scanned as it is (a binary blob)
SHORT_TEXT = 300  # a hit past its pattern's context allowance keeps this much of its line


class GrowingText:
    """One log followed as it grows: fed bytes, it keeps what the engine found in them.

    The last AFTER_LINES complete lines are held back until more arrive (they are the look-ahead
    of the lines before them) or until ``flush``; a partial last line waits for its newline.
    """

    def __init__(self, library: Library, name: str, file_index: int) -> None:
        self.library = library
        self.scan = TextScan(name=name, file_index=file_index, name_rank=rank_from_name(name))
        self.changed = False  # something the diagnosis reads was added since the last snapshot
        self._pending = bytearray()  # bytes not yet scanned: held lines, then a partial line
        self._before: list[bytes] = []  # the last scanned lines, the context of the next piece
        self._kept: dict[int, int] = {}  # hits kept per pattern
        self._seen: dict[int, int] = {}  # signature hits per pattern, for the context allowance
        self._tail: dict[int, deque[Hit]] = {}  # the newest generic hits past their cap

    @property
    def pending_bytes(self) -> int:
        """Bytes fed but not scanned yet (held lines and a partial line)."""
        return len(self._pending)

    def feed(self, data: bytes) -> None:
        """Add bytes at the end of the log; scan the complete lines that now have a look-ahead."""
        self._pending += data
        end = self._pending.rfind(b"\n") + 1
        if end == 0:
            if len(self._pending) > MAX_LINE:
                self._scan_upto(len(self._pending))
            return
        # Hold back the last AFTER_LINES lines: the context after the lines before them.
        cut = end
        for _ in range(AFTER_LINES):
            cut = self._pending.rfind(b"\n", 0, cut - 1) + 1
            if cut == 0:
                return  # not more than the held lines yet
        self._scan_upto(cut, following=bytes(self._pending[cut:end]))

    def flush(self) -> None:
        """Scan every complete line now (the log went quiet: nothing may follow for a while)."""
        end = self._pending.rfind(b"\n") + 1
        if end:
            self._scan_upto(end)

    def close(self) -> None:
        """Scan everything fed, a last line without its newline too (the writer is gone)."""
        if self._pending:
            self._scan_upto(len(self._pending))

    def snapshot(self) -> TextScan:
        """What was found so far, as the scan of a whole text (its own lists: safe to assemble)."""
        self.changed = False
        tails = [hit for kept in self._tail.values() for hit in kept]
        return replace(
            self.scan,
            hits=[*self.scan.hits, *tails],
            counts=dict(self.scan.counts),
            facts=dict(self.scan.facts),
            progress=list(self.scan.progress),
            sightings=list(self.scan.sightings),
            tail={},
        )

    def _scan_upto(self, end: int, following: bytes = b"") -> None:
        block = bytes(self._pending[:end])
        del self._pending[:end]
        name, index = self.scan.name, self.scan.file_index
        part = read_text(
            self.library,
            name,
            index,
            iter([block]),
            prev_tail=self._before,
            following=following,
            seen=self.scan,
        )
        self._merge(part)
        lines = block.rstrip(b"\n").rsplit(b"\n", BEFORE_LINES)[-BEFORE_LINES:]
        if any(b"\x1b" in x for x in lines):
            lines = [ANSI_BYTES.sub(b"", x) for x in lines]
        self._before = (self._before + lines)[-BEFORE_LINES:]

    def _merge(self, part: TextScan) -> None:
        scan, offset = self.scan, self.scan.lines
        for hit in part.hits:
            self._keep(hit, offset)
        scan.counts = part.counts  # it began from ours: the totals so far
        for key, value in part.facts.items():
            if key not in scan.facts:
                scan.facts[key] = value
                self.changed = True
        if part.progress:
            scan.progress.extend((n + offset, text) for n, text in part.progress)
            del scan.progress[:-PROGRESS_KEPT]
            self.changed = True
        if part.last_lines:
            scan.last_lines = keep_last_lines(scan.last_lines, [(n + offset, x) for n, x in part.last_lines])
            self.changed = self.changed or any(states_failure(x) for _, x in part.last_lines)
        room = CAP_STRUCTURE - len(scan.sightings)  # the first sightings name who is who
        if room > 0 and part.sightings:
            scan.sightings.extend(replace(s, line=s.line + offset) for s in part.sightings[:room])
            self.changed = True
        if part.has_text and not scan.has_text:
            scan.has_text = self.changed = True
        scan.lines += part.lines
        scan.bytes += part.bytes

    def _keep(self, hit: Hit, offset: int) -> None:
        hit.line += offset
        matcher = hit.matcher
        pid = matcher.pid
        if matcher.kind is Kind.SIGNATURE:
            # As in one read: only the first CONTEXT_KEPT hits of a signature keep context.
            self._seen[pid] = self._seen.get(pid, 0) + 1
            if self._seen[pid] > CONTEXT_KEPT:
                hit.before, hit.after, hit.text = (), (), hit.text[:SHORT_TEXT]
        if self._kept.get(pid, 0) < matcher.cap:
            self._kept[pid] = self._kept.get(pid, 0) + 1
            self.scan.hits.append(hit)
        elif matcher.kind in TAILED:
            self._tail.setdefault(pid, deque(maxlen=TAIL_KEPT)).append(hit)
        else:
            return  # past its allowance: counted, not kept
        self.changed = True


@dataclass
class Incident:
    """Every log of one job, followed together: one diagnosis across them, as ``diagnose()``."""

    library: Library

    def __post_init__(self) -> None:
        self.texts: dict[str, GrowingText] = {}

    def text(self, name: str) -> GrowingText:
        """The followed log called ``name``, added (as the next file) on first use."""
        if name not in self.texts:
            self.texts[name] = GrowingText(self.library, name, len(self.texts))
        return self.texts[name]

    @property
    def changed(self) -> bool:
        """Whether a log gained something the diagnosis reads since the last ``diagnosis()``."""
        return any(t.changed for t in self.texts.values())

    def diagnosis(self) -> Diagnosis:
        """The diagnosis of everything read so far, assembled from the kept hits."""
        from signatures.engine import assemble

        return assemble([t.snapshot() for t in self.texts.values()], self.library)

    def close(self, names: Iterable[str] | None = None) -> None:
        """Scan what is left of ``names`` (default: every log), partial last lines too."""
        for name in self.texts if names is None else names:
            self.texts[name].close()
