"""Demoted patterns: when most lines a pattern flags are rejected, reject them in bulk, in C.

A pattern whose verifier is anchored at the message start (``^...``, like the engine's exception
line) flags every line that *mentions* its words; a log can hold millions of such lines (``check
ValueError: none, continuing``), each costing the per-line unwrap and verify in Python. Once a
pattern has been rejected ``DEMOTE_AFTER`` times in a text, its lines are found instead by one
Hyperscan pass over the chunk with a pattern that matches every line whose message the verifier
can accept: any run of the launcher and logger prefixes ``lines.unwrap`` peels (lookarounds
dropped, so it is looser), then the verifier's own body. Lines it does not match cannot be hits;
those it matches are verified as before. Only chunks of plain ASCII without ``\\r`` are read this
way (there, bytes and characters agree and a line is one segment); others take the usual path.

The loop over all ~40 prefix rules makes that pass slow (17-20 ms per MB: an NFA kept alive
along every line that opens with a prefix). Most rules need a literal (``[rank``, ``%|``,
``<std``...) that a given log never holds, so each chunk is first read once for those literals
(signatures/factors.py) and the pass runs with only the rules it may use: the lines found are
the same, since a rule absent from the chunk can match none of its lines.

Even narrowed, the pass costs ~2-3 ms per MB where every line mentions an exception. Before it,
a cheaper pass (MessageStarts, ~1.7 ms per MB there, stopped at its first match) looks for the
verifier's body at a line's start or after a byte a prefix rule can end with: every line the
bulk form matches holds one, so the bulk pass starts at the first line that does, and a chunk
with none (benign mentions follow a word: "check ValueError: none") skips it.
"""

from __future__ import annotations

import contextlib
import re
import re._constants as sre_constants
import re._parser as sre_parse
from collections.abc import Iterable
from functools import cache
from typing import Any, Protocol

from signatures.factors import drop_lookarounds, ending_bytes, optional_head, required_literals
from signatures.lines import _PREFIXES
from signatures.scan import hyperscan_database

DEMOTE_AFTER = 256  # rejected lines of one pattern in one text before it is demoted
SAME_LINE = 64  # matches on one line before a line finder skips to the next line
_NAMED = re.compile(r"\(\?P<\w+>")
_BOUNDED = re.compile(r"(?<!\\)\{(\d+),\d+\}")
MAX_FORMS = 16  # narrowed forms one verifier compiles before it keeps to the whole one
# A literal of only these (``] ``, ``: ``) is on nearly every line: looking for it tripled the
# gate's cost (0.4 -> 1.7 ms per MB), and the rules it stands for are nearly always present anyway.
SEPARATORS = " :]"


class LineStarts(Protocol):
    def starts(self, chunk: bytes, first: int) -> list[int]:
        """The starts of the lines from ``first`` (a line start) that may match, in order."""
        ...


class BulkLines:
    """Hyperscan over a chunk: the starts of the lines whose message a verifier may accept."""

    def __init__(self, regex: bytes, ignore_case: bool) -> None:
        import hyperscan

        flags = hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_CASELESS if ignore_case else 0)
        self.terminated = hyperscan.ScanTerminated
        # Kept compiled like the scanner's database: the exception line's form takes 0.25 s to compile.
        self.db, _ = hyperscan_database([regex], [flags], [0])

    def starts(self, chunk: bytes, first: int) -> list[int]:
        """The lines from ``first`` (a line start) on which the regex matches, in order.

        A line's start is looked for back to the last match only, and after SAME_LINE matches on
        one line the scan stops and goes on from the next line: a line of MBs that matches
        millions of times (progress output without newlines) costs a few callbacks, not millions.
        """
        view = memoryview(chunk)
        found: list[int] = []
        base = last = first  # where the scan began; where the last match ended
        stop = -1  # the end of the last line found
        same = 0
        resume = -1

        def on_match(pid: int, start: int, end: int, flags: int, context: Any) -> bool:
            nonlocal last, stop, same, resume
            end += base
            if end <= stop:
                same += 1
                if same < SAME_LINE:
                    return False
                resume = stop + 1
                return True  # the rest of this line adds nothing
            newline = chunk.rfind(b"\n", last, max(end - 1, last))
            found.append(newline + 1 if newline >= 0 else base)  # base: the scan began on this line
            last, same = end, 0
            stop = chunk.find(b"\n", end)
            if stop < 0:
                stop = len(chunk)
            return False

        while base < len(chunk):
            resume = -1
            with contextlib.suppress(self.terminated):
                self.db.scan(view[base:], match_event_handler=on_match)
            if resume < 0:
                break
            base = last = resume
        return found


