"""Required literals of a regex: strings one of which every match contains.

A regex's required literals tell, in one literal pass over a chunk, that the regex cannot match
anywhere in it. Only what is certain is derived: a run of literal characters (or of small sets
of literal alternatives) at the top level of the pattern; anything else ends the run. A pattern
without such a run of at least MIN_LENGTH characters has none (None: it may match anywhere).

A regex's last characters (``ending_bytes``) tell where a match of it can end: a message that
follows a run of prefixes starts at the line's start or after one of its prefixes' last bytes.
"""

from __future__ import annotations

import re
import re._constants as sre_constants
import re._parser as sre_parse
from typing import Any

MIN_LENGTH = 2  # a shorter literal is found nearly everywhere: it tells nothing
MAX_ALTERNATIVES = 16  # alternatives one run may grow to (sets of literals multiply them)
BLANKS = frozenset(b" \t")
_ANY = frozenset(range(256)) - {ord("\n")}
_DIGITS = frozenset(b"0123456789")
_WORD = _DIGITS | frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_SPACE = frozenset(b" \t\n\r\f\v")
_CATEGORIES = {
    sre_constants.CATEGORY_DIGIT: _DIGITS,
    sre_constants.CATEGORY_WORD: _WORD,
    sre_constants.CATEGORY_SPACE: _SPACE,
    sre_constants.CATEGORY_NOT_DIGIT: _ANY - _DIGITS,
    sre_constants.CATEGORY_NOT_WORD: _ANY - _WORD,
    sre_constants.CATEGORY_NOT_SPACE: _ANY - _SPACE,
}


def required_literals(regex: str) -> tuple[str, ...] | None:
    """Literals one of which every match of ``regex`` contains; None when none can be derived."""
    try:
        parsed = sre_parse.parse(regex)
    except re.error:
        return None
    if parsed.state.flags & (re.IGNORECASE | re.VERBOSE):
        return None  # literals would need the same flags in the literal pass: not worth it
    best: list[str] | None = None
    run = [""]
    for op, av in [*parsed, (None, None)]:  # the sentinel closes the last run
        alternatives = _alternatives(op, av) if op is not None else None
        if alternatives is not None and len(run) * len(alternatives) <= MAX_ALTERNATIVES:
            run = [head + tail for head in run for tail in alternatives]
            continue
        shortest = min(len(s) for s in run)
        if shortest >= MIN_LENGTH and (best is None or shortest > min(len(s) for s in best)):
            best = run
        run = [""]
    return tuple(dict.fromkeys(best)) if best is not None else None


def _alternatives(op: Any, av: Any) -> list[str] | None:
    """The literal strings one node matches exactly, or None when it matches anything else."""
    if op is sre_constants.LITERAL:
        return [chr(av)]
    if op is sre_constants.SUBPATTERN:
        _group, add_flags, del_flags, body = av
        if add_flags or del_flags:
            return None
        out = [""]
        for sub_op, sub_av in body:
            tails = _alternatives(sub_op, sub_av)
            if tails is None:
                return None
            out = [head + tail for head in out for tail in tails]
            if len(out) > MAX_ALTERNATIVES:
                return None
        return out
    if op is sre_constants.BRANCH:
        out = []
        for branch in av[1]:
            text = ""
            for sub_op, sub_av in branch:
                if sub_op is not sre_constants.LITERAL:
                    return None
                text += chr(sub_av)
            out.append(text)
        return out if len(out) <= MAX_ALTERNATIVES else None
    if op is sre_constants.IN and len(av) <= 4 and all(o is sre_constants.LITERAL for o, _ in av):
        return [chr(a) for _, a in av]
    return None


