"""The rank of a CUDA kernel's failed assertion, from the report of the process it stopped.

A kernel's `Assertion ... failed.` lines are printed by the device runtime, with no launcher tag
and no rank; the process whose kernel asserted then reports the CUDA error the assertion raised
(`CUDA error: device-side assert triggered`), and that report names its rank (`[Rank 1] NCCL
watchdog thread terminated with exception: CUDA error: device-side assert triggered`). The
assertion is that process's when the log's reports of a device-side assert, below it, all name
one and the same rank: two ranks reporting one leaves the assertion's rank unknown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.candidate import TIER_BENIGN, TIER_DOWNSTREAM, Candidate

# A kernel's assertion: the device runtime names the block and thread that failed it.
_KERNEL_ASSERT = re.compile(r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion .{1,400} failed")
REACH = 5000  # lines below the assertions within which its process's report is looked for


def is_kernel_assert(text: str) -> bool:
    return "Assertion" in text and _KERNEL_ASSERT.search(text) is not None


def is_assert_report(text: str) -> bool:
    """A process's report of the CUDA error a kernel's assertion raised."""
    return "device-side assert triggered" in text and not is_kernel_assert(text)


def reporting_rank(reports: Sequence[tuple[int, int]], line: int) -> int | None:
    """The rank the reports (line, rank) below ``line`` name, when they name one."""
    below = {rank for at, rank in reports if 0 < at - line <= REACH}
    return below.pop() if len(below) == 1 else None


LATE_REACH = 200  # lines below a report within which its kernel's assertion may be printed late


def yield_to_late_assertions(cands: list[Candidate]) -> None:
    """The device runtime prints a kernel's failed assertion when its output buffer is flushed
    (at the next synchronisation, or as the process exits), so the assertion may come below the
    report of the error it raised (`THCudaCheck FAIL ... device-side assert triggered`, its
    traceback, then `Assertion `t >= 0 && t < n_classes` failed.`): it happened first, and the
    reports above it give way."""
    asserts = [c for c in cands if c.tier < TIER_BENIGN and is_kernel_assert(c.hit.text)]
    for c in cands:
        if c.tier >= TIER_BENIGN or not is_assert_report(c.hit.text):
            continue
        if any(a.hit.file_index == c.hit.file_index and 0 < a.line - c.line <= LATE_REACH for a in asserts):
            c.tier, c.yields = max(c.tier, TIER_DOWNSTREAM), True
