"""Opening logs: plain text, .gz, .zip (each member a file) and streams, in bounded memory.

Every input becomes one or more *texts*, each a name and an iterator of newline-aligned chunks
of bytes. Decompression is streamed, and what an archive expands to is bounded (by ratio and by
size, as it is decompressed, and by the sizes a zip declares before that) so a decompression
bomb fails in a moment with a clear message naming the member, instead of filling memory or
disk or holding the engine until the job's time limit. Archives inside archives are read, a
few levels deep.
"""

from __future__ import annotations

import functools
import io
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from signatures import newlines
from signatures.chunks import Budget, Limits, text_chunks
from signatures.chunks import size_text as _size
from signatures.errors import (
    ArchiveTooDeep,
    CorruptArchive,
    DecompressionBomb,
    InputTooLarge,
    UnreadableInput,
)
from signatures.flight_recorder.intake import divert

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
ZIP_EMPTY = b"PK\x05\x06"
READ_SIZE = 1 << 20
KEEP_FREED_AFTER = 64 << 20  # a file read past this tunes the allocator (keep_freed_blocks)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
PROBE = 16 << 10  # how far back from a block's end its last newline is looked for
SPOOL_IN_MEMORY = 8 << 20  # a zip read from a stream is held in memory up to this, then on disk


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


def open_texts(
    source: Source, limits: Limits, budget: Budget | None = None
) -> Iterator[tuple[str, Iterator[bytes]]]:
    """Yield (name, chunks) for each text inside ``source``; raise InputError subclasses.

    Archives are opened by what they hold, not by their names: a zip or gzip inside a zip or a
    gzip is opened in turn, at most ``limits.max_depth`` archives deep.
    """
    budget = budget or Budget(limits)
    yield from _layer(source.name, _raw_blocks(source), limits, budget, 0, _reopener(source))


def _reopener(source: Source) -> Callable[[], IO[bytes]] | None:
    """How to open ``source`` again as a seekable file (a zip's directory is at its end)."""
    path, data = source.path, source.data
    if path is not None:
        return lambda: open(path, "rb")  # closed by _zip_texts
    if data is not None:
        return lambda: io.BytesIO(data)
    return None


def _layer(
    name: str,
    raw: Iterator[bytes],
    limits: Limits,
    budget: Budget,
    depth: int,
    reopen: Callable[[], IO[bytes]] | None,
) -> Iterator[tuple[str, Iterator[bytes]]]:
    """The texts of one layer: an archive is opened (one level deeper), anything else is text."""
    head, raw = _peek(raw)
    if head.startswith(ZIP_MAGIC) or head.startswith(ZIP_EMPTY):
        _deeper(name, depth, limits)
        yield from _zip_texts(name, raw, reopen, limits, budget, depth + 1)
        return
    if head.startswith(GZIP_MAGIC):
        _deeper(name, depth, limits)
        yield from _layer(name, _gunzip(name, raw, limits), limits, budget, depth + 1, None)
        return
    yield name, _text_or_dump(name, raw, limits, budget)


def _text_or_dump(name: str, blocks: Iterator[bytes], limits: Limits, budget: Budget) -> Iterator[bytes]:
    """Text chunks; or, for a flight-recorder dump, its bytes held for signatures.flight_recorder."""
    dump, blocks = divert(name, blocks, budget.take)
    return dump if dump is not None else text_chunks(name, blocks, limits, budget, None)


def _deeper(name: str, depth: int, limits: Limits) -> None:
    if depth >= limits.max_depth:
        raise ArchiveTooDeep(
            f"{name}: archives nested more than {limits.max_depth} deep; unpack it and send the logs"
        )


def _raw_blocks(source: Source) -> Iterator[bytes]:
    if source.data is not None:
        data = source.data
        newlines.expect(len(data))
        for i in range(0, len(data), READ_SIZE):
            yield data[i : i + READ_SIZE]
        return
    if source.stream is not None:
        while block := source.stream.read(READ_SIZE):
            yield block
        return
    assert source.path is not None
    try:
        # Unbuffered: a buffered read of 1 MB costs three times as much CPU (an extra copy).
        handle = open(source.path, "rb", buffering=0)  # noqa: SIM115 - closed in finally; generator-owned
    except FileNotFoundError:
        raise UnreadableInput(f"{source.name}: no such file") from None
    except IsADirectoryError:
        raise UnreadableInput(f"{source.name}: is a directory, not a log file") from None
    except OSError as exc:
        raise UnreadableInput(f"{source.name}: cannot open ({exc.strerror})") from None
    try:
        yield from file_blocks(handle, 0)
    except OSError as exc:
        raise UnreadableInput(f"{source.name}: cannot read ({exc.strerror})") from None
    finally:
        handle.close()


def file_blocks(handle: IO[bytes], start: int, end: int | None = None) -> Iterator[bytes]:
    """Blocks of about READ_SIZE bytes of a file from ``start`` (to ``end``), each ending at a newline
    when one is near its end: ``text_chunks`` then takes a block whole, never joining or slicing it.

    A small read of the block's last bytes finds its last newline first, so the block itself is
    read once, already cut, into a bytes object of its own.
    """
    newlines.expect((end if end is not None else _size_of(handle)) - start)
    pos = start
    while end is None or pos < end:
        if pos - start > KEEP_FREED_AFTER:
            keep_freed_blocks()
        want = READ_SIZE if end is None else min(READ_SIZE, end - pos)
        if want > PROBE:
            handle.seek(pos + want - PROBE)
            probe = _read_exactly(handle, PROBE)
            cut = probe.rfind(b"\n")
            if len(probe) == PROBE and cut >= 0:
                want -= PROBE - cut - 1
        handle.seek(pos)
        block = _read_exactly(handle, want)
        if not block:
            return
        pos += len(block)
        yield block


