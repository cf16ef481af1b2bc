"""docs/operations.md names the test that holds each guarantee: those tests must exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUARANTEES = ("Masking at ingress", "503 + Retry-After", "Exactly one parent", "Daily allowances")


def _section(doc: str, title: str) -> str:
    start = doc.index(f"## {title}\n")
    end = doc.find("\n## ", start + 1)
    return doc[start : end if end >= 0 else None]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_guarantee_names_tests_that_exist() -> None:
    section = _section((ROOT / "docs" / "operations.md").read_text(encoding="utf-8"), "Guarantees")
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= 7
    for title in (*GUARANTEES, "Allow-list ports", "Decompression bounds", "Dead letters"):
        assert any(row.startswith(f"| {title}") for row in rows), f"no row for {title!r}"
    for row in rows:
        held_by = row.rstrip(" |").rsplit(" | ", 1)[-1]
        files = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", held_by)
        assert files, f"this guarantee names no test: {row[:60]}"
        for file, name in files:
            path = ROOT / file
            assert path.is_file(), f"{file} does not exist"
            if name:
                assert name in _test_names(path), f"{file} has no test {name}"
        for name in re.findall(r"`(test_\w+)`", held_by):
            assert any(name in _test_names(ROOT / f) for f, _ in files), f"no test {name}"
