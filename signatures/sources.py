"""Opening logs: plain text, .gz, .zip (each member a file) and streams, in bounded memory.

Every input becomes one or more *texts*, each a name and an iterator of newline-aligned chunks
of bytes. Decompression is streamed, and what an archive expands to is bounded so a zip bomb
fails fast with a clear message instead of filling memory or disk.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from signatures.errors import BinaryInput, CorruptArchive, InputTooLarge, UnreadableInput
from signatures.flight_recorder.intake import divert

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
ZIP_EMPTY = b"PK\x05\x06"
READ_SIZE = 1 << 20
SPOOL_IN_MEMORY = 8 << 20  # a zip read from a stream is held in memory up to this, then on disk


@dataclass(frozen=True)
class Limits:
    """Bounds on what one diagnosis reads."""

    max_bytes: int = 64 << 30  # total text bytes, after decompression
    max_archive_ratio: int = 1000  # expanded / compressed, checked past ratio_floor bytes
    ratio_floor: int = 256 << 20
    max_members: int = 2048
    chunk_size: int = 1 << 20
    max_line: int = 4 << 20  # a longer "line" is cut, so one line cannot hold the whole file


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Source:
    """One input: a path, bytes in memory, or an open binary stream."""

    name: str
    path: Path | None = None
    data: bytes | None = None
    stream: BinaryIO | None = None

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> Source:
        return cls(name=os.fspath(path), path=Path(path))

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Source:
        return cls(name=name, data=data)

    @classmethod
    def from_text(cls, name: str, text: str) -> Source:
        return cls(name=name, data=text.encode("utf-8"))

    @classmethod
    def from_stream(cls, name: str, stream: BinaryIO) -> Source:
        return cls(name=name, stream=stream)


def as_source(item: Source | str | os.PathLike[str]) -> Source:
    return item if isinstance(item, Source) else Source.from_path(item)


class Budget:
    """Counts text bytes across all of one diagnosis' inputs."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.used = 0

    def take(self, n: int, name: str) -> None:
        self.used += n
        if self.used > self.limits.max_bytes:
            raise InputTooLarge(
                f"{name}: the logs add up to more than {_size(self.limits.max_bytes)}, the limit"
            )


def open_texts(
    source: Source, limits: Limits, budget: Budget | None = None
) -> Iterator[tuple[str, Iterator[bytes]]]:
    """Yield (name, chunks) for each text inside ``source``; raise InputError subclasses."""
    budget = budget or Budget(limits)
    raw = _raw_blocks(source)
    head, raw = _peek(raw)
    if head.startswith(ZIP_MAGIC) or head.startswith(ZIP_EMPTY):
        yield from _zip_texts(source, head, raw, limits, budget)
        return
    if head.startswith(GZIP_MAGIC):
        compressed = _Counter(raw)
        yield (
            source.name,
            _text_or_dump(source.name, _gunzip(source.name, compressed, limits), limits, budget, compressed),
        )
        return
    yield source.name, _text_or_dump(source.name, raw, limits, budget, None)


def _text_or_dump(
    name: str,
    blocks: Iterator[bytes],
    limits: Limits,
    budget: Budget,
    compressed: _Counter | _FixedCompressed | None,
) -> Iterator[bytes]:
    """Text chunks; or, for a flight-recorder dump, its bytes held for signatures.flight_recorder."""
    dump, blocks = divert(name, blocks, budget.take)
    return dump if dump is not None else text_chunks(name, blocks, limits, budget, compressed)


def _raw_blocks(source: Source) -> Iterator[bytes]:
    if source.data is not None:
        data = source.data
        for i in range(0, len(data), READ_SIZE):
            yield data[i : i + READ_SIZE]
        return
    if source.stream is not None:
        while block := source.stream.read(READ_SIZE):
            yield block
        return
    assert source.path is not None
    try:
        handle = open(source.path, "rb")  # noqa: SIM115 - closed in finally; generator-owned
    except FileNotFoundError:
        raise UnreadableInput(f"{source.name}: no such file") from None
    except IsADirectoryError:
        raise UnreadableInput(f"{source.name}: is a directory, not a log file") from None
    except OSError as exc:
        raise UnreadableInput(f"{source.name}: cannot open ({exc.strerror})") from None
    try:
        while block := handle.read(READ_SIZE):
            yield block
    except OSError as exc:
        raise UnreadableInput(f"{source.name}: cannot read ({exc.strerror})") from None
    finally:
        handle.close()


def _peek(blocks: Iterator[bytes]) -> tuple[bytes, Iterator[bytes]]:
    first = next(blocks, b"")

    def chained() -> Iterator[bytes]:
        if first:
            yield first
        yield from blocks

    return first[:8], chained()


