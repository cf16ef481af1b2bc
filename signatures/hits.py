"""Reading one text: scan chunks in C, then do per-line work only on the lines that matched.

Line numbers come from counting newlines with ``bytes.count``; context comes from the chunk
itself and from the tails of its neighbours (one chunk of look-ahead), so memory stays bounded
by a few chunks whatever the file's size.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import cast

from signatures.environment import read_fact
from signatures.library import Kind, Library, Matcher
from signatures.lines import LineFacts, rank_from_name, strip_ansi, unwrap
from signatures.progress import KEPT as PROGRESS_KEPT
from signatures.progress import progress_lines
from signatures.shapes import shape_holds
from signatures.structure import Sighting
from signatures.tracebacks import TracebackView, is_advice, read_traceback

_TEXT = re.compile(rb"\S")
ANSI_BYTES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\n]*\x07")
BEFORE_LINES = 60  # enough to walk a traceback back to its header
AFTER_LINES = 12
MAX_TEXT = 2000  # a longer line (a \r progress bar) keeps only the matching segment
CONTEXT_KEPT = 8  # hits per pattern per text that keep their context lines
LOCATE_PER_CHUNK = 2048  # lines one pattern may claim in one chunk
LOCATE_FACT = 8  # a fact needs one value: a few lines of a chunk are enough to find it
# Past its cap, a generic pattern (an error shape, an exception line) keeps being read in the last
# lines of each chunk, and its newest hits are kept: a log with a thousand handled ERROR records
# still shows the failure at its end.
TAILED = (Kind.SHAPE, Kind.EXCEPTION)
TAIL_PER_CHUNK = 16
TAIL_KEPT = 64


@dataclass
class Hit:
    """A verified match of one pattern on one line."""

    matcher: Matcher
    file_index: int
    file: str
    line: int
    text: str
    facts: LineFacts
    groups: dict[str, str]
    view: TracebackView
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def rank(self) -> int | None:
        """The global rank the line names (a fingerprint's group, a prefix or the message)."""
        value = self.groups.get("rank")
        return int(value) if value is not None and value.isdigit() else self.facts.rank

    @property
    def local_rank(self) -> int | None:
        """The launcher's per-node index of the process, when the line names one."""
        value = self.groups.get("local_rank")
        return int(value) if value is not None and value.isdigit() else self.facts.local_rank

    @property
    def host(self) -> str | None:
        return self.groups.get("host") or self.facts.host


@dataclass
class TextScan:
    """What one text held: its hits, size and environment facts."""

    name: str
    file_index: int
    name_rank: int | None = None  # the rank the file's name gives, when it gives one
    lines: int = 0
    bytes: int = 0
    hits: list[Hit] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)  # verified hits per pattern, past caps too
    facts: dict[str, str] = field(default_factory=dict)
    progress: list[tuple[int, str]] = field(default_factory=list)  # the newest progress lines kept
    has_text: bool = False  # any character but white space
    sightings: list[Sighting] = field(default_factory=list)  # lines that tell who is who
    # Generic hits past a pattern's cap: the newest are kept, since a run fails at its end.
    tail: dict[int, deque[Hit]] = field(default_factory=dict)

    def renumber(self, file_index: int) -> None:
        """Give this text its place among all texts of a diagnosis."""
        self.file_index = file_index
        for hit in self.hits:
            hit.file_index = file_index
        self.sightings = [replace(s, file_index=file_index) for s in self.sightings]

    def detach(self) -> None:
        """Replace matchers by their ids, so the scan pickles small across processes."""
        for hit in self.hits:
            hit.matcher = cast(Matcher, hit.matcher.pid)

    def attach(self, library: Library) -> None:
        for hit in self.hits:
            hit.matcher = library.matchers[cast(int, hit.matcher)]


