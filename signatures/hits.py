"""Reading one text: scan chunks in C, then do per-line work only on the lines that matched.

Line numbers come from counting newlines (signatures/newlines.py: ``bytes.count``, or numpy on
large inputs); context comes from the chunk itself and from the tails of its neighbours (one
chunk of look-ahead), so memory stays bounded by a few chunks whatever the file's size.

A pattern may claim a number of *accepted* lines per chunk: lines the scanner flags and the
verifier rejects cost time, never a missed line further on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from signatures import newlines
from signatures.demote import DEMOTE_AFTER, BulkLines, LineStarts, bulk_lines, bulk_locate, needle_lines
from signatures.evidence import AFTER_LINES, BEFORE_LINES, CONTEXT_KEPT, MAX_TEXT, TAIL_KEPT, TAILED, Reader
from signatures.lastlines import keep_last
from signatures.library import Kind, Library, Matcher
from signatures.lines import rank_from_name
from signatures.progress import KEPT as PROGRESS_KEPT
from signatures.progress import progress_lines
from signatures.scan import first_ends
from signatures.textscan import Hit, TextScan

__all__ = [
    "AFTER_LINES",
    "BEFORE_LINES",
    "CONTEXT_KEPT",
    "MAX_TEXT",
    "TAIL_KEPT",
    "Hit",
    "TextScan",
    "read_text",
]

_TEXT = re.compile(rb"\S")
ANSI_BYTES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\n]*\x07")
LOCATE_PER_CHUNK = 2048  # accepted lines one pattern may claim in one chunk
LOCATE_FACT = 8  # a fact needs one value: a few lines of a chunk are enough to find it
HOT_LINES = 4096  # lines of one chunk a pattern flags before the next chunk locates it with Hyperscan
SWITCH_LINES = 1024  # lines a pattern flags in one chunk before the rest of it is located with Hyperscan
LONG_LINE = 64 << 10  # a line this long is searched by Hyperscan, not by Python's re (100x slower on it)
TAIL_PER_CHUNK = 16  # past its cap, a generic pattern keeps the last accepted lines of a chunk
PROGRESS_WINDOW = (64 << 10) + 1  # past progress.WHOLE: only the last lines are read


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
    reader = Reader(result, library)
    if seen is not None:
        result.counts = dict(seen.counts)
        reader.done_facts = set(seen.facts)
    prev_tail = list(prev_tail or [])
    base = 0  # lines before the current chunk
    open_line: set[int] = set()  # patterns already hit on a line the last chunk cut short
    ends: list[tuple[bytes, int]] = []  # the last chunks read, with the line each ends
    for raw_chunk, next_chunk in _lookahead(chunks, following):
        result.bytes += len(raw_chunk) - getattr(raw_chunk, "overlap", 0)
        # Colour codes can sit inside a message (coloured tracebacks); they never hold a newline,
        # so removing them keeps every line number.
        chunk = ANSI_BYTES.sub(b"", raw_chunk) if b"\x1b" in raw_chunk else raw_chunk
        ids = first_ends(library.scanner, chunk)
        counted_to, lines_to = 0, 0  # how far newlines were counted in this chunk, and how many
        cut_hits: set[int] = set()
        newline_counter = newlines.Counter(chunk)
        if ids:
            cut_hits, counted_to, lines_to = _read_chunk(
                reader, chunk, ids, base, prev_tail, next_chunk, open_line, newline_counter
            )
        open_line = cut_hits
        result.has_text = result.has_text or _TEXT.search(chunk) is not None
        base += lines_to + newline_counter.count(counted_to)  # each byte counted once
        result.progress.extend(progress_lines(_last_part(chunk), base))
        del result.progress[:-PROGRESS_KEPT]
        ends.append((chunk, base))
        del ends[:-2]  # the last two chunks hold a text's last lines, however short the last one
        prev_tail = _tail_lines(chunk, BEFORE_LINES)
    result.lines = base
    for chunk, through in ends:
        result.last_lines = keep_last(result.last_lines, chunk, through)
    for tail in result.tail.values():
        result.hits.extend(sorted(tail, key=lambda h: h.line))
    result.tail.clear()
    return result


def _read_chunk(
    reader: Reader,
    chunk: bytes,
    ids: dict[int, int],
    base: int,
    prev_tail: list[bytes],
    next_chunk: bytes,
    open_line: set[int],
    newline_counter: newlines.Counter,
) -> tuple[set[int], int, int]:
    """Verify the lines the scan flagged in ``chunk``.

    Returns the patterns hit on its last line when the chunk cuts it, and how far newlines were
    counted: (offset, newlines before it).
    """
    result, matchers = reader.result, reader.library.matchers
    by_line: dict[int, list[Matcher]] = {}
    tails: list[tuple[Matcher, list[int]]] = []
    for pid in sorted(ids):  # pattern order, whatever the backend: the first fact wins
        matcher = matchers[pid]
        if matcher.kind is Kind.FACT and matcher.fact and matcher.fact.key in reader.done_facts:
            continue
        past_cap = result.counts.get(pid, 0) >= matcher.cap
        if past_cap and matcher.kind not in TAILED:
            continue
        # Lines before the first match cannot match: locating starts at the first match's line.
        first = chunk.rfind(b"\n", 0, ids[pid]) + 1
        starts = _demoted(reader, matcher, chunk, first)
        if starts is None:
            starts = _located(matcher, chunk, first, reader.hot)
            if len(starts) > DEMOTE_AFTER:  # as many lines as demotion takes: filter them in bulk now
                starts = _bulk_filtered(reader, matcher, chunk, first, starts)
        if past_cap:
            tails.append((matcher, starts))
            continue
        for start in starts:
            by_line.setdefault(start, []).append(matcher)
    if open_line and 0 in by_line:  # the rest of a line the last chunk held the start of
        by_line[0] = [m for m in by_line[0] if m.pid not in open_line]
    claimed: dict[int, int] = {}
    last_start = -1 if chunk.endswith(b"\n") else chunk.rfind(b"\n") + 1
    hit_last: set[int] = set(open_line) if last_start == 0 else set()
    counted_to, line_no = 0, base
    for start in sorted(by_line):
        live = [m for m in by_line[start] if claimed.get(m.pid, 0) < _allowance(m)]
        if not live:
            continue
        line_no += newline_counter.count(counted_to, start)
        counted_to = start
        for pid in reader.line(chunk, start, line_no + 1, live, prev_tail, next_chunk):
            claimed[pid] = claimed.get(pid, 0) + 1
            if start == last_start:
                hit_last.add(pid)
    for matcher, starts in tails:
        _read_tail(reader, chunk, matcher, starts, base, prev_tail, next_chunk, newline_counter)
    return hit_last, counted_to, line_no - base


def _allowance(matcher: Matcher) -> int:
    return LOCATE_FACT if matcher.kind is Kind.FACT else LOCATE_PER_CHUNK


def _read_tail(
    reader: Reader,
    chunk: bytes,
    matcher: Matcher,
    starts: list[int],
    base: int,
    prev_tail: list[bytes],
    next_chunk: bytes,
    newline_counter: newlines.Counter,
) -> None:
    """Past its cap, a generic pattern's last accepted lines of the chunk, walking back from the end."""
    accepted = 0
    for start in reversed(starts):
        if accepted >= TAIL_PER_CHUNK:
            break
        line_no = base + newline_counter.count(0, start) + 1
        accepted += len(reader.line(chunk, start, line_no, [matcher], prev_tail, next_chunk))


