"""`denpex watch` keeps hits, not text: its memory stays flat while the log grows.

The full 1 GB run is ``python bench/watch.py``; this test appends 96 MB, enough that a watch
keeping lines (or an unbounded list of hits) would grow by tens of MB past its warm-up.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.watch_rss import follow_and_measure

MB = 1 << 20
APPENDED_MB = 96
WARM = 16 * MB  # read by then: the library compiled, the engine's allowances mostly filled
FLAT = 24 * MB  # RSS growth allowed over the following 80 MB (allocator noise, held bytes)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RSS from /proc")
def test_memory_stays_flat_while_the_log_grows(tmp_path: Path) -> None:
    m = follow_and_measure(tmp_path, APPENDED_MB)
    assert m.final["event"] == "final"
    assert m.final["bytes_read"] == APPENDED_MB * MB  # every byte read, once
    assert m.final["status"] == "degraded"  # the recompile warnings: the run kept going with them
    assert (
        'denpex_watch_signature_hits_total{role="initiating",signature="dynamo-recompile-limit"}' in m.metrics
    )
    growth = m.growth_after(WARM)
    assert growth < FLAT, (
        f"RSS grew {growth / MB:.0f} MB while {(APPENDED_MB * MB - WARM) / MB:.0f} MB were read"
    )
