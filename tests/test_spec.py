"""Loading signature YAML: every problem at once, with file, field and reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signatures.library import Library
from signatures.loader import load_signatures
from signatures.patterns import check_pattern
from signatures.spec import SignatureError
from tests.sigfactory import signature_doc, write_library


def _problems(root: Path) -> list[str]:
    with pytest.raises(SignatureError) as info:
        load_signatures(root)
    return [str(p) for p in info.value.problems]


def test_a_valid_library_loads(tmp_path: Path) -> None:
    write_library(tmp_path, [signature_doc("one"), signature_doc("two", category="storage")])
    assert [s.id for s in load_signatures(tmp_path)] == ["one", "two"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    bad = signature_doc("bad-one", surprise="x")
    bad["fingerprints"] = [
        {"regex": "([a-z]+)+ boom"},
        {"regex": "(unclosed"},
        {"literal": "x", "regex": "y"},
    ]
    bad["role"] = "culprit"
    missing = signature_doc("missing-fix")
    del missing["fix"]
    write_library(tmp_path, [bad, missing])
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "broken.yaml").write_text("id: [unclosed\n")
    problems = _problems(tmp_path)
    text = "\n".join(problems)
    assert "bad-one.yaml: surprise: unknown field" in text
    assert "bad-one.yaml: fingerprints[0].regex: nested unbounded repeats" in text
    assert "bad-one.yaml: fingerprints[1].regex: invalid regex" in text
    assert "bad-one.yaml: fingerprints[2]: needs exactly one of 'literal' or 'regex'" in text
    assert "bad-one.yaml: role: one of" in text
    assert "missing-fix.yaml: fix: missing required field" in text
    assert "broken.yaml: (yaml): not valid YAML" in text


def test_duplicate_ids_and_shared_fingerprints_are_refused(tmp_path: Path) -> None:
    write_library(tmp_path, [signature_doc("dup")])
    other = signature_doc("dup", category="storage")
    copycat = signature_doc("copycat", category="storage", fingerprints=[{"literal": "dup happened"}])
    write_library(tmp_path, [other, copycat])
    text = "\n".join(_problems(tmp_path))
    assert "duplicate id 'dup'" in text
    assert "copycat.yaml: fingerprints[0]: same fingerprint as signature 'dup'" in text


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "evil.yaml").write_text("id: !!python/object/apply:os.system ['echo pwned']\n")
    assert any("not valid YAML" in p for p in _problems(tmp_path))


def test_a_key_given_twice_is_refused_with_its_lines(tmp_path: Path) -> None:
    write_library(tmp_path, [signature_doc("twice")])
    path = tmp_path / "distributed" / "twice.yaml"
    text = path.read_text(encoding="utf-8")
    fingerprint = "- literal: twice happened\n"
    assert fingerprint in text
    # yaml.safe_load would keep only the second note; the loader names the key and both lines
    path.write_text(
        text.replace(fingerprint, fingerprint + "  note: first\n  note: second\n"), encoding="utf-8"
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    first = lines.index("  note: first") + 1
    (problem,) = _problems(tmp_path)
    assert "distributed/twice.yaml: (yaml): not valid YAML" in problem
    assert f"found duplicate key 'note' (first on line {first})" in problem
    assert f"line {first + 1}" in problem


def test_equal_keys_in_different_mappings_still_load(tmp_path: Path) -> None:
    doc = signature_doc("two-notes", fingerprints=[{"literal": "a went wrong", "note": "x"}])
    doc["excludes"] = [{"literal": "a went fine", "note": "x"}]
    write_library(tmp_path, [doc])
    assert [s.id for s in load_signatures(tmp_path)] == ["two-notes"]


def test_sample_line_must_be_in_its_log(tmp_path: Path) -> None:
    doc = signature_doc("one")
    doc["samples"]["positive"][0]["line"] = "not in the log"
    write_library(tmp_path, [doc])
    assert any("is not a substring" in p for p in _problems(tmp_path))


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(?=foo)bar", "look-around"),
        (r"(a)\1", "back-references"),
        (r"(?i)cuda", "inline flags"),
        (r"foo\sbar", r"\s"),
        (r"[^)]+ end", "negated class"),
        (r"(a*)*b", "nested unbounded"),
        (r"x*", "empty string"),
    ],
)
def test_patterns_outside_the_shared_subset_are_refused(pattern: str, reason: str) -> None:
    problem = check_pattern(pattern)
    assert problem is not None and reason in problem.reason


@pytest.mark.parametrize(
    "pattern", [r"NCCL error in: [^\n]+", r"exitcode: -?[0-9]+", r"^Unsupported: ", r"a{2,5}b"]
)
def test_patterns_inside_the_subset_are_accepted(pattern: str) -> None:
    assert check_pattern(pattern) is None


def test_scanner_refusals_name_the_file_and_field(tmp_path: Path) -> None:
    # Hyperscan and RE2 reject some constructs re accepts; a huge bounded repeat is one for RE2.
    doc = signature_doc("huge", fingerprints=[{"regex": "a{1,5000}b"}])
    write_library(tmp_path, [doc])
    for backend in ("re2",):
        with pytest.raises(SignatureError) as info:
            Library.load(tmp_path, backend=backend)
        assert "huge.yaml: fingerprints[0]" in str(info.value)


def test_parsed_documents_are_cached_and_a_changed_file_is_read_again(tmp_path: Path) -> None:
    root = write_library(tmp_path / "lib", [signature_doc("one")])
    first = load_signatures(root)
    cached = list(Path(os.environ["DENPEX_CACHE_DIR"]).glob("library-*.json"))
    assert cached, "the parsed library was not cached"
    assert load_signatures(root) == first
    doc = signature_doc("one", title="A new title for one")
    write_library(root, [doc])
    assert load_signatures(root)[0].title == "A new title for one"


def test_a_corrupt_cache_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DENPEX_CACHE_DIR", str(tmp_path / "cache"))
    root = write_library(tmp_path / "lib", [signature_doc("one")])
    load_signatures(root)
    for cache in (tmp_path / "cache").glob("library-*.json"):
        cache.write_text("{not json")
    assert [s.id for s in load_signatures(root)] == ["one"]
