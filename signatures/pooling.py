"""Whether a process pool pays for an input: decided before the pool's module is loaded.

Kept apart from ``parallel`` so a diagnosis of a small log, the common case, decides without
importing the pool machinery at all.
"""

from __future__ import annotations

from signatures.sources import Source

RANGE_MIN = 64 << 20  # a range smaller than this costs more to hand off than it saves
POOL_MIN = 32 << 20  # below this much input a pool's start-up is not worth it


def worth_a_pool(sources: list[Source], processes: int) -> bool:
    """Whether reading these sources in ``processes`` processes can beat one process."""
    if processes < 2 or not sources or any(s.path is None for s in sources):
        return False
    sizes = [size_on_disk(s) for s in sources]
    return sum(sizes) >= POOL_MIN and (len(sources) > 1 or sizes[0] >= 2 * RANGE_MIN)


def size_on_disk(source: Source) -> int:
    """The file's size, 0 when it has no path or cannot be stat'ed."""
    try:
        return source.path.stat().st_size if source.path else 0
    except OSError:
        return 0
