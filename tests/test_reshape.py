"""The reshaping bench (bench/reshape.py): each form rewrites every rank tag of a corpus log into
its own shape, keeps the rest of each line, and the bench scores the forms."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_reshape", Path(__file__).parent.parent / "bench" / "reshape.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _bench()
FORMS, reshape, score, split_tag, tagged_cases = (
    bench.FORMS,
    bench.reshape,
    bench.score,
    bench.split_tag,
    bench.tagged_cases,
)

DIGITS = re.compile(r"\d+")


def test_split_tag_reads_each_source_form() -> None:
    assert split_tag("[rank3]: RuntimeError: x").rank == 3
    assert split_tag("[rank3]: RuntimeError: x").body == "RuntimeError: x"
    assert split_tag("[default1]:[rank9]:boom").rank == 9
    assert split_tag("[1,7]<stderr>:boom").rank == 7
    assert split_tag("Thu Aug 29 21:45:09 2019[2]<stderr>:boom").pre == "Thu Aug 29 21:45:09 2019"
    assert split_tag("(Worker[rank=8] pid=33, ip=10.0.0.1) boom").rank == 8
    assert split_tag("rank 3: boom").rank is None  # words, not a launcher's tag


@pytest.mark.parametrize("form", list(FORMS))
def test_each_form_rewrites_the_tags_and_keeps_the_rest(form: str) -> None:
    rewritten = 0
    for case_no, (case, lines) in enumerate(tagged_cases()[:12]):
        shaped = reshape(case, lines, form, case_no)
        if shaped is None:
            continue
        new = shaped.data.decode("utf-8", "surrogateescape").split("\n")
        assert len(new) == len(lines)
        for old, text in zip(lines, new, strict=True):
            if old.rank is None:
                assert text == old.body  # untagged lines byte for byte
                continue
            assert text.endswith(old.body)
            head = text[: len(text) - len(old.body)]
            if head:
                assert str(old.rank) in head  # the same rank, in the form's own tag
            if DIGITS.sub("#", head) != DIGITS.sub("#", old.pre + old.head):
                rewritten += 1
        assert (case.initiating_line or "") in new[shaped.line_no - 1] or shaped.line_no == case.line_no
    assert rewritten > 0


def test_the_bench_scores_a_form() -> None:
    misses: list[str] = []
    row = score("Open MPI [1,N]<stderr>:", misses)
    assert row.cases > 10
    assert row.right + row.wrong + row.none == row.cases
    assert len(misses) == row.wrong + row.none