def _demoted(reader: Reader, matcher: Matcher, chunk: bytes, first: int) -> list[int] | None:
    """A much-rejected pattern's candidate lines, found in bulk (signatures/demote.py); None: not so."""
    if reader.rejections.get(matcher.pid, 0) < DEMOTE_AFTER:
        return None
    bulk = _bulk(matcher, chunk)
    if bulk is None:
        return None
    locate = matcher.locate
    return [s for s in bulk.starts(chunk, first) if locate.search(chunk, s, _line_end(chunk, s))]


def _bulk_filtered(
    reader: Reader, matcher: Matcher, chunk: bytes, first: int, starts: list[int]
) -> list[int]:
    """``starts`` less the lines the bulk form rules out (all of them, when it cannot be used)."""
    bulk = _bulk(matcher, chunk)
    if bulk is None:
        return starts
    possible = set(bulk.starts(chunk, first))
    kept = [s for s in starts if s in possible]
    # Lines ruled out are rejections too: the next chunk goes to the bulk form directly.
    reader.rejections[matcher.pid] = reader.rejections.get(matcher.pid, 0) + len(starts) - len(kept)
    return kept


def _bulk(matcher: Matcher, chunk: bytes) -> LineStarts | None:
    if matcher.shape or matcher.structure or not chunk.isascii() or b"\r" in chunk:
        return None
    return bulk_lines(matcher.verify.pattern, bool(matcher.verify.flags & re.IGNORECASE))


def _line_end(chunk: bytes, start: int) -> int:
    end = chunk.find(b"\n", start)
    return end if end >= 0 else len(chunk)


