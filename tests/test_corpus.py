"""Accuracy on real failure logs: every labelled case, as pasted and inside healthy output.

A case passes when the diagnosis names the labelled initiating line (text and line number), the
labelled rank, and a signature the class map accepts; `none` cases must come out clean.
`bench/accuracy.py` prints the same grades as percentages.
"""

from __future__ import annotations

import pytest

from signatures import Source, default_library
from signatures.engine import find_all
from tests.corpus import cases as cases_module
from tests.corpus.cases import MODES, allowed_ids, batch_label_files, class_map, load_cases, run_case
from tests.corpus.embed import embed, healthy_prefix

CASES = load_cases()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, mode):
    grade = run_case(case, mode)
    assert grade.ok, f"{case.id} ({mode}, {case.expected_class}): " + "; ".join(grade.problems)


def test_every_case_has_a_readable_log_and_a_known_class():
    problems = []
    for case in CASES:
        if not case.path.is_file():
            problems.append(f"{case.id}: missing {case.path.name}")
            continue
        if case.is_failure and allowed_ids(case.expected_class) == []:
            problems.append(f"{case.id}: class {case.expected_class} is not in class_map.yaml")
        if case.is_failure:
            assert case.line_no is not None  # line_no raises when the line is not in the log
    assert problems == []


def test_class_map_names_only_real_signatures():
    ids = set(default_library().by_id)
    unknown = sorted(
        f"{cls}: {sid}" for cls, allowed in class_map().items() for sid in allowed or () if sid not in ids
    )
    assert unknown == []


def test_class_map_has_no_unused_classes():
    # first-sight batches are graded with the same map (bench/accuracy.py --batch), so their
    # classes count as used too
    first_sight = tuple(sorted(cases_module.FIRST_SIGHT.glob("*/labels-*.yaml")))
    used = {c.expected_class for c in (*CASES, *load_cases(first_sight))}
    assert sorted(set(class_map()) - used) == []


def test_embedding_prefix_offers_no_competing_line():
    # Any hit here, even a benign one, could win over the excerpt's own line.
    findings = find_all([Source.from_bytes("prefix.log", healthy_prefix())])
    assert [(f.signature_id, f.line, f.text[:120]) for f in findings] == []


def test_embedding_keeps_the_excerpt_lines_where_the_offset_says():
    case = next(c for c in CASES if c.is_failure)
    embedded = embed(case.data)
    lines = embedded.data.split(b"\n")
    assert case.line_no is not None and case.initiating_line is not None
    assert case.initiating_line.encode() in lines[embedded.offset + case.line_no - 1]
    assert embedded.offset >= 5000


def test_a_batch_is_read_from_its_corpus_folder_or_from_first_sight(tmp_path, monkeypatch):
    assert [p.parent.name for p in batch_label_files("extra3b")] == ["extra3b"]
    batch = tmp_path / "b1"
    batch.mkdir()
    (batch / "labels-b1.yaml").write_text("[]\n", encoding="utf-8")
    monkeypatch.setattr(cases_module, "FIRST_SIGHT", tmp_path)
    assert batch_label_files("b1") == [batch / "labels-b1.yaml"]
    with pytest.raises(FileNotFoundError):
        batch_label_files("no-such-batch")