def _size_of(handle: IO[bytes]) -> int:
    try:
        return os.fstat(handle.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        return 0  # not a file on disk: text_chunks tells newlines.expect as it reads


@functools.cache
def keep_freed_blocks() -> None:
    """Ask the C allocator to keep freed blocks for the next ones instead of returning them to the
    kernel: each 1 MB block read then lands in memory already mapped, not in 256 fresh pages to
    fault in (0.25 s of system time per GB read). glibc only; elsewhere nothing changes."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 16 << 20)  # blocks of a few MB come from the heap, which is reused
    mallopt(_M_TRIM_THRESHOLD, 64 << 20)  # and the heap's top is not handed back after each one


def _read_exactly(handle: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes: fewer only at the end of the file (an unbuffered read may return less)."""
    block = handle.read(n)
    if block is None or len(block) == n or not block:
        return block or b""
    parts = [block]
    got = len(block)
    while got < n and (more := handle.read(n - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _peek(blocks: Iterator[bytes]) -> tuple[bytes, Iterator[bytes]]:
    first = next(blocks, b"")

    def chained() -> Iterator[bytes]:
        if first:
            yield first
        yield from blocks

    return first[:8], chained()


def _gunzip(name: str, blocks: Iterator[bytes], limits: Limits) -> Iterator[bytes]:
    """Stream-decompress gzip (several concatenated members allowed), output bounded per step.

    What it expands to is checked after every step against the compressed bytes actually read:
    past ``ratio_floor``, more than ``max_archive_ratio`` times as much is a decompression bomb,
    refused at once rather than after the job's time limit; past ``max_bytes``, too large.
    """
    decoder = zlib.decompressobj(wbits=31)
    fed = False
    read = 0  # compressed bytes taken from ``blocks``
    expanded = 0
    try:
        for block in blocks:
            read += len(block)
            data = block
            while data:
                fed = True
                out = decoder.decompress(data, limits.chunk_size)
                data = decoder.unconsumed_tail
                if out:
                    expanded += len(out)
                    pending = len(data) + (len(decoder.unused_data) if decoder.eof else 0)
                    _check_expansion(name, expanded, read - pending, limits)
                    yield out
                if not decoder.eof:
                    continue
                data = decoder.unused_data
                decoder = zlib.decompressobj(wbits=31)
                fed = False
                if data and not data.startswith(GZIP_MAGIC):
                    return  # trailing padding after the last member, ignored as gzip -d does
        if fed and not decoder.eof:
            raise CorruptArchive(f"{name}: the gzip data ends early (truncated file)")
    except zlib.error as exc:
        raise CorruptArchive(f"{name}: not a valid gzip file ({exc})") from None


def _check_expansion(name: str, expanded: int, compressed: int, limits: Limits) -> None:
    if expanded > limits.max_bytes:
        raise InputTooLarge(f"{name}: expands past {_size(limits.max_bytes)}, the limit")
    if expanded > limits.ratio_floor and expanded > limits.max_archive_ratio * max(compressed, 1):
        raise DecompressionBomb(
            f"{name}: expands more than {limits.max_archive_ratio}x ({_size(expanded)} from "
            f"{_size(compressed)} read); refusing it as a likely zip bomb"
        )


def _zip_texts(
    name: str,
    raw: Iterator[bytes],
    reopen: Callable[[], IO[bytes]] | None,
    limits: Limits,
    budget: Budget,
    depth: int,
) -> Iterator[tuple[str, Iterator[bytes]]]:
    # Imported here: with what they import (shutil, bz2, lzma, random) they cost 25 ms of every
    # start-up, and most inputs hold no zip.
    import tempfile
    import zipfile

    file: IO[bytes]
    if reopen is not None:
        file = reopen()
    else:
        # A zip's directory is at its end, so a stream (or a zip inside an archive) must be
        # held: past a few MB on disk, not in memory. The size bound applies while it is written.
        file = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115 - closed below
        try:
            for block in raw:
                file.write(block)
                if file.tell() > limits.max_bytes:
                    raise InputTooLarge(f"{name}: archive larger than {_size(limits.max_bytes)}")
        except BaseException:
            file.close()
            raise
        file.seek(0)
    try:
        try:
            archive = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise CorruptArchive(f"{name}: not a valid zip file ({exc})") from None
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > limits.max_members:
            raise InputTooLarge(f"{name}: the zip holds {len(members)} files, more than {limits.max_members}")
        declared = sum(m.file_size for m in members)
        if declared > limits.max_bytes - budget.used:
            raise InputTooLarge(
                f"{name}: the zip expands to {_size(declared)}, past the {_size(limits.max_bytes)} limit"
            )
        if not members:
            raise UnreadableInput(f"{name}: the zip archive is empty")
        for member in members:
            inner = f"{name}:{member.filename}"
            # Sizes in the zip's directory bound what a member can expand to (the reader stops
            # there), so a bomb is refused before a byte of it is decompressed.
            if member.file_size > limits.ratio_floor:
                _check_expansion(inner, member.file_size, member.compress_size, limits)
            try:
                handle = archive.open(member)
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
                raise CorruptArchive(f"{inner}: cannot open archive member ({exc})") from None
            yield from _layer(inner, _member_blocks(inner, handle), limits, budget, depth, None)
    finally:
        file.close()


def _member_blocks(name: str, handle: IO[bytes]) -> Iterator[bytes]:
    import zipfile  # already imported by _zip_texts

    try:
        with handle:
            while block := handle.read(READ_SIZE):
                yield block
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise CorruptArchive(f"{name}: corrupt archive member ({exc})") from None