class NeedleLines:
    """Hyperscan over a chunk for several literals at once: per literal, the starts of its lines.

    ``bytes.find`` reads the chunk once per literal, found or not (~0.9 ms per MB each); this reads
    it once for all of them.
    """

    def __init__(self, needles: tuple[bytes, ...]) -> None:
        import hyperscan

        expressions = [re.escape(n) for n in needles]
        self.count = len(needles)
        self.needles = needles
        self.terminated = hyperscan.ScanTerminated
        self.db, _ = hyperscan_database(expressions, [0] * len(needles), list(range(len(needles))))

    def starts(self, chunk: bytes, first: int, limit: int | None = None) -> list[list[int]]:
        """Per literal, the lines from ``first`` (a line start) that hold it, in order.

        As in BulkLines.starts: after SAME_LINE matches on one line the scan goes on from the next
        line, and which literals that line holds is read off the line itself. With ``limit``, the
        scan stops once that many (literal, line) pairs are found: the caller needs no more.
        """
        view = memoryview(chunk)
        found: list[list[int]] = [[] for _ in range(self.count)]
        base = last = first
        start, stop = -1, -1  # the line of the last match
        held: set[int] = set()  # literals seen on it
        same = 0
        resume = -1
        pairs = 0
        full = limit if limit is not None else -1

        def on_match(pid: int, begin: int, end: int, flags: int, context: Any) -> bool:
            nonlocal last, start, stop, same, resume, pairs
            end += base
            if end > stop:
                newline = chunk.rfind(b"\n", last, max(end - 1, last))
                start = newline + 1 if newline >= 0 else base
                stop = chunk.find(b"\n", end)
                if stop < 0:
                    stop = len(chunk)
                last, same = end, 0
                held.clear()
            if pid not in held:
                held.add(pid)
                found[pid].append(start)
                pairs += 1
            same += 1
            if pairs == full:
                return True  # resume is -1: the scan ends here
            if same < SAME_LINE:
                return False
            for i, needle in enumerate(self.needles):
                if i not in held and chunk.find(needle, start, stop) >= 0:
                    found[i].append(start)
                    pairs += 1
            resume = stop + 1
            return True

        while base < len(chunk):
            resume = -1
            with contextlib.suppress(self.terminated):
                self.db.scan(view[base:], match_event_handler=on_match)
            if resume < 0 or 0 <= full <= pairs:
                break
            base = last = resume
            held.clear()
        return found


@cache
def needle_lines(needles: tuple[bytes, ...]) -> NeedleLines | None:
    """The one-pass finder of ``needles``; None when it cannot be built (no hyperscan)."""
    try:
        return NeedleLines(needles)
    except Exception:  # no hyperscan, or it refuses a literal: bytes.find it is
        return None


@cache
def bulk_lines(pattern: str, ignore_case: bool) -> LineStarts | None:
    """The bulk line finder for a verifier ``pattern``; None when it cannot be built."""
    if bulk_regex(pattern) is None or bulk_locate(_bulk_form(pattern, ()).encode(), ignore_case) is None:
        return None  # not derivable, or Hyperscan refuses even the verifier's own body
    gate = rule_gate(ignore_case)
    return NarrowedLines(pattern, ignore_case, gate) if gate is not None else _whole(pattern, ignore_case)


