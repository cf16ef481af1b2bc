"""Newline counting (signatures/newlines.py): numpy on large inputs, bytes.count on small ones,
the same line numbers either way."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signatures import newlines
from signatures.chunks import Budget, Limits, text_chunks
from signatures.engine import default_library
from signatures.hits import read_text
from signatures.library import Library

pytest.importorskip("numpy")

ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
LINES = [
    "step 1 loss 2.0",
    "",
    "[rank3]: " + ERROR,
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in main',
    "ValueError: bad shape",
    "=== rank 2 output ===",
    "x" * 3000,
    "\r 40%|####      | 40/100\r 60%|######    | 60/100",
]


@pytest.fixture(scope="module")
def library() -> Library:
    return default_library()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([b"\n", b"a", b"\r", b"\n\n", b"xyz" * 50]), max_size=300),
    st.lists(st.integers(min_value=0, max_value=5000), max_size=12),
)
def test_span_counts_equal_bytes_count(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    import numpy

    marks = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    spans = list(itertools.pairwise(marks))
    saved, saved_span = newlines._numpy, newlines.NUMPY_SPAN
    newlines._numpy, newlines.NUMPY_SPAN = numpy, 1
    try:
        counter = newlines.Counter(data)
        got = [counter.count(a, b) for a, b in spans]
    finally:
        newlines._numpy, newlines.NUMPY_SPAN = saved, saved_span
    assert got == [data.count(b"\n", a, b) for a, b in spans]
    assert sum(got) == data.count(b"\n")


def _read(library: Library, text: bytes, chunk_size: int) -> tuple[int, list[tuple[int, int, str]]]:
    limits = Limits(chunk_size=chunk_size, max_line=max(chunk_size, 4096))
    blocks = iter([text[i : i + 700] for i in range(0, len(text), 700)])
    chunks = text_chunks("x.log", blocks, limits, Budget(limits))
    scan = read_text(library, "x.log", 0, chunks)
    return scan.lines, sorted((h.line, h.matcher.pid, h.text) for h in scan.hits)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(LINES), min_size=1, max_size=80),
    st.sampled_from([256, 1024, 4096, 1 << 20]),
)
def test_line_numbers_are_the_same_with_numpy_and_bytes_count(
    library: Library, lines: list[str], chunk_size: int
) -> None:
    text = ("\n".join(lines) + "\n").encode()
    import numpy

    expected = _read(library, text, chunk_size)
    saved, saved_span = newlines._numpy, newlines.NUMPY_SPAN
    newlines._numpy, newlines.NUMPY_SPAN = numpy, 1
    try:
        got = _read(library, text, chunk_size)
    finally:
        newlines._numpy, newlines.NUMPY_SPAN = saved, saved_span
    assert got == expected
    assert got[0] == text.count(b"\n")
    # Independently of either path: the error's hits sit on the lines that hold it, the first one too.
    errors = [i + 1 for i, line in enumerate(lines) if line == LINES[2]]
    found = {n for n, _, t in got[1] if ERROR in t}
    assert found <= set(errors)
    assert (min(errors) in found) if errors else not found


def test_numpy_is_taken_up_only_past_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(newlines, "_numpy", None)
    newlines.expect(newlines.NUMPY_FROM - 1)
    assert not newlines.using_numpy()
    newlines.expect(newlines.NUMPY_FROM)
    assert newlines.using_numpy()
