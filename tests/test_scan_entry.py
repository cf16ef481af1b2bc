"""The message-start check of the bulk form (demote.MessageStarts): every line the bulk form finds
holds one, so a chunk without one can skip the bulk pass; and the last bytes of a regex it is
built from (factors.ending_bytes)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signatures.demote import _loose, bulk_locate, bulk_regex, message_starts
from signatures.factors import ending_bytes, optional_head
from signatures.lines import _PREFIXES
from signatures.tracebacks import EXCEPTION_LINE

pytest.importorskip("hyperscan")

RULES = [_loose(rule.pattern) for rule in _PREFIXES]
ASCII = st.characters(codec="ascii", exclude_characters="\n")
# Messages the exception verifier accepts (after any prefixes, and blanks).
ACCEPTED = [
    "ValueError: bad shape",
    "torch.distributed.DistBackendError: x",
    "**KeyError**",
    "KeyboardInterrupt",
    "[worker 3]  ValueError: x",  # the body's own optional head: bracketed words, then **
    "[a] [b] **KeyError**",
]


@pytest.mark.parametrize(
    "regex,tight,spaced",
    [
        ("ab ?", b"b", b"b"),
        ("a(?:b|c *)", b"bc", b"bc"),
        (r"\[\d+\] ", b"", b"]"),
        (r"x[ \t]*", b"x", b"x"),
        (r"[FP] (?:>> )?", b"", b"FP>"),
    ],
)
def test_ending_bytes(regex: str, tight: bytes, spaced: bytes) -> None:
    assert ending_bytes(regex) == (frozenset(tight), frozenset(spaced))


def _whole() -> object:
    regex = bulk_regex(EXCEPTION_LINE.pattern)
    assert regex is not None
    whole = bulk_locate(regex.encode(), False)
    assert whole is not None
    return whole


@pytest.mark.parametrize("last", range(len(RULES)))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    chain=st.lists(st.integers(0, len(RULES) - 1), max_size=2),
    blanks=st.sampled_from(["", "", " ", "  ", "\t", " \t "]),
    message=st.sampled_from(ACCEPTED),
)
def test_every_line_of_the_bulk_form_holds_a_message_start(
    last: int, data: st.DataObject, chain: list[int], blanks: str, message: str
) -> None:
    # Each rule in turn ends the run of prefixes: the byte it ends with is where a message starts.
    prefixes = [
        data.draw(st.from_regex(re.compile(RULES[i]), fullmatch=True, alphabet=ASCII)) for i in [*chain, last]
    ]
    line = ("".join(prefixes) + blanks + message).encode()
    chunk = b"noise\n" + line + b"\n"
    entry = message_starts(EXCEPTION_LINE.pattern, False)
    assert entry is not None
    if _whole().starts(chunk, 0) == [6]:  # type: ignore[attr-defined]
        assert entry.first_line(chunk, 0) == 6, line


@pytest.mark.parametrize(
    "line",
    [
        b"2026-11-29T03:00:01ZValueError: x",  # a timestamp rule ending tight, on a letter
        b"stdout F ValueError: x",  # a rule ending in a blank after a letter
        b"[rank3]:ValueError: x",
        b"  7:   ValueError: x",
        b"ValueError: x",
    ],
)
def test_lines_a_rule_ends_just_before_hold_a_message_start(line: bytes) -> None:
    chunk = b"noise\n" + line + b"\n"
    entry = message_starts(EXCEPTION_LINE.pattern, False)
    assert entry is not None
    assert _whole().starts(chunk, 0) == [6]  # type: ignore[attr-defined]
    assert entry.first_line(chunk, 0) == 6


@pytest.mark.parametrize(
    "body,items,rest",
    [
        (
            r"[ \t]*(?:\[[^\]\n]{1,80}\] +)*(?:\*\*)?(?:x|y)",
            [r"(?:\[[^\]\n]{1,80}\] +)", r"(?:\*\*)"],
            "(?:x|y)",
        ),
        ("(?:ab)*?x", ["(?:ab)"], "x"),
        ("(?:a)c", [], "(?:a)c"),
        ("(?:a){2}c", [], "(?:a){2}c"),
    ],
)
def test_the_optional_head_of_a_body(body: str, items: list[str], rest: str) -> None:
    assert optional_head(body) == (items, rest)


def test_a_chunk_of_benign_mentions_holds_none() -> None:
    entry = message_starts(EXCEPTION_LINE.pattern, False)
    assert entry is not None
    noise = b"[rank3]:[2026-11-29 03:00:01] step 5 check ValueError: none, continuing\n" * 50
    assert entry.first_line(noise, 0) == -1
    # Lines before the first that holds one are skipped; from a later start it is not seen.
    chunk = noise + b"[rank3]: ValueError: real\n" + noise
    assert entry.first_line(chunk, 0) == len(noise)
    assert entry.first_line(chunk, len(noise) + len(b"[rank3]: ValueError: real\n")) == -1