def ending_bytes(regex: str) -> tuple[frozenset[int], frozenset[int]] | None:
    """(the non-blank bytes a match of ``regex`` can end with, the non-blank bytes it can end with
    before a run of blanks); None when not derivable. Newlines are left out: a match is in a line."""
    try:
        parsed = sre_parse.parse(regex)
        last = _last(parsed, strip=False)[0]
        before_blanks = _last(parsed, strip=True)[0]
    except (re.error, KeyError, ValueError):
        return None
    return frozenset(last - BLANKS), frozenset(before_blanks)


def _last(items: Any, *, strip: bool) -> tuple[set[int], bool]:
    """The bytes a match of the sequence ``items`` can end with (with ``strip``: its last non-blank
    byte) and whether it can end with none of them (empty, or with ``strip`` all blank)."""
    found: set[int] = set()
    for op, av in reversed(list(items)):
        chars, transparent = _last_of(op, av, strip=strip)
        found |= chars
        if not transparent:
            return found, False
    return found, True


def _last_of(op: Any, av: Any, *, strip: bool) -> tuple[set[int], bool]:
    if op is sre_constants.SUBPATTERN:
        return _last(av[-1], strip=strip)
    if op is sre_constants.BRANCH:
        found: set[int] = set()
        transparent = False
        for branch in av[1]:
            chars, empty = _last(branch, strip=strip)
            found |= chars
            transparent = transparent or empty
        return found, transparent
    if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT):
        low, _high, body = av
        chars, empty = _last(body, strip=strip)
        return chars, empty or low == 0
    if op in (sre_constants.AT, sre_constants.ASSERT, sre_constants.ASSERT_NOT):
        return set(), True  # matches no byte
    chars = set(_one_byte(op, av)) - {ord("\n")}
    if strip and chars & BLANKS:
        return chars - BLANKS, True  # a blank here: the last non-blank byte may come before it
    return chars, False


def _one_byte(op: Any, av: Any) -> frozenset[int]:
    """The bytes one single-byte node matches (ValueError for any other node)."""
    if op is sre_constants.LITERAL:
        return frozenset({av})
    if op is sre_constants.NOT_LITERAL:
        return frozenset(range(256)) - {av}
    if op is sre_constants.ANY:
        return _ANY
    if op is not sre_constants.IN:
        raise ValueError(f"no byte set for {op}")
    found: set[int] = set()
    negate = False
    for item, value in av:
        if item is sre_constants.NEGATE:
            negate = True
        elif item is sre_constants.LITERAL:
            found.add(value)
        elif item is sre_constants.RANGE:
            found.update(range(value[0], value[1] + 1))
        else:
            found |= _CATEGORIES[value]  # KeyError for anything else: not derivable
    return frozenset(range(256)) - found if negate else frozenset(found)


def drop_lookarounds(regex: str) -> str:
    """``regex`` without its lookarounds: it matches at least what it did."""
    out: list[str] = []
    i = 0
    while i < len(regex):
        if regex.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            i = group_end(regex, i)
            continue
        if regex[i] == "\\":
            out.append(regex[i : i + 2])
            i += 2
            continue
        out.append(regex[i])
        i += 1
    return "".join(out)


def group_end(regex: str, i: int) -> int:
    """The index just past the group opening at ``i`` (escapes and classes respected)."""
    depth, in_class = 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "]" or regex[i + 1 : i + 3] == "^]":
                i += 2 if regex[i + 1] == "]" else 3
                continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def optional_head(body: str) -> tuple[list[str], str]:
    """The optional items ``body`` opens with (a blank run, ``(?:...)*``, ``(?:...)?``) and the rest."""
    items: list[str] = []
    i = 0
    while True:
        blank = next((b for b in (r"[ \t]*", " *") if body.startswith(b, i)), None)
        if blank is not None:
            i += len(blank)
            continue
        end = group_end(body, i) if body.startswith("(?:", i) else i
        if end == i or body[end : end + 1] not in ("*", "?"):
            return items, body[i:]
        items.append(body[i:end])
        i = end + 1 + (body[end + 1 : end + 2] in ("?", "+"))  # a lazy or possessive repeat