class NarrowedLines:
    """The bulk form of a verifier, per chunk with only the prefix rules the chunk may hold."""

    def __init__(self, pattern: str, ignore_case: bool, gate: RuleGate) -> None:
        self.pattern = pattern
        self.ignore_case = ignore_case
        self.gate = gate
        self.forms: dict[frozenset[int], LineStarts] = {}
        self.entry = message_starts(pattern, ignore_case)

    def starts(self, chunk: bytes, first: int) -> list[int]:
        if self.entry is not None:
            first = self.entry.first_line(chunk, first)
            if first < 0:
                return []  # no line from ``first`` on can hold a message the verifier accepts
        rules = self.gate.present(memoryview(chunk)[first:])
        finder = self.forms.get(rules)
        if finder is None:
            narrowed = None
            if len(self.forms) < MAX_FORMS:
                kept = tuple(i for i in range(len(_PREFIXES)) if i in rules)
                narrowed = bulk_locate(_bulk_form(self.pattern, kept).encode(), self.ignore_case)
            finder = narrowed or _whole(self.pattern, self.ignore_case)
            self.forms[rules] = finder
        return finder.starts(chunk, first)


class MessageStarts:
    """Where a message the verifier may accept can start: at a line's start, or after a byte a
    prefix rule can end with (and blanks). Every line the bulk form matches holds one, and this
    finds the first in a pass about half as costly; a chunk of benign mentions ("check
    ValueError: none": after a letter no rule ends with) has none and skips the bulk pass."""

    def __init__(self, regex: bytes, ignore_case: bool) -> None:
        import hyperscan

        single = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_SINGLEMATCH
        flags = single | (hyperscan.HS_FLAG_CASELESS if ignore_case else 0)
        self.terminated = hyperscan.ScanTerminated
        self.db, _ = hyperscan_database([regex], [flags], [0])

    def first_line(self, chunk: bytes, first: int) -> int:
        """The start of the first line from ``first`` (a line start) that holds one; -1: none does."""
        ends: list[int] = []

        def on_match(pid: int, start: int, end: int, flags: int, context: Any) -> bool:
            ends.append(first + end)
            return True  # the first is all that is needed

        with contextlib.suppress(self.terminated):
            self.db.scan(memoryview(chunk)[first:], match_event_handler=on_match)
        if not ends:
            return -1
        return chunk.rfind(b"\n", first, ends[0] - 1) + 1 or first  # a match holds no newline


@cache
def message_starts(pattern: str, ignore_case: bool) -> MessageStarts | None:
    regex = entry_regex(pattern)
    try:
        return MessageStarts(regex.encode("ascii"), ignore_case) if regex is not None else None
    except Exception:  # no hyperscan, or it refuses the form: the bulk pass runs on every chunk
        return None


def entry_regex(pattern: str) -> str | None:
    """The verifier's body (``pattern`` less its ``^``) at a line's start or after a byte a prefix
    rule can end with, the rule's last blanks between: what every line of the bulk form holds.

    The optional items the body opens with (``[ \\t]*(?:\\[...\\] +)*``) count as prefix rules: a
    third cheaper to search for, and every line that holds the body holds what follows them."""
    items, rest = optional_head(pattern[1:])
    if not rest or re.match(rest, "") is not None:
        return None
    tight: set[int] = set()
    spaced: set[int] = set()
    for rule in [*(_loose(rule.pattern) for rule in _PREFIXES), *items]:
        ends = ending_bytes(rule)
        if ends is None:
            return None
        tight |= ends[0]
        spaced |= ends[0] | ends[1]
    if max(spaced, default=0) > 0xFF:
        return None  # a character past a byte: a class of bytes cannot hold it
    heads = [r"^[ \t]*"]
    heads += [f"[{_byte_class(tight)}]"] if tight else []
    heads += [rf"[{_byte_class(spaced)}][ \t]+"] if spaced else []
    return _BOUNDED.sub(r"{\1,}", f"(?:{'|'.join(heads)})(?:{rest})")


def _byte_class(found: set[int]) -> str:
    return "".join(f"\\x{b:02x}" for b in sorted(found))


