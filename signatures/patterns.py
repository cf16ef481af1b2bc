"""Fingerprint patterns: the subset every scanning backend agrees on, and its checks.

A fingerprint regex must mean the same thing in Python's ``re`` (the per-line verifier), RE2 and
Hyperscan (the bulk scanners). So it uses their common subset: no look-around, no
back-references, no inline flags (``ignore_case`` is a field), nothing that can match a newline,
and no nested unbounded repeats (the shape that backtracks catastrophically in ``re``).
"""

from __future__ import annotations

import re

# Python 3.11+ keeps the regex parser private; its shape is stable across 3.11-3.13.
import re._constants as sre_constants
import re._parser as sre_parse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PatternProblem:
    reason: str


_UNBOUNDED = sre_constants.MAXREPEAT
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT)
_NEWLINE = ord("\n")


def check_pattern(pattern: str) -> PatternProblem | None:
    """Return why ``pattern`` is not allowed as a fingerprint, or None when it is."""
    if "\n" in pattern:
        return PatternProblem("must be on one line")
    if re.search(r"\(\?[aiLmsux-]+\)|\(\?[aiLmsux-]+:", pattern):
        return PatternProblem("inline flags are not allowed; use 'ignore_case: true'")
    try:
        re.compile(pattern)
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        return PatternProblem(f"invalid regex: {exc}")
    problem = _walk(list(parsed), nested_unbounded=False)
    if problem:
        return PatternProblem(problem)
    if re.compile(pattern).search("") is not None and re.compile(pattern).fullmatch("") is not None:
        return PatternProblem("matches the empty string, so it would match every line")
    return None


def _walk(items: list[tuple[Any, Any]], *, nested_unbounded: bool) -> str | None:
    for op, arg in items:
        if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            return "look-around is not allowed (RE2 and Hyperscan cannot run it)"
        if op in (sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS):
            return "back-references are not allowed (RE2 and Hyperscan cannot run them)"
        if op == sre_constants.CATEGORY and arg in (
            sre_constants.CATEGORY_SPACE,
            sre_constants.CATEGORY_NOT_SPACE,
            sre_constants.CATEGORY_NOT_DIGIT,
            sre_constants.CATEGORY_NOT_WORD,
        ):
            return r"\s, \S, \D and \W can match a newline; use [ \t] or an explicit class"
        if op == sre_constants.NOT_LITERAL and arg != _NEWLINE:
            return r"a negated class must exclude the newline, e.g. [^)\n]"
        if op == sre_constants.ANY:
            continue  # '.' never matches a newline without DOTALL, which is refused above
        if op == sre_constants.IN:
            problem = _check_class(arg)
            if problem:
                return problem
        if op in _REPEATS:
            _low, high, body = arg
            unbounded = high == _UNBOUNDED or high > 1000
            if unbounded and nested_unbounded:
                return "nested unbounded repeats can backtrack catastrophically"
            problem = _walk(list(body), nested_unbounded=nested_unbounded or unbounded)
            if problem:
                return problem
        elif op == sre_constants.SUBPATTERN:
            problem = _walk(list(arg[-1]), nested_unbounded=nested_unbounded)
            if problem:
                return problem
        elif op == sre_constants.BRANCH:
            for branch in arg[1]:
                problem = _walk(list(branch), nested_unbounded=nested_unbounded)
                if problem:
                    return problem
        elif op == sre_constants.AT and arg in (
            sre_constants.AT_BEGINNING_STRING,
            sre_constants.AT_END_STRING,
        ):
            return r"\A and \Z are not allowed; use ^ and $"
    return None


def _check_class(items: list[tuple[Any, Any]]) -> str | None:
    negated = any(op == sre_constants.NEGATE for op, _ in items)
    if not negated:
        for op, arg in items:
            if op == sre_constants.LITERAL and arg == _NEWLINE:
                return "a character class must not contain a newline"
            if op == sre_constants.CATEGORY and arg == sre_constants.CATEGORY_SPACE:
                return r"\s can match a newline; use [ \t]"
        return None
    excludes_newline = any(
        (op == sre_constants.LITERAL and arg == _NEWLINE)
        or (op == sre_constants.RANGE and arg[0] <= _NEWLINE <= arg[1])
        or (op == sre_constants.CATEGORY and arg == sre_constants.CATEGORY_SPACE)
        for op, arg in items
    )
    if not excludes_newline:
        return r"a negated class must exclude the newline, e.g. [^\]\n]"
    return None


def literal_to_regex(literal: str) -> str:
    """A literal as a regex in which each space matches any run of spaces or tabs."""
    parts = [re.escape(word) for word in literal.split(" ")]
    out = parts[0]
    for part in parts[1:]:
        out += "[ \t]+" + part if part else ""
    return out


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def scan_form(regex: str) -> str:
    """The regex a bulk scanner searches raw text with: unanchored, no named groups.

    Raw lines still carry their prefixes, so a leading ``^`` is dropped; the verifier applies it
    to the message afterwards. The result matches a superset of the lines the verifier accepts.
    """
    body = _NAMED_GROUP.sub("(", regex)
    if body.startswith("^"):
        body = body[1:]
    # Raw lines may end in "\r\n" (logs written on Windows or through a pty): let $ allow the \r.
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1] + r"\r?$"
    # Unanchored, a leading optional run of blanks adds nothing but cost to the scan.
    for lead in (" *", r"[ \t]*", "[ \t]*"):
        if body.startswith(lead):
            body = body[len(lead) :]
    return _fewest_leading(body)


# A repeated atom opening the pattern: a class, \w-like escape or dot, and its quantifier.
_LEADING_REPEAT = re.compile(
    r"(?P<atom>\[\^?\]?(?:\\.|[^\]\\])*\]|\\[wWsSdD]|\.)"
    r"(?:(?P<op>[*+?])|\{(?P<least>\d*)(?P<comma>,)?\d*\})\??"
)


def _fewest_leading(body: str) -> str:
    """``body`` with an opening repeat cut to its fewest: unanchored, ``[\\w.]{1,200} \\[missing``
    finds the lines ``[\\w.] \\[missing`` finds (a match of either holds one of the other), and
    a wide bounded repeat costs a bulk scanner (and ripgrep) far more to compile and run."""
    m = _LEADING_REPEAT.match(body)
    rest = body[m.end() :] if m else ""
    if m is None or not rest or rest[0] in "|)*+?{":
        return body  # the repeat is the whole pattern, or one branch of several: left as written
    if m.group("op"):
        least = 1 if m.group("op") == "+" else 0
    elif m.group("comma"):
        least = int(m.group("least") or 0)
    else:
        return body  # an exact count: nothing to cut
    atom = m.group("atom")
    head = "" if least == 0 else atom if least == 1 else f"{atom}{{{least}}}"
    cut = head + rest
    return body if re.match(cut, "") else cut  # a pattern that matches nothing is no scan