def read_text(
    library: Library,
    name: str,
    file_index: int,
    chunks: Iterator[bytes],
    *,
    prev_tail: list[bytes] | None = None,
    following: bytes = b"",
    seen: TextScan | None = None,
) -> TextScan:
    """Scan one text's chunks and return its verified hits.

    ``prev_tail`` holds the lines just before the first chunk when the text is a range of a file;
    ``following``, the lines just after the last chunk (context only, not scanned), when more of
    the text is known but read later (a log followed while it grows). ``seen`` is what the text's
    earlier pieces held: its counts (so patterns past their cap stay past it) and facts carry on.
    """
    result = TextScan(name=name, file_index=file_index, name_rank=rank_from_name(name))
    if seen is not None:
        result.counts = dict(seen.counts)
    scanner = library.scanner
    matchers = library.matchers
    kept_context: dict[int, int] = {}
    done_facts: set[str] = set(seen.facts) if seen is not None else set()
    prev_tail = list(prev_tail or [])
    base = 0  # lines before the current chunk

    window = _lookahead(chunks, following)
    for raw_chunk, next_chunk in window:
        result.bytes += len(raw_chunk)
        # Colour codes can sit inside a message (coloured tracebacks); they never hold a newline,
        # so removing them keeps every line number.
        chunk = ANSI_BYTES.sub(b"", raw_chunk) if b"\x1b" in raw_chunk else raw_chunk
        ids = scanner.scan(chunk)
        if ids:
            by_line: dict[int, list[Matcher]] = {}
            for pid in sorted(ids):  # pattern order, whatever the backend: the first fact wins
                matcher = matchers[pid]
                past_cap = result.counts.get(pid, 0) >= matcher.cap
                if past_cap and matcher.kind not in TAILED:
                    continue
                if matcher.kind is Kind.FACT and matcher.fact and matcher.fact.key in done_facts:
                    continue
                limit = LOCATE_FACT if matcher.kind is Kind.FACT else LOCATE_PER_CHUNK
                starts = _located(matcher, chunk, limit)
                for start in starts[-TAIL_PER_CHUNK:] if past_cap else starts:
                    entries = by_line.setdefault(start, [])
                    if matcher not in entries:
                        entries.append(matcher)
            counted_to, line_no = 0, base
            for start in sorted(by_line):
                line_no += chunk.count(b"\n", counted_to, start)
                counted_to = start
                _record_line(
                    result,
                    library,
                    chunk,
                    start,
                    line_no + 1,
                    by_line[start],
                    prev_tail,
                    next_chunk,
                    kept_context,
                    done_facts,
                )
        result.has_text = result.has_text or _TEXT.search(chunk) is not None
        newlines = chunk.count(b"\n")
        base += newlines
        result.progress.extend(progress_lines(chunk, base))
        del result.progress[:-PROGRESS_KEPT]
        prev_tail = _tail_lines(chunk, BEFORE_LINES)
    result.lines = base
    for tail in result.tail.values():
        result.hits.extend(tail)
    result.tail.clear()
    return result


def _located(matcher: Matcher, chunk: bytes, limit: int) -> list[int]:
    """Starts of the lines of ``chunk`` that may match ``matcher`` (at most ``limit``, in order).

    A pattern on every line of a chunk stops at ``limit``: later chunks still get their turn.
    """
    if not matcher.needles:
        starts: list[int] = []
        for m in matcher.locate.finditer(chunk):
            if len(starts) >= limit:
                break
            starts.append(chunk.rfind(b"\n", 0, m.start()) + 1)
        return starts
    # The literals find the lines; the scan pattern, run on each of them alone, keeps the real ones.
    found: set[int] = set()
    for needle in matcher.needles:
        pos = chunk.find(needle)
        while pos >= 0 and len(found) < limit:
            start = chunk.rfind(b"\n", 0, pos) + 1
            end = chunk.find(b"\n", pos)
            stop = end if end >= 0 else len(chunk)
            if start not in found and matcher.locate.search(chunk, start, stop):
                found.add(start)
            pos = chunk.find(needle, stop) if end >= 0 else -1
    return sorted(found)