class _Counter:
    """Passes blocks through and counts their bytes (the compressed size of an archive)."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        for block in self.blocks:
            self.count += len(block)
            yield block


def _gunzip(name: str, blocks: _Counter, limits: Limits) -> Iterator[bytes]:
    """Stream-decompress gzip (several concatenated members allowed), output bounded per step."""
    decoder = zlib.decompressobj(wbits=31)
    fed = False
    try:
        for block in blocks:
            data = block
            while data:
                fed = True
                out = decoder.decompress(data, limits.chunk_size)
                if out:
                    yield out
                while decoder.unconsumed_tail:
                    out = decoder.decompress(decoder.unconsumed_tail, limits.chunk_size)
                    if out:
                        yield out
                if not decoder.eof:
                    break
                data = decoder.unused_data
                decoder = zlib.decompressobj(wbits=31)
                fed = False
                if not data.startswith(GZIP_MAGIC):
                    break  # trailing padding after the last member, ignored as gzip -d does
        if fed and not decoder.eof:
            raise CorruptArchive(f"{name}: the gzip data ends early (truncated file)")
    except zlib.error as exc:
        raise CorruptArchive(f"{name}: not a valid gzip file ({exc})") from None


def _zip_texts(
    source: Source, head: bytes, raw: Iterator[bytes], limits: Limits, budget: Budget
) -> Iterator[tuple[str, Iterator[bytes]]]:
    file: IO[bytes]
    if source.path is not None:
        file = open(source.path, "rb")  # noqa: SIM115 - closed below
    elif source.data is not None:
        file = io.BytesIO(source.data)
    else:
        # A zip's directory is at its end, so a stream must be held: past a few MB on disk, not in
        # memory. The size bound applies while it is written.
        file = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115 - closed below
        for block in raw:
            file.write(block)
            if file.tell() > limits.max_bytes:
                file.close()
                raise InputTooLarge(f"{source.name}: archive larger than {_size(limits.max_bytes)}")
        file.seek(0)
    try:
        try:
            archive = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise CorruptArchive(f"{source.name}: not a valid zip file ({exc})") from None
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > limits.max_members:
            raise InputTooLarge(
                f"{source.name}: the zip holds {len(members)} files, more than {limits.max_members}"
            )
        declared = sum(m.file_size for m in members)
        if declared > limits.max_bytes:
            raise InputTooLarge(
                f"{source.name}: the zip expands to {_size(declared)}, "
                f"past the {_size(limits.max_bytes)} limit"
            )
        if not members:
            raise UnreadableInput(f"{source.name}: the zip archive is empty")
        for member in members:
            name = f"{source.name}:{member.filename}"
            try:
                handle = archive.open(member)
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
                raise CorruptArchive(f"{name}: cannot open archive member ({exc})") from None
            yield name, _member_chunks(name, member, handle, limits, budget)
    finally:
        file.close()


def _member_chunks(
    name: str, member: zipfile.ZipInfo, handle: IO[bytes], limits: Limits, budget: Budget
) -> Iterator[bytes]:
    compressed = max(member.compress_size, 1)

    def blocks() -> Iterator[bytes]:
        try:
            with handle:
                while block := handle.read(READ_SIZE):
                    yield block
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise CorruptArchive(f"{name}: corrupt archive member ({exc})") from None

    stream: Iterator[bytes] = blocks()
    if member.filename.endswith(".gz"):
        counter = _Counter(stream)
        stream = _gunzip(name, counter, limits)
    counted = _FixedCompressed(stream, compressed)
    return _text_or_dump(name, iter(counted), limits, budget, counted)


class _FixedCompressed:
    """A block source whose compressed size is known up front (a zip member)."""

    def __init__(self, blocks: Iterator[bytes], compressed: int) -> None:
        self.blocks = blocks
        self.count = compressed

    def __iter__(self) -> Iterator[bytes]:
        return self.blocks


def text_chunks(
    name: str,
    blocks: Iterator[bytes],
    limits: Limits,
    budget: Budget,
    compressed: _Counter | _FixedCompressed | None,
) -> Iterator[bytes]:
    """Re-cut blocks into chunks that end at a newline; check for binary data and bounds."""
    carry = b""
    expanded = 0
    checked = False
    for block in blocks:
        expanded += len(block)
        budget.take(len(block), name)
        if compressed is not None and expanded > limits.ratio_floor:
            ratio = expanded / max(compressed.count, 1)
            if ratio > limits.max_archive_ratio:
                raise InputTooLarge(
                    f"{name}: the archive expands more than {limits.max_archive_ratio}x "
                    f"(past {_size(expanded)}); refusing it as a likely zip bomb"
                )
        if not checked:
            _check_text(name, block)
            checked = True
        data = carry + block if carry else block
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) < limits.max_line:
                carry = data
                continue
            cut = len(data) - 1
        if cut + 1 < limits.chunk_size // 4 and len(data) < limits.chunk_size:
            carry = data  # keep small pieces together: fewer, larger chunks scan faster
            continue
        yield data[: cut + 1]
        carry = data[cut + 1 :]
    if carry:
        if not checked:
            _check_text(name, carry)
        yield carry if carry.endswith(b"\n") else carry + b"\n"


def _check_text(name: str, block: bytes) -> None:
    sample = block[:8192]
    if b"\x00" in sample:
        raise BinaryInput(f"{name}: looks like binary data, not a text log (it contains NUL bytes)")
    if not sample:
        return
    control = sum(1 for b in sample if b < 9 or 13 < b < 27 or 27 < b < 32)
    if control > len(sample) // 10:
        raise BinaryInput(f"{name}: looks like binary data, not a text log")


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
