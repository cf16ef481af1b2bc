"""Required literals (signatures/factors.py) and the bulk form narrowed to them (signatures/demote.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signatures.demote import EveryLine, NarrowedLines, _loose, bulk_lines, bulk_locate, bulk_regex
from signatures.factors import required_literals
from signatures.lines import _PREFIXES
from signatures.tracebacks import EXCEPTION_LINE


@pytest.mark.parametrize(
    "regex,literals",
    [
        ("abc", ("abc",)),
        (r"x\d+ab(?:cd|ef)g", ("abcdg", "abefg")),
        (r"\[(?:rank|RANK)\d+\]", ("[rank", "[RANK")),
        (r"stdout [FP] ", ("stdout F ", "stdout P ")),
        (r"a\d+bc\d+defg", ("defg",)),  # the longest run wins
    ],
)
def test_required_literals_of_plain_runs(regex: str, literals: tuple[str, ...]) -> None:
    assert required_literals(regex) == literals


@pytest.mark.parametrize("regex", [r"\d+", r"a.b", r"(?i)abc", r"ab?", r"(?:ab)*", r"x(?i:abc)", "("])
def test_no_literal_where_none_is_certain(regex: str) -> None:
    # Only runs every match holds: an optional or repeated part, a case-insensitive one or a
    # one-character run gives none.
    found = required_literals(regex)
    assert found is None or all(len(f) >= 2 for f in found)
    if regex in (r"ab?", r"(?:ab)*", r"(?i)abc", r"x(?i:abc)", "("):
        assert found is None


RULES = [_loose(rule.pattern) for rule in _PREFIXES]


@pytest.mark.parametrize("index", range(len(RULES)))
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_match_of_a_prefix_rule_holds_one_of_its_literals(index: int, data: st.DataObject) -> None:
    literals = required_literals(RULES[index])
    if literals is None:
        return
    text = data.draw(st.from_regex(re.compile(RULES[index]), fullmatch=True))
    assert any(literal in text for literal in literals), (RULES[index], text, literals)


PREFIXES = [
    "[rank3]:",
    "[rank3]: ",
    "[2026-11-29 03:00:01] ",
    "2026-11-29T03:00:01.5Z ",
    "gpu-node-001:4000:4100 [3] ",
    " 12%|##  | 3/10 [00:01<00:02, 1.2it/s] ",
    "vllm-1  | ",
    "[default0]:",
    "> ",
    "INFO:root:",
    "[E1129 23:59:01.123456 ProcessGroupNCCL.cpp:616] ",
    "[1,3]<stderr>:",
    "node003: ",
    "[pod/trainer-0/main] ",
    "  7: ",
    "stdout F ",
    "[INFO] ",
    "`",
]
BODIES = [
    "ValueError: bad shape",
    "step 5 check ValueError: none, continuing",
    "KeyboardInterrupt",
    "torch.distributed.DistBackendError: NCCL error",
    "**ZeroDivisionError**",
    "fine",
    "RuntimeError",
]
LINE = st.builds(
    lambda prefixes, body: "".join(prefixes) + body,
    st.lists(st.sampled_from(PREFIXES), max_size=4),
    st.sampled_from(BODIES),
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINE, min_size=1, max_size=30), first_line=st.integers(0, 29))
def test_the_narrowed_bulk_form_finds_what_the_whole_one_finds(lines: list[str], first_line: int) -> None:
    narrowed = bulk_lines(EXCEPTION_LINE.pattern, False)
    assert isinstance(narrowed, NarrowedLines)
    regex = bulk_regex(EXCEPTION_LINE.pattern)
    assert regex is not None
    whole = bulk_locate(regex.encode(), False)
    assert whole is not None
    chunk = ("\n".join(lines) + "\n").encode()
    starts = EveryLine().starts(chunk, 0)
    first = starts[min(first_line, len(starts) - 1)]
    assert narrowed.starts(chunk, first) == whole.starts(chunk, first)


def test_a_chunk_without_a_rules_literal_leaves_the_rule_out() -> None:
    narrowed = bulk_lines(EXCEPTION_LINE.pattern, False)
    assert isinstance(narrowed, NarrowedLines)
    rank = next(i for i, rule in enumerate(_PREFIXES) if rule.pattern.startswith(r"^\[(?:rank|RANK)"))
    assert rank not in narrowed.gate.present(b"ValueError: x\n")
    assert rank in narrowed.gate.present(b"[rank3]: ValueError: x\n")
    # And the line such a rule opens is found all the same once it is there.
    assert narrowed.starts(b"fine\n[rank3]: ValueError: x\n", 0) == [5]


def test_every_line_lists_each_line_start_from_first() -> None:
    assert EveryLine().starts(b"a\nbb\n\nc\n", 0) == [0, 2, 5, 6]
    assert EveryLine().starts(b"a\nbb\nc", 2) == [2, 5]
    assert EveryLine().starts(b"a\n", 2) == []


def test_past_max_forms_a_verifier_keeps_to_the_whole_form(monkeypatch: pytest.MonkeyPatch) -> None:
    import signatures.demote as demote

    shared = bulk_lines(EXCEPTION_LINE.pattern, False)
    assert isinstance(shared, NarrowedLines)
    fresh = NarrowedLines(EXCEPTION_LINE.pattern, False, shared.gate)
    monkeypatch.setattr(demote, "MAX_FORMS", 0)
    chunk = b"[rank3]: ValueError: x\nstep 5 check ValueError: none\n"
    assert fresh.starts(chunk, 0) == [0]
    assert list(fresh.forms.values()) == [demote._whole(EXCEPTION_LINE.pattern, False)]
