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
