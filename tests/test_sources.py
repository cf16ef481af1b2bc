"""Opening inputs: plain, .gz, .zip, streams; and the clear errors for bad ones."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import pytest

from signatures import (
    BinaryInput,
    CorruptArchive,
    InputTooLarge,
    Source,
    Status,
    UnreadableInput,
    diagnose,
)
from signatures.library import Library
from signatures.sources import PROBE, READ_SIZE, Budget, Limits, file_blocks, open_texts, text_chunks
from tests.sigfactory import build_library, signature_doc

LOG = "step 1\nstep 2\n[rank4]: kernel-fault happened\nstep 3\n"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def _read(source: Source, limits: Limits | None = None) -> list[tuple[str, bytes]]:
    return [(name, b"".join(chunks)) for name, chunks in open_texts(source, limits or Limits())]


def test_plain_gzip_and_zip_give_the_same_answer(library: Library, tmp_path: Path) -> None:
    plain = tmp_path / "a.log"
    plain.write_text(LOG)
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(gzip.compress(LOG.encode()))
    zp = tmp_path / "logs.zip"
    with zipfile.ZipFile(zp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("rank0.log", "step 1\n")
        z.writestr("rank4.log", LOG)
    answers = [diagnose([p], library=library) for p in (plain, gz, zp)]
    for d in answers:
        assert d.signature and d.signature.id == "kernel-fault"
        assert d.initiating and d.initiating.line == 3 and d.initiating.rank == 4
    assert answers[2].initiating and answers[2].initiating.file.endswith("logs.zip:rank4.log")


def test_concatenated_gzip_members_are_all_read(tmp_path: Path) -> None:
    data = gzip.compress(b"first\n") + gzip.compress(b"second\n")
    texts = _read(Source.from_bytes("x.gz", data))
    assert texts == [("x.gz", b"first\nsecond\n")]


def test_stream_input(library: Library) -> None:
    d = diagnose([Source.from_stream("<stdin>", io.BytesIO(LOG.encode()))], library=library)
    assert d.initiating and d.initiating.file == "<stdin>"


def test_missing_file_is_a_clear_error(library: Library, tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="no such file"):
        diagnose([tmp_path / "nope.log"], library=library)


def test_binary_file_is_refused(library: Library) -> None:
    with pytest.raises(BinaryInput, match="binary"):
        diagnose([Source.from_bytes("model.pt", b"PK\x00\x00" * 10 + bytes(range(256)))], library=library)


def test_a_progress_bar_redrawn_with_backspaces_is_text(library: Library) -> None:
    # Keras writes its bar, then as many backspaces as it is long, to draw the next one
    bar = "1/9 [==>.......] - ETA: 3s - loss: 0.41"
    log = ("\b" * len(bar) + bar) * 200 + "\nEpoch 2/9\n"
    assert diagnose([Source.from_text("train.log", log)], library=library).status is Status.CLEAN
    # other control bytes as thick are still no text
    with pytest.raises(BinaryInput, match="binary"):
        diagnose([Source.from_bytes("x.bin", ("\x07" * len(bar) + bar).encode() * 200)], library=library)


def test_corrupt_gzip_is_refused(library: Library) -> None:
    with pytest.raises(CorruptArchive, match="gzip"):
        diagnose([Source.from_bytes("x.gz", b"\x1f\x8b\x08\x00garbage-garbage-garbage")], library=library)


def test_truncated_gzip_is_refused(library: Library) -> None:
    data = gzip.compress(("line\n" * 10000).encode())
    with pytest.raises(CorruptArchive, match="truncated"):
        diagnose([Source.from_bytes("x.gz", data[: len(data) // 2])], library=library)


def test_corrupt_zip_is_refused(library: Library) -> None:
    with pytest.raises(CorruptArchive, match="zip"):
        diagnose([Source.from_bytes("x.zip", b"PK\x03\x04" + b"\x01" * 64)], library=library)


def test_gzip_bomb_is_refused_by_ratio() -> None:
    bomb = gzip.compress(b"\n" * (8 << 20), compresslevel=9)
    limits = Limits(ratio_floor=1 << 20, max_archive_ratio=100)
    with pytest.raises(InputTooLarge, match="zip bomb"):
        _read(Source.from_bytes("bomb.gz", bomb), limits)


def test_zip_bomb_is_refused_by_declared_size(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.log", "x\n" * (2 << 20))
    with pytest.raises(InputTooLarge, match="expands"):
        _read(Source.from_path(path), Limits(max_bytes=1 << 20))


def test_total_size_bound_across_files() -> None:
    limits = Limits(max_bytes=1000)
    with pytest.raises(InputTooLarge, match="limit"):
        _read(Source.from_bytes("big.log", b"x" * 999 + b"\n" + b"y" * 100 + b"\n"), limits)


def test_chunks_end_at_newlines_and_keep_every_byte() -> None:
    data = b"".join(b"line %d %s\n" % (i, b"z" * (i % 97)) for i in range(50000))
    limits = Limits(chunk_size=64 << 10)
    pieces = list(next(iter(open_texts(Source.from_bytes("x.log", data), limits)))[1])
    assert len(pieces) > 1
    assert all(p.endswith(b"\n") for p in pieces)
    assert b"".join(pieces) == data


def test_a_line_longer_than_the_bound_is_cut_not_held() -> None:
    data = b"a" * 5000 + b"\nend\n"
    limits = Limits(max_line=1024, chunk_size=1024)
    blocks = iter([data[i : i + 500] for i in range(0, len(data), 500)])
    pieces = list(text_chunks("x.log", blocks, limits, Budget(limits)))
    assert len(pieces) > 2 and max(len(p) for p in pieces) < 2048
    # A cut inside a line repeats the end of one piece at the start of the next (``overlap``).
    kept = b"".join(p[getattr(p, "overlap", 0) :] for p in pieces)
    assert kept == data
    assert any(getattr(p, "overlap", 0) for p in pieces)


def test_line_numbers_survive_chunk_boundaries(library: Library) -> None:
    filler = "".join(f"healthy step {i}\n" for i in range(200000))
    d = diagnose([Source.from_text("big.log", filler + "kernel-fault happened\n")], library=library)
    assert d.initiating and d.initiating.line == 200001
    assert d.initiating.before and d.initiating.before[-1] == "healthy step 199999"
    assert d.lines_read == 200001


def test_carriage_return_progress_bars_do_not_hide_a_failure(library: Library) -> None:
    bar = "".join(f"\rEpoch 1: {i}%|####| {i}/100" for i in range(100))
    d = diagnose([Source.from_text("x.log", bar + "\rkernel-fault happened\n")], library=library)
    assert d.status is Status.FAILURE
    assert d.initiating and d.initiating.line == 1


def test_windows_line_endings_change_nothing(tmp_path: Path) -> None:
    lib = build_library(
        tmp_path,
        [signature_doc("ctrl-c", category="scheduler", fingerprints=[{"regex": "^KeyboardInterrupt$"}])],
    )
    text = "step 1\r\nstep 2\r\nKeyboardInterrupt\r\n"
    d = diagnose([Source.from_text("win.log", text)], library=lib)
    assert d.signature and d.signature.id == "ctrl-c"
    assert d.initiating and d.initiating.line == 3 and d.initiating.text == "KeyboardInterrupt"


def test_colour_codes_inside_a_message_do_not_hide_it(library: Library) -> None:
    text = "step 1\n\x1b[1;31mkernel-fault\x1b[0m happened\nstep 2\n"
    d = diagnose([Source.from_text("colour.log", text)], library=library)
    assert d.initiating and d.initiating.line == 2 and d.initiating.text == "kernel-fault happened"


def test_zip_from_a_stream(library: Library) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("rank4.log", LOG)
    d = diagnose([Source.from_stream("<stdin>", io.BytesIO(buf.getvalue()))], library=library)
    assert d.initiating and d.initiating.file == "<stdin>:rank4.log" and d.initiating.line == 3


@pytest.mark.parametrize("start,end", [(0, None), (0, 3_000_000), (777_777, 2_500_001)])
def test_file_blocks_end_at_newlines_and_keep_every_byte(tmp_path: Path, start: int, end: int | None) -> None:
    # Lines of every length up to the probe's span and past it, so some blocks have no newline to end at.
    lines = [b"%d %s\n" % (i, b"x" * (i * 7919 % 40000)) for i in range(200)]
    data = b"".join(lines)
    path = tmp_path / "a.log"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as handle:
        blocks = list(file_blocks(handle, start, end))
    assert b"".join(blocks) == data[start:end]
    probe_span = [b for b in blocks[:-1] if b"\n" in b[-PROBE:]]
    assert probe_span and all(b.endswith(b"\n") for b in probe_span)
    assert all(len(b) <= READ_SIZE for b in blocks)
