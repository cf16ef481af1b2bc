"""Counting newlines for exact line numbers: ``bytes.count``, or numpy once an input is large.

Every byte of a text is counted once (the lines before each hit, then the rest of its chunk), so
on a large log this is a pass of its own. numpy's vectorised compare counts a 1 MB chunk in
~0.15-0.2 ms against ``bytes.count``'s ~0.5-0.9 ms, but importing it costs ~0.2 s of CPU: in a
whole diagnosis the two broke even at 256 MB (1.31 s each, medians of three), and at 1 GB numpy
saved ~0.5 s. Small logs never import it.
"""

from __future__ import annotations

from typing import Any

# Bytes of one input from which numpy is imported: the measured break-even of its import.
NUMPY_FROM = 256 << 20
NUMPY_SPAN = 2 << 10  # a shorter span is counted by bytes.count (numpy costs ~2 us a call)

_numpy: Any = None


def expect(size: int) -> None:
    """An input of ``size`` bytes is about to be read (or has been, when its size is not known
    in advance): past NUMPY_FROM, newlines are counted with numpy from now on."""
    global _numpy
    if size < NUMPY_FROM or _numpy is not None:
        return
    try:
        import numpy
    except ImportError:  # numpy is a dependency; without it, bytes.count gives the same numbers
        return
    _numpy = numpy


class Counter:
    """The newlines of one chunk, counted span by span (the lines before each hit, then the rest).

    With numpy, the chunk is compared with ``\\n`` once (~0.15 ms per MB) on the first span that
    needs it, and each span is a count over that mask (~2 us): a chunk cut into spans by its hits
    costs about what counting it whole does.
    """

    __slots__ = ("data", "mask")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.mask: Any = None

    def count(self, start: int = 0, end: int | None = None) -> int:
        """Newlines in ``data[start:end]`` (``start`` and ``end`` within ``data``, or ``end`` None)."""
        data = self.data
        stop = len(data) if end is None else min(end, len(data))
        np = _numpy
        if np is None or stop - start < NUMPY_SPAN:
            return data.count(b"\n", start, stop)
        if self.mask is None:
            self.mask = np.frombuffer(data, np.uint8) == 10
        return int(np.count_nonzero(self.mask[start:stop]))


def using_numpy() -> bool:
    return _numpy is not None