def _lookahead(chunks: Iterator[bytes], last: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
    current = next(chunks, None)
    while current is not None:
        following = next(chunks, None)
        yield current, following or last
        current = following


def _record_line(
    result: TextScan,
    library: Library,
    chunk: bytes,
    start: int,
    line_no: int,
    candidates: list[Matcher],
    prev_tail: list[bytes],
    next_chunk: bytes,
    kept_context: dict[int, int],
    done_facts: set[str],
) -> None:
    end = chunk.find(b"\n", start)
    raw = chunk[start : end if end >= 0 else len(chunk)].decode("utf-8", "replace").rstrip("\r")
    segments = [s for s in raw.split("\r") if s.strip()] or [raw]
    before_lines: list[str] | None = None
    unwrapped = [unwrap(segment) for segment in reversed(segments)]  # once per line, not per pattern
    for matcher in candidates:
        for segment, facts in zip(reversed(segments), unwrapped, strict=True):
            m = matcher.verify.search(facts.message)
            if matcher.shape is not None:
                if not shape_holds(
                    matcher.shape, segment, facts, m is not None, lambda: _lines_after(chunk, end, next_chunk)
                ):
                    continue
            elif m is None:
                continue
            if any(x.search(facts.message) for x in matcher.excludes):
                break
            if matcher.kind is Kind.FACT:
                assert matcher.fact is not None
                value = read_fact(matcher.fact, facts.message)
                if value and matcher.fact.key not in result.facts:
                    result.facts[matcher.fact.key] = value
                    done_facts.add(matcher.fact.key)
                break
            if is_advice(facts.message):
                break
            if before_lines is None:
                before_lines = _lines_before(chunk, start, prev_tail)
            if matcher.structure is not None:
                sighting = matcher.structure.read(
                    result.file_index,
                    line_no,
                    facts,
                    before_lines,
                    lambda: _lines_after(chunk, end, next_chunk),
                )
                if sighting is not None:
                    result.sightings.append(sighting)
                    result.counts[matcher.pid] = result.counts.get(matcher.pid, 0) + 1
                break
            view = read_traceback(facts.message, before_lines)
            if view.echo or view.frame:
                break
            result.counts[matcher.pid] = result.counts.get(matcher.pid, 0) + 1
            keep_context = (
                kept_context.get(matcher.pid, 0) < CONTEXT_KEPT or matcher.kind is not Kind.SIGNATURE
            )
            # Only hits that may be shown keep long text; the rest are counted and grouped.
            limit = MAX_TEXT if keep_context else 300
            text = raw if len(raw) <= limit else segment[:limit]
            hit = Hit(
                matcher=matcher,
                file_index=result.file_index,
                file=result.name,
                line=line_no,
                text=text,
                facts=facts,
                groups={k: v for k, v in m.groupdict().items() if v is not None} if m else {},
                view=view,
            )
            if keep_context:
                kept_context[matcher.pid] = kept_context.get(matcher.pid, 0) + 1
                hit.before = tuple(_short(x) for x in before_lines[-AFTER_LINES:])
                hit.after = tuple(_short(x) for x in _lines_after(chunk, end, next_chunk))
                if view.assert_offset is not None:
                    hit.before = tuple(
                        _short(x) for x in before_lines[-max(AFTER_LINES, view.assert_offset) :]
                    )
            if matcher.kind in TAILED and result.counts[matcher.pid] > matcher.cap:
                result.tail.setdefault(matcher.pid, deque(maxlen=TAIL_KEPT)).append(hit)
            else:
                result.hits.append(hit)
            break


def _short(line: str) -> str:
    return line if len(line) <= 500 else line[:500] + " …"


def _lines_before(chunk: bytes, start: int, prev_tail: list[bytes]) -> list[str]:
    """Up to BEFORE_LINES raw lines above ``start``, oldest first, crossing into the previous chunk."""
    out: list[bytes] = []
    pos = start - 1  # the newline ending the previous line
    while len(out) < BEFORE_LINES and pos > 0:
        begin = chunk.rfind(b"\n", 0, pos) + 1
        out.append(chunk[begin:pos])
        pos = begin - 1
    if pos == 0 and len(out) < BEFORE_LINES:
        out.append(b"")  # the chunk started with an empty line
    if len(out) < BEFORE_LINES and pos < 0:
        out.extend(reversed(prev_tail[-(BEFORE_LINES - len(out)) :]))
    out.reverse()
    return [x.decode("utf-8", "replace").rstrip("\r") for x in out]


def _lines_after(chunk: bytes, end: int, next_chunk: bytes) -> list[str]:
    out: list[bytes] = []
    pos = end + 1 if end >= 0 else len(chunk)
    source = chunk
    while len(out) < AFTER_LINES:
        if pos >= len(source):
            if source is next_chunk or not next_chunk:
                break
            source, pos = next_chunk, 0
            continue
        stop = source.find(b"\n", pos)
        if stop < 0:
            stop = len(source)
        out.append(source[pos:stop])
        pos = stop + 1
    return [strip_ansi(x.decode("utf-8", "replace")).rstrip("\r") for x in out]


def _tail_lines(chunk: bytes, n: int) -> list[bytes]:
    lines: list[bytes] = []
    pos = len(chunk) - 1 if chunk.endswith(b"\n") else len(chunk)
    while len(lines) < n and pos > 0:
        begin = chunk.rfind(b"\n", 0, pos) + 1
        lines.append(chunk[begin:pos])
        pos = begin - 1
    lines.reverse()
    return lines