class RuleGate:
    """Which prefix rules may occur in a chunk: their required literals, found in one pass."""

    def __init__(self, ignore_case: bool) -> None:
        import hyperscan

        literals: list[str] = []
        self.owners: list[int] = []  # the rule each literal belongs to
        always: set[int] = set()
        for i, rule in enumerate(_PREFIXES):
            found = required_literals(_loose(rule.pattern))
            if found is None or not all(literal.strip(SEPARATORS) for literal in found):
                always.add(i)
                continue
            for literal in found or ():
                literals.append(literal)
                self.owners.append(i)
        self.always = frozenset(always)
        flags = hyperscan.HS_FLAG_SINGLEMATCH | (hyperscan.HS_FLAG_CASELESS if ignore_case else 0)
        expressions = [re.escape(literal).encode("utf-8") for literal in literals]
        self.db, _ = hyperscan_database(expressions, [flags] * len(literals), list(range(len(literals))))

    def present(self, chunk: bytes | memoryview) -> frozenset[int]:
        """The rules whose literals ``chunk`` holds, and those that need none."""
        found = set(self.always)
        owners = self.owners

        def on_match(pid: int, start: int, end: int, flags: int, context: Any) -> None:
            found.add(owners[pid])

        self.db.scan(chunk, match_event_handler=on_match)
        return frozenset(found)


@cache
def rule_gate(ignore_case: bool) -> RuleGate | None:
    try:
        return RuleGate(ignore_case)
    except Exception:  # no hyperscan, or it refuses a literal: every chunk gets the whole form
        return None


def _whole(pattern: str, ignore_case: bool) -> LineStarts:
    """The bulk form with every prefix rule; where Hyperscan refuses it, every line is a candidate."""
    regex = bulk_regex(pattern)
    found = bulk_locate(regex.encode("ascii"), ignore_case) if regex is not None else None
    return found or EveryLine()


class EveryLine:
    """Every line from ``first``: what the verifier then reads one by one (the usual path's cost)."""

    def starts(self, chunk: bytes, first: int) -> list[int]:
        found = [first] if first < len(chunk) else []
        pos = chunk.find(b"\n", first)
        while 0 <= pos < len(chunk) - 1:
            found.append(pos + 1)
            pos = chunk.find(b"\n", pos + 1)
        return found


@cache
def bulk_locate(regex: bytes, ignore_case: bool) -> BulkLines | None:
    """Hyperscan finding the lines ``regex`` (a scan form) matches; None when it cannot be built."""
    try:
        return BulkLines(regex, ignore_case)
    except Exception:  # no hyperscan, or it refuses the pattern: the pattern stays on the usual path
        return None


def bulk_regex(pattern: str) -> str | None:
    """A regex every line matches whose unwrapped message ``pattern`` accepts; None if not derivable."""
    if not pattern.startswith("^") or not pattern.isascii():
        return None
    body = pattern[1:]
    if "^" in body.replace("[^", "") or "\\" + "^" in body:
        return None  # another anchor would need the message start, which the bulk form cannot see
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return None
    if not len(parsed) or parsed[0] != (sre_constants.AT, sre_constants.AT_BEGINNING):
        return None  # "^a|b": an alternative is not anchored, nothing to demote
    return _bulk_form(pattern, range(len(_PREFIXES)))


def _bulk_form(pattern: str, rules: Iterable[int]) -> str:
    """The bulk form of an anchored verifier ``pattern`` with the prefix rules ``rules`` only."""
    kept = "|".join(_loose(_PREFIXES[i].pattern) for i in rules)
    loop = f"(?:{kept})*" if kept else ""
    # Bounded repeats made open (a superset again): Hyperscan refuses the bounded form as too large.
    return _BOUNDED.sub(r"{\1,}", f"^{loop}(?:{pattern[1:]})")


def _loose(rule: str) -> str:
    """A prefix rule without its anchor, names and lookarounds: it matches at least what it did."""
    out = _NAMED.sub("(?:", rule[1:] if rule.startswith("^") else rule)
    return drop_lookarounds(out)
