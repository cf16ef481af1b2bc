"""One candidate line, verified: the per-line checks, its context lines and its evidence text.

The bulk scanner only says a pattern may match a line; here each candidate pattern's verifier,
exclusions and traceback reading decide, on the unwrapped message. A rejection that needs no
context (the verifier or an exclusion said no) is remembered per line content, so a line
repeated thousands of times is judged once.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from functools import cache

from signatures.demote import bulk_locate
from signatures.environment import read_fact
from signatures.library import Kind, Library, Matcher
from signatures.lines import LineFacts, strip_ansi, unwrap
from signatures.shapecheck import shape_holds
from signatures.textscan import Hit, TextScan
from signatures.tracebacks import TracebackView, is_advice, read_traceback

BEFORE_LINES = 60  # enough to walk a traceback back to its header
AFTER_LINES = 12
MAX_TEXT = 2000  # a longer line keeps the part around the match
SHORT_TEXT = 300  # the text of a hit that is only counted and grouped
CONTEXT_KEPT = 8  # hits per pattern per text that keep their context lines
# Past its cap, a generic pattern (an error shape, an exception line) keeps being read in the last
# lines of each chunk, and its newest hits are kept: a log with a thousand handled ERROR records
# still shows the failure at its end.
TAILED = (Kind.SHAPE, Kind.EXCEPTION)
TAIL_KEPT = 64
CONTEXT_LINE = 8192  # bytes of a context line kept: the end of one above a hit, the start of one below
MANY_SEGMENTS = 32  # a line of more segments has each read only by the patterns found in it
VERDICTS_KEPT = 4096  # distinct rejected lines remembered per text
VERDICT_LINE = 1024  # longer lines are not remembered (memory stays bounded)
SEGMENTS_KEPT = 4096  # distinct unwrapped segments of multi-segment lines remembered per text


class Reader:
    """The state of one text's verification: context kept per pattern, facts found, verdicts."""

    def __init__(self, result: TextScan, library: Library) -> None:
        self.result = result
        self.library = library
        self.kept_context: dict[int, int] = {}
        self.done_facts: set[str] = set()
        self.rejected: dict[bytes, set[int]] = {}  # line bytes -> patterns that line cannot match
        self.rejections: dict[int, int] = {}  # lines each pattern flagged and the verifier rejected
        self.hot: dict[int, int] = {}  # lines each pattern flagged in the last chunk it was found in
        # A progress bar's segments recur on every bar (" 40%|####      | 40/100 [...]"): each is
        # unwrapped once per text, not once per line (unwrap is pure; LineFacts is frozen).
        self.unwrapped: dict[str, LineFacts] = {}
        # (pid, segments read) a structure pattern rejected on them alone: the bars of one progress
        # line differ in their first segment ("Epoch 5:"), which holds none of its literals.
        self.rejected_segments: set[tuple[object, ...]] = set()

    def line(
        self,
        chunk: bytes,
        start: int,
        line_no: int,
        candidates: list[Matcher],
        prev_tail: list[bytes],
        next_chunk: bytes,
    ) -> list[int]:
        """Verify the line of ``chunk`` at ``start``; record its hits; return the accepted pids."""
        end = chunk.find(b"\n", start)
        stop = end if end >= 0 else len(chunk)
        key = chunk[start:stop] if stop - start <= VERDICT_LINE else None
        known = self.rejected.get(key) if key is not None else None
        if known:
            candidates = [m for m in candidates if m.pid not in known]
            if not candidates:
                return []
        data = key if key is not None else chunk[start:stop]
        raw = data.decode("utf-8", "replace").rstrip("\r")
        segments = Segments(data, raw, self.unwrapped)
        before: list[str] | None = None
        accepted: list[int] = []
        for matcher in candidates:
            seen = segments.seen_key(matcher)
            if seen is not None and seen in self.rejected_segments:
                self.rejections[matcher.pid] = self.rejections.get(matcher.pid, 0) + 1
                continue
            verdict, before = self._match(
                matcher,
                chunk,
                start,
                end,
                line_no,
                raw,
                segments.newest_first(matcher),
                before,
                prev_tail,
                next_chunk,
            )
            if verdict is True:
                accepted.append(matcher.pid)
                continue
            self.rejections[matcher.pid] = self.rejections.get(matcher.pid, 0) + 1
            if verdict is None and key is not None:
                self._remember(key, matcher.pid)
            if verdict is None and seen is not None:
                if len(self.rejected_segments) >= VERDICTS_KEPT:
                    self.rejected_segments.clear()
                self.rejected_segments.add(seen)
        return accepted

    def _remember(self, key: bytes, pid: int) -> None:
        if len(self.rejected) >= VERDICTS_KEPT and key not in self.rejected:
            self.rejected.clear()
        self.rejected.setdefault(key, set()).add(pid)

    def _match(
        self,
        matcher: Matcher,
        chunk: bytes,
        start: int,
        end: int,
        line_no: int,
        raw: str,
        segments: Iterator[tuple[str, LineFacts]],
        before: list[str] | None,
        prev_tail: list[bytes],
        next_chunk: bytes,
    ) -> tuple[bool | None, list[str] | None]:
        """True: a hit (or a fact) recorded; None: rejected on the line alone; False: by context."""
        result = self.result

        def after() -> list[str]:
            return lines_after(chunk, end, next_chunk)

        verdict: bool | None = None
        for segment, facts in segments:
            m = matcher.verify.search(facts.message)
            if matcher.shape is not None:
                verdict = False  # shapes read the lines after: never remembered
                if not shape_holds(matcher.shape, segment, facts, m is not None, after):
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
                    self.done_facts.add(matcher.fact.key)
                return bool(value), before
            if is_advice(facts.message):
                break
            if before is None:
                before = lines_before(chunk, start, prev_tail)
            if matcher.structure is not None:
                sighting = matcher.structure.read(result.file_index, line_no, facts, before, after)
                if sighting is None:
                    return False, before
                result.sightings.append(sighting)
                result.counts[matcher.pid] = result.counts.get(matcher.pid, 0) + 1
                return True, before
            view = read_traceback(facts.message, before)
            if view.echo or view.frame:
                return False, before
            result.counts[matcher.pid] = result.counts.get(matcher.pid, 0) + 1
            self._keep(matcher, line_no, raw, segment, facts, m, view, before, after)
            return True, before
        return verdict, before

    def _keep(
        self,
        matcher: Matcher,
        line_no: int,
        raw: str,
        segment: str,
        facts: LineFacts,
        m: re.Match[str] | None,
        view: TracebackView,
        before: list[str],
        after: Callable[[], list[str]],
    ) -> None:
        result = self.result
        keep_context = (
            self.kept_context.get(matcher.pid, 0) < CONTEXT_KEPT or matcher.kind is not Kind.SIGNATURE
        )
        # Only hits that may be shown keep long text; the rest are counted and grouped.
        limit = MAX_TEXT if keep_context else SHORT_TEXT
        hit = Hit(
            matcher=matcher,
            file_index=result.file_index,
            file=result.name,
            line=line_no,
            text=raw if len(raw) <= limit else clip(segment, facts, m, limit),
            facts=facts,
            groups={k: v for k, v in m.groupdict().items() if v is not None} if m else {},
            view=view,
        )
        if keep_context:
            self.kept_context[matcher.pid] = self.kept_context.get(matcher.pid, 0) + 1
            hit.before = tuple(short(x) for x in before[-AFTER_LINES:])
            hit.after = tuple(short(x) for x in after())
            if view.assert_offset is not None:
                hit.before = tuple(short(x) for x in before[-max(AFTER_LINES, view.assert_offset) :])
        if matcher.kind in TAILED and result.counts[matcher.pid] > matcher.cap:
            result.tail.setdefault(matcher.pid, deque(maxlen=TAIL_KEPT)).append(hit)
        else:
            result.hits.append(hit)


