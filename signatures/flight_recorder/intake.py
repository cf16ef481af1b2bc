"""Where dumps come in: recognised among the texts of any input, read whole, parsed once.

``signatures.sources`` hands every text (a file, a .gz, a zip member) to ``divert`` first; a dump
comes back as ``DumpChunks``, an iterator with no text lines that holds the dump's bytes, and the
engine reads it with ``read_any`` into a ``DumpScan`` instead of scanning it for log lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from signatures.flight_recorder.errors import DumpTooLarge
from signatures.flight_recorder.sniff import MAX_DUMP_BYTES, looks_like_dump
from signatures.hits import TextScan, read_text
from signatures.library import Library

if TYPE_CHECKING:
    from signatures.flight_recorder.parse import Dump

SNIFF_BYTES = 4096  # JSON dumps are recognised by their keys near the start


class DumpChunks(Iterator[bytes]):
    """A flight-recorder dump found where a log was expected: no text lines, its bytes held."""

    def __init__(self, name: str, blocks: Iterator[bytes], take: Callable[[int, str], None] | None) -> None:
        self.name = name
        self._blocks = blocks
        self._take = take

    def __next__(self) -> bytes:
        raise StopIteration  # as a log it has no lines; read() gives the dump

    def read(self) -> bytes:
        """The whole dump, at most MAX_DUMP_BYTES; raise DumpTooLarge past that."""
        parts: list[bytes] = []
        size = 0
        for block in self._blocks:
            size += len(block)
            if self._take is not None:
                self._take(len(block), self.name)
            if size > MAX_DUMP_BYTES:
                raise DumpTooLarge(
                    f"{self.name}: a flight-recorder dump larger than {MAX_DUMP_BYTES >> 20} MiB, "
                    "the bound for one rank's dump"
                )
            parts.append(block)
        return b"".join(parts)


def divert(
    name: str, blocks: Iterator[bytes], take: Callable[[int, str], None] | None = None
) -> tuple[DumpChunks | None, Iterator[bytes]]:
    """(DumpChunks, _) when ``blocks`` hold a flight-recorder dump, else (None, the same blocks)."""
    first = next(blocks, b"")
    while first and len(first) < 16:  # a stream may start with a sliver; sniff at least a few bytes
        more = next(blocks, b"")
        if not more:
            break
        first += more

    def chained() -> Iterator[bytes]:
        if first:
            yield first
        yield from blocks

    if looks_like_dump(first[:SNIFF_BYTES]):
        return DumpChunks(name, chained(), take), iter(())
    return None, chained()


@dataclass
class DumpScan(TextScan):
    """A dump's place among the texts of a diagnosis: no lines or hits, the parsed dump."""

    dump: Dump | None = None


def read_any(library: Library, name: str, file_index: int, chunks: Iterator[bytes]) -> TextScan:
    """``read_text`` for a log; for a dump, parse it (raise DumpError) into a DumpScan."""
    if not isinstance(chunks, DumpChunks):
        return read_text(library, name, file_index, chunks)
    # Here, not at the top: logs alone, the common case, never load the parser.
    from signatures.flight_recorder.parse import parse_dump

    data = chunks.read()
    dump = parse_dump(data, name)
    facts = {"flight_recorder": f"format {dump.version}"}
    if dump.comm_lib_version and dump.comm_lib_version[:1].isdigit():
        facts["nccl"] = dump.comm_lib_version
    # A dump is input with content (it can clear a run), so the input as a whole is not empty.
    return DumpScan(name=name, file_index=file_index, bytes=len(data), facts=facts, dump=dump, has_text=True)
