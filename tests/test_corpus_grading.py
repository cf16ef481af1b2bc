"""The corpus grading: the exact line, and beside it the near figure (another line of one report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import Source, diagnose
from tests.corpus.cases import NEAR_LINES, Case, grade

LOG = "".join(f"step {n} loss 2.{n}\n" for n in range(1, 9)) + (
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
)
FAILING = LOG.count("\n")  # the engine's initiating line


def case(tmp_path: Path, label: str) -> Case:
    log = tmp_path / "case.log"
    log.write_text(LOG)
    return Case("t-1", log, "other:test", label, None, "test", "test")


@pytest.mark.parametrize(
    ("label", "found", "near"),
    [
        ("an illegal memory access", True, True),
        (f"step {FAILING - NEAR_LINES} loss", False, True),
        (f"step {FAILING - NEAR_LINES - 1} loss", False, False),
    ],
)
def test_near_counts_lines_of_the_same_report_but_never_as_found(
    tmp_path: Path, label: str, found: bool, near: bool
) -> None:
    c = case(tmp_path, label)
    g = grade(c, "raw", diagnose([Source.from_bytes("case.log", c.data)]))
    assert g.got["line"] == FAILING
    assert (g.line_found, g.line_near) == (found, near)