class Segments:
    """The ``\\r``-separated segments of one line (progress bars rewrite a line with ``\\r``).

    Each is unwrapped once, when a pattern first needs it. On a line of many segments a pattern
    only reads those its scan form matches: a 4 MB run of progress output is not unwrapped whole.
    """

    def __init__(self, data: bytes, raw: str, unwrapped: dict[str, LineFacts] | None = None) -> None:
        self.data = data
        self.texts = raw.split("\r")
        self.kept = [i for i, text in enumerate(self.texts) if text.strip()]
        if not self.kept:
            self.texts, self.kept = [raw], [0]
        self._facts: dict[int, LineFacts] = {}
        self._lines: bytes = b""
        # Segments of a line of several are looked up in (and added to) the text's ``unwrapped``.
        self._known = unwrapped if unwrapped is not None and len(self.kept) > 1 else None
        self._chosen_by: dict[int, list[int]] = {}

    def _chosen(self, matcher: Matcher) -> list[int]:
        """The segments ``matcher`` reads."""
        chosen = self._chosen_by.get(matcher.pid)
        if chosen is not None:
            return chosen
        structure = matcher.structure
        if structure is not None and len(self.kept) > 1:
            # A structure line holds one of its literals, and its verifier matches in it (the
            # message is the segment's end): a segment that fails either (a bar's "Epoch 5:", or
            # " 40%|####  |" which is no rank's rule) is not unwrapped. Colour codes: always read.
            texts = self.texts
            form = _scan_form(structure.verify)
            if form is not None and self.data.isascii():
                # One Hyperscan call finds the few such segments (in MBs of progress output too).
                found = self._segments_matching(form, False)
                if b"\x1b" in self.data:
                    found |= {i for i in self.kept if "\x1b" in texts[i]}
                chosen = sorted(found.intersection(self.kept))
            else:
                holds, may = _holding(structure.needles), _may_match(structure.verify)
                chosen = [i for i in self.kept if "\x1b" in texts[i] or (holds(texts[i]) and may(texts[i]))]
            self._chosen_by[matcher.pid] = chosen
            return chosen
        chosen = self.kept if len(self.kept) <= MANY_SEGMENTS else self._matching(matcher)
        self._chosen_by[matcher.pid] = chosen
        return chosen

    def seen_key(self, matcher: Matcher) -> tuple[object, ...] | None:
        """For a structure pattern on a line of several segments: the pattern and the segments it
        reads, under which a rejection is remembered (its verdict depends on nothing else)."""
        if matcher.structure is None or len(self.kept) < 2:
            return None
        texts = [self.texts[i] for i in self._chosen(matcher)]
        return (matcher.pid, *texts) if sum(map(len, texts)) <= VERDICT_LINE else None

    def newest_first(self, matcher: Matcher) -> Iterator[tuple[str, LineFacts]]:
        for i in reversed(self._chosen(matcher)):
            facts = self._facts.get(i)
            if facts is None:
                facts = self._facts[i] = self._unwrap(self.texts[i])
            yield self.texts[i], facts

    def _unwrap(self, text: str) -> LineFacts:
        known = self._known
        if known is None or len(text) > VERDICT_LINE:
            return unwrap(text)
        facts = known.get(text)
        if facts is None:
            if len(known) >= SEGMENTS_KEPT:
                known.clear()
            facts = known[text] = unwrap(text)
        return facts

    def _matching(self, matcher: Matcher) -> list[int]:
        found = self._segments_matching(matcher.locate.pattern, bool(matcher.locate.flags & re.IGNORECASE))
        return sorted(found.intersection(self.kept))

    def _segments_matching(self, regex: bytes, ignore_case: bool) -> set[int]:
        """The indexes of the segments ``regex`` matches in (each segment on a line of its own)."""
        if not self._lines:
            # Each segment on a line of its own: ^ and $ hold at its ends, and no match spans two.
            self._lines = self.data.replace(b"\r", b"\n")
        lines = self._lines
        bulk = bulk_locate(regex, ignore_case)
        if bulk is not None:  # Hyperscan reads the MBs of segments in C; the lines it finds start segments
            starts = bulk.starts(lines, 0)
        else:
            rx = re.compile(regex, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))
            starts = [m.start() for m in rx.finditer(lines)]
        found: set[int] = set()
        index, at = 0, 0
        for start in starts:  # in order: a segment's index is the newlines before it
            index += lines.count(b"\n", at, start)
            at = start
            found.add(index)
        return found


