"""The scanner never misses a line: under dense benign noise, at a cut, or inside a very long line.

These use the bundled library (every fingerprint, literal and regex), because the failures they
guard against come from how many patterns match noise, not from any one signature.
"""

from __future__ import annotations

import pytest

from signatures import diagnose
from signatures.diagnosis import Status
from signatures.engine import default_library
from signatures.library import Library
from signatures.sources import Limits, Source

ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
# No signature knows it: only the engine's generic exception pattern can find it.
GENERIC = "WidgetCacheError: the widget cache lost shard 7"


@pytest.fixture(scope="module")
def library() -> Library:
    return default_library()


@pytest.mark.parametrize("noise_lines", [3000, 20000])
def test_benign_mentions_do_not_hide_a_real_error_in_the_same_chunk(
    library: Library, noise_lines: int
) -> None:
    # Every noise line names an exception mid-line, which the scanner flags and the verifier rejects.
    noise = "".join(
        f"[rank{i % 8}]: step {i} check ValueError: none, continuing\n" for i in range(noise_lines)
    )
    text = noise + f"[rank3]: {GENERIC}\n" + "[rank0]: step done\n"
    d = diagnose([Source.from_text("noisy.log", text)], library=library)
    assert d.status is Status.UNRECOGNIZED
    assert d.initiating is not None
    assert GENERIC in d.initiating.text
    assert d.initiating.line == noise_lines + 1


def test_identical_noise_lines_still_let_the_error_through(library: Library) -> None:
    noise = "worker says: check ValueError: none, continuing\n" * 50000
    d = diagnose([Source.from_text("same.log", noise + GENERIC + "\n")], library=library)
    assert d.initiating is not None and GENERIC in d.initiating.text
    assert d.initiating.line == 50001


def _progress(n: int) -> str:
    return "".join(
        f"\rEpoch 1: {i % 100:3d}%|{'#' * (i % 10):<10}| {i}/100000 [00:01<00:10]" for i in range(n)
    )


@pytest.mark.parametrize("max_line", [1 << 20, 4 << 20])
@pytest.mark.parametrize("shift", [-40, -1, 0, 5, 60])
def test_an_error_across_a_cut_in_text_without_newlines_is_found(
    library: Library, max_line: int, shift: int
) -> None:
    # \r-only progress output: no newline for megabytes, so the reader has to cut inside the line.
    bar = _progress(max_line // 40).encode()
    cut = max_line  # where a reader without overlap cuts a newline-free text
    head = bar[: cut + shift - len(ERROR) // 2]
    text = head + b"\r" + ERROR.encode() + _progress(3000).encode() + b"\n"
    limits = Limits(max_line=max_line)
    d = diagnose([Source.from_bytes("bar.log", text)], library=library, limits=limits)
    assert d.status is Status.FAILURE, f"missed the error across a cut at {cut}"
    assert d.initiating is not None and ERROR in d.initiating.text
    assert d.initiating.line == 1


@pytest.mark.parametrize("max_line", [4 << 20, 256 << 10])
@pytest.mark.parametrize("at", [0, 500_000, (1 << 20) - 30, (1 << 20) + 10, 1_999_000])
def test_a_long_line_shows_the_part_that_matched(library: Library, at: int, max_line: int) -> None:
    # 256 KB: the 2 MB line holds no \r, so it is cut with an overlap (one cut falls at 1 MiB).
    filler = "x=1, " * 400_000  # a 2 MB line
    line = filler[:at] + ERROR + " " + filler[at:]
    d = diagnose(
        [Source.from_text("long.log", line + "\nend\n")], library=library, limits=Limits(max_line=max_line)
    )
    assert d.initiating is not None
    assert ERROR in d.initiating.text
    assert len(d.initiating.text) <= 2100
    assert d.initiating.line == 1
    assert d.lines_read == 2
    assert d.bytes_read == len(line) + 5


@pytest.mark.parametrize("at", [0, 500, 999])
def test_a_progress_line_of_many_segments_names_the_segment_that_failed(library: Library, at: int) -> None:
    segments = [f"Epoch 1: {i % 100:3d}%|####| {i}/1000 [00:01<00:10]" for i in range(1000)]
    segments.insert(at, f"[rank3]: {ERROR}")
    d = diagnose([Source.from_text("bar.log", "\r".join(segments) + "\nend\n")], library=library)
    assert d.initiating is not None
    assert d.initiating.text == f"[rank3]: {ERROR}"
    assert d.initiating.line == 1