def _located(matcher: Matcher, chunk: bytes, first: int = 0, hot: dict[int, int] | None = None) -> list[int]:
    """Starts of the lines of ``chunk`` from offset ``first`` that may match ``matcher``, in order.

    A pattern that cost many Python steps in the last chunk (``hot``: steps per pattern), that
    reaches SWITCH_LINES steps in this one, or whose literal sits on a line of MBs (progress output
    without newlines), is located by Hyperscan: one pass in C instead of a step per line.
    """
    hot = {} if hot is None else hot
    if hot.get(matcher.pid, 0) > HOT_LINES:
        bulk = _bulk_locator(matcher)
        if bulk is not None:
            return bulk.starts(chunk, first)
    steps = 0
    if not matcher.needles:
        starts: list[int] = []
        last = -1
        for m in matcher.locate.finditer(chunk, first):
            start = chunk.rfind(b"\n", 0, m.start()) + 1
            steps += 1
            if steps == SWITCH_LINES and (bulk := _bulk_locator(matcher)) is not None:
                hot[matcher.pid] = HOT_LINES + 1
                return bulk.starts(chunk, first)
            if start != last:
                starts.append(start)
                last = start
        hot[matcher.pid] = steps
        return starts
    # The literals find the lines; the scan pattern, run on each of them alone, keeps the real ones.
    found: set[int] = set()
    for lines in _needle_lines(matcher, chunk, first):
        for start in lines:
            end = chunk.find(b"\n", start)
            stop = end if end >= 0 else len(chunk)
            steps += 1
            switch = steps == SWITCH_LINES or stop - start > LONG_LINE  # many lines, or one of MBs
            if switch and (bulk := _bulk_locator(matcher)) is not None:
                hot[matcher.pid] = HOT_LINES + 1 if steps == SWITCH_LINES else steps
                return bulk.starts(chunk, first)
            if start not in found and matcher.locate.search(chunk, start, stop):
                found.add(start)
    hot[matcher.pid] = steps
    return sorted(found)


def _needle_lines(matcher: Matcher, chunk: bytes, first: int) -> Iterator[Iterable[int]]:
    """Per literal of ``matcher``, in order, the starts of the lines from ``first`` that hold it.

    Several literals are found in one Hyperscan pass; one, or without Hyperscan, by ``bytes.find``
    (a pass per literal, lazily: a switch to the bulk form stops the finding).
    """
    finder = needle_lines(matcher.needles) if len(matcher.needles) > 1 else None
    if finder is not None:
        # Past SWITCH_LINES (literal, line) pairs _located switches to the bulk form: no more are
        # looked for, unless there is no bulk form to switch to.
        found = finder.starts(chunk, first, SWITCH_LINES)
        if sum(map(len, found)) >= SWITCH_LINES and _bulk_locator(matcher) is None:
            found = finder.starts(chunk, first)
        yield from found
        return
    for needle in matcher.needles:
        yield _find_lines(chunk, needle, first)


def _find_lines(chunk: bytes, needle: bytes, first: int) -> Iterator[int]:
    pos = chunk.find(needle, first)
    while pos >= 0:
        yield chunk.rfind(b"\n", 0, pos) + 1
        end = chunk.find(b"\n", pos)
        pos = chunk.find(needle, end) if end >= 0 else -1


def _bulk_locator(matcher: Matcher) -> BulkLines | None:
    return bulk_locate(matcher.locate.pattern, bool(matcher.locate.flags & re.IGNORECASE))


def _last_part(chunk: bytes) -> bytes:
    """``chunk``, or of a chunk ending in a very long line, that line's last 64 KB (progress is read
    from a chunk's last lines: a 4 MB run of progress bars need not be searched whole)."""
    if len(chunk) > PROGRESS_WINDOW and chunk.rfind(b"\n", len(chunk) - PROGRESS_WINDOW, len(chunk) - 1) < 0:
        return chunk[-PROGRESS_WINDOW:]
    return chunk


def _lookahead(chunks: Iterator[bytes], last: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
    current = next(chunks, None)
    while current is not None:
        following = next(chunks, None)
        yield current, following or last
        current = following


def _tail_lines(chunk: bytes, n: int) -> list[bytes]:
    lines: list[bytes] = []
    pos = len(chunk) - 1 if chunk.endswith(b"\n") else len(chunk)
    while len(lines) < n and pos > 0:
        begin = chunk.rfind(b"\n", 0, pos) + 1
        lines.append(chunk[begin:pos])
        pos = begin - 1
    lines.reverse()
    return lines