@cache
def _holding(needles: tuple[bytes, ...]) -> Callable[[str], re.Match[str] | None]:
    """Whether a text holds one of ``needles``: one regex search, not a ``in`` per literal."""
    return re.compile("|".join(re.escape(n.decode("ascii")) for n in needles)).search


@cache
def _scan_form(verify: re.Pattern[str]) -> bytes | None:
    """``_may_match``'s test as a Hyperscan form over ASCII segments one per line: ``\\s`` without
    the newline (so no match runs into the next segment); None where that cannot be written."""
    if _may_match(verify) is _always:
        return None
    head = verify.pattern.removeprefix("^").removeprefix(r"\s*")
    if not head.isascii() or re.search(r"\[[^\]]*\\s", head) or "(?P=" in head:
        return None  # \s inside a class, a back-reference: left to Python
    return re.sub(r"(?<!\\)((?:\\\\)*)\\s", r"\1[\\t\\x0b\\x0c\\r ]", head).encode("ascii")


def _always(text: str) -> bool:
    return True


@cache
def _may_match(verify: re.Pattern[str]) -> Callable[[str], object]:
    """A test every segment passes whose message ``verify`` matches: ``verify`` itself, searched in
    the whole segment, with its leading ``^`` dropped (the message starts inside the segment).
    Where context at the message start could matter (a boundary or lookahead right after the
    anchor, a lookbehind, a second anchor), every segment passes."""
    pattern = verify.pattern
    body = pattern[1:] if pattern.startswith("^") else pattern
    head = body.removeprefix(r"\s*")
    if "^" in body.replace("[^", "") or "(?<" in body or head.startswith((r"\b", r"\B", "(?=", "(?!")):
        return _always
    return re.compile(head, verify.flags).search  # without a leading \s*: it may match nothing


