"""Hyperscan, RE2 and plain re scanners give the same diagnosis (the reference semantics)."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import diagnose
from signatures.library import Library
from signatures.scan import ScanPattern, available_backends, make_scanner

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "signatures" / "examples" / "llama-64gpu-triton.log"
LOGS = [*sorted((ROOT / "tests" / "corpus").rglob("*.log")), EXAMPLE]


def test_fast_backends_are_installed_here() -> None:
    # CI installs both wheels; the fallback order is what a user without them gets.
    assert available_backends() == ["hyperscan", "re2", "python"]


@pytest.mark.parametrize("backend", ["hyperscan", "re2", "python"])
def test_scanners_report_the_same_pattern_ids(backend: str) -> None:
    patterns = [
        ScanPattern(0, "CUDA out of memory", False),
        ScanPattern(1, "nccl error", True),
        ScanPattern(2, r"exitcode: -?[0-9]+", False),
        ScanPattern(3, "never present", False),
    ]
    chunk = b"step 1\nRuntimeError: CUDA out of memory\nNCCL ERROR in x\nfailed (exitcode: -9)\n"
    assert make_scanner(patterns, backend).scan(chunk) == {0, 1, 2}


@pytest.fixture(scope="module")
def libraries() -> dict[str, Library]:
    return {name: Library.load(backend=name) for name in ("hyperscan", "re2", "python")}


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_backend_gives_the_same_diagnosis(libraries: dict[str, Library], log: Path) -> None:
    results = {name: diagnose([log], library=lib).to_dict() for name, lib in libraries.items()}
    assert results["re2"] == results["hyperscan"]
    assert results["python"] == results["hyperscan"]
