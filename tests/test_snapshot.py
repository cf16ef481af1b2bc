"""The validated library's snapshot (signatures/snapshot.py): a read-only cache falls back to the
one built into the package, and a changed library is never served from a stale snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import diagnose, loader, snapshot
from signatures.library import Library
from signatures.loader import LIBRARY_DIR, library_files, load_signatures, read_signatures
from signatures.scanbuild import build_snapshot
from tests.sigfactory import signature_doc, write_library

EXAMPLE = Path(__file__).resolve().parent.parent / "signatures" / "examples" / "llama-64gpu-triton.log"


def unwritable_cache(tmp_path: Path) -> Path:
    """A cache folder below a plain file: no process, root included, can create it."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder's parent should be")
    return blocker / "denpex"


def parsing_forbidden(root: Path, files: list[tuple[str, Path]]) -> list[object]:
    raise AssertionError(f"the YAML library under {root} was parsed instead of served from a snapshot")


def test_a_read_only_cache_serves_the_packaged_library_with_the_same_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = Library(read_signatures(LIBRARY_DIR, library_files(LIBRARY_DIR)))
    expected = diagnose([EXAMPLE], library=fresh).to_dict()
    packaged = build_snapshot(tmp_path / "compiled")  # what the build step puts into the package
    monkeypatch.setattr(snapshot, "PACKAGED", packaged.parent)
    cache = unwritable_cache(tmp_path)
    monkeypatch.setenv("DENPEX_CACHE_DIR", str(cache))
    monkeypatch.setattr(loader, "read_signatures", parsing_forbidden)

    served = Library(load_signatures())

    assert diagnose([EXAMPLE], library=served).to_dict() == expected
    assert [s.path for s in served.signatures] == [s.path for s in fresh.signatures]
    assert not cache.exists()


def test_a_cold_writable_cache_is_filled_from_the_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "PACKAGED", tmp_path / "nothing-packaged")
    monkeypatch.setenv("DENPEX_CACHE_DIR", str(tmp_path / "cache"))
    root = write_library(tmp_path / "lib", [signature_doc("one"), signature_doc("two")])
    first = load_signatures(root)
    kept = list((tmp_path / "cache").glob("library-*.pickle"))
    assert len(kept) == 1
    monkeypatch.setattr(loader, "read_signatures", parsing_forbidden)
    assert load_signatures(root) == first


def test_a_changed_library_is_not_served_from_the_packaged_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_library(tmp_path / "lib", [signature_doc("one")])
    key = snapshot.snapshot_key(library_files(root))
    assert key is not None
    snapshot.save_snapshot(key, read_signatures(root, library_files(root)), tmp_path / "compiled")
    monkeypatch.setattr(snapshot, "PACKAGED", tmp_path / "compiled")
    monkeypatch.setenv("DENPEX_CACHE_DIR", str(unwritable_cache(tmp_path)))
    assert load_signatures(root)[0].title == "Title of one"

    write_library(root, [signature_doc("one", title="A new title for one")])

    assert load_signatures(root)[0].title == "A new title for one"


def test_a_foreign_pickle_is_not_taken_for_a_snapshot(tmp_path: Path) -> None:
    root = write_library(tmp_path / "lib", [signature_doc("one")])
    key = snapshot.snapshot_key(library_files(root))
    assert key is not None
    snapshot.save_snapshot(key, [], tmp_path / "cache")
    (tmp_path / "cache" / key).write_bytes(b"\x80\x05K\x01.")  # a pickled int, not a list of signatures
    assert snapshot.load_snapshot(key, [tmp_path / "cache"]) is None