def clip(segment: str, facts: LineFacts, m: re.Match[str] | None, limit: int) -> str:
    """At most ``limit`` characters of a long line: the matched span with the text around it."""
    body = strip_ansi(segment).rstrip("\r\n")
    if m is None:
        return body[:limit] + " …"
    offset = len(body) - len(facts.message)  # the message is what is left after the prefixes
    if offset < 0 or not body.endswith(facts.message):
        offset = max(body.find(m.group(0)), 0) - m.start()
    first, last = offset + m.start(), offset + m.end()
    room = max(limit - (last - first), 0)
    lo = max(0, first - room // 2)
    hi = min(len(body), max(last, lo + limit))
    lo = max(0, min(lo, hi - limit))
    hi = min(hi, lo + limit)
    return ("… " if lo else "") + body[lo:hi] + (" …" if hi < len(body) else "")


def short(line: str) -> str:
    return line if len(line) <= 500 else line[:500] + " …"


def lines_before(chunk: bytes, start: int, prev_tail: list[bytes]) -> list[str]:
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
    return [x[-CONTEXT_LINE:].decode("utf-8", "replace").rstrip("\r") for x in out]


def lines_after(chunk: bytes, end: int, next_chunk: bytes) -> list[str]:
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
    return [strip_ansi(x[:CONTEXT_LINE].decode("utf-8", "replace")).rstrip("\r") for x in out]
