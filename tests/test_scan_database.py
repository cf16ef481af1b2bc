"""The compiled scanning database: cached per user, else built into the package (signatures/scandb.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import scandb
from signatures.scan import HyperscanScanner, ScanPattern
from signatures.scanbuild import build

pytest.importorskip("hyperscan")

PATTERNS = [ScanPattern(0, "kernel-fault happened", False), ScanPattern(1, "peer[ \t]+timeout", True)]


def test_a_read_only_cache_falls_back_to_the_packaged_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = tmp_path / "compiled"
    monkeypatch.setattr(scandb, "PACKAGED", packaged)
    monkeypatch.setenv("DENPEX_CACHE_DIR", "")  # no cache: what a read-only home amounts to
    first = HyperscanScanner(PATTERNS)
    assert scandb.load_database(first.key) is None  # nothing kept anywhere yet
    scandb.save_database(first.key, first.dump(), packaged)  # what the build step does
    assert scandb.load_database(first.key) == first.dump()
    again = HyperscanScanner(PATTERNS)
    assert again.scan(b"x\nPEER  TIMEOUT\nkernel-fault happened\n") == {0, 1}


def test_a_writable_cache_is_filled_and_preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scandb, "PACKAGED", tmp_path / "none")
    monkeypatch.setenv("DENPEX_CACHE_DIR", str(tmp_path / "cache"))
    scanner = HyperscanScanner(PATTERNS)
    assert (tmp_path / "cache" / scanner.key).read_bytes() == scanner.dump()


def test_the_build_step_writes_the_bundled_librarys_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DENPEX_CACHE_DIR", "")
    built = build(tmp_path / "compiled")
    assert built is not None and built.exists() and built.stat().st_size > 1000
    assert built.name.startswith("hyperscan-")
