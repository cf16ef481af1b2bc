"""Cutting a text's bytes into chunks that end at a newline, checked for binary data and bounds.

A line longer than the bound is cut so that no match is lost at the cut: after a ``\\r`` when it
has one (progress output), else with an overlap the next chunk repeats.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from signatures import newlines
from signatures.errors import BinaryInput, InputTooLarge

OVERLAP = 64 << 10  # the longest match a cut inside a newline-free line is guaranteed to keep


@dataclass(frozen=True)
class Limits:
    """Bounds on what one diagnosis reads."""

    max_bytes: int = 64 << 30  # total text bytes, after decompression
    # Expanded / compressed, checked past ratio_floor bytes: real logs compress 5-50x with
    # gzip; a bomb compresses about 1000x. Below the floor any ratio is fine (small files).
    max_archive_ratio: int = 200
    ratio_floor: int = 16 << 20
    max_members: int = 2048
    max_depth: int = 3  # archives inside archives: a zip in a zip in a zip, at most
    chunk_size: int = 1 << 20
    max_line: int = 4 << 20  # a longer "line" is cut, so one line cannot hold the whole file


class Budget:
    """Counts text bytes across all of one diagnosis' inputs."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.used = 0

    def take(self, n: int, name: str) -> None:
        self.used += n
        if self.used > self.limits.max_bytes:
            raise InputTooLarge(
                f"{name}: the logs add up to more than {size_text(self.limits.max_bytes)}, the limit"
            )


class Compressed(Protocol):
    """What ``text_chunks`` needs of a compressed source: the compressed bytes read so far."""

    count: int


def text_chunks(
    name: str,
    blocks: Iterator[bytes],
    limits: Limits,
    budget: Budget,
    compressed: Compressed | None = None,
) -> Iterator[bytes]:
    """Re-cut blocks into chunks that end at a newline; check for binary data and bounds."""
    carry = b""
    overlap = 0  # bytes at the start of ``carry`` the last chunk also held
    clean = True  # ``carry`` holds no newline
    expanded = 0
    checked = False
    for block in blocks:
        expanded += len(block)
        budget.take(len(block), name)
        newlines.expect(budget.used)  # a large input whose size was not known before (a stream)
        if compressed is not None and expanded > limits.ratio_floor:
            ratio = expanded / max(compressed.count, 1)
            if ratio > limits.max_archive_ratio:
                raise InputTooLarge(
                    f"{name}: the archive expands more than {limits.max_archive_ratio}x "
                    f"(past {size_text(expanded)}); refusing it as a likely zip bomb"
                )
        if not checked:
            _check_text(name, block)
            checked = True
        last = block.rfind(b"\n") if clean else -1
        if last >= 0 and (
            len(carry) + last + 1 >= limits.chunk_size // 4 or len(carry) + len(block) >= limits.chunk_size
        ):
            # The usual case: the chunk is the carry (no newline in it) and the block up to its last
            # newline, joined in one copy (a whole block that ends in a newline is not copied).
            if carry:
                piece = b"".join((carry, memoryview(block)[: last + 1]))
            else:
                piece = block if last == len(block) - 1 else block[: last + 1]
            yield _tagged(piece, overlap)
            carry, overlap = block[last + 1 :], 0
            continue
        data = carry + block if carry else block
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) < limits.max_line:
                carry = data
                continue
            piece, carry = cut_long_line(data, min(OVERLAP, limits.max_line // 2))
            yield _tagged(piece, overlap)
            overlap = len(carry) if isinstance(carry, Overlapped) else 0
            continue
        if cut + 1 < limits.chunk_size // 4 and len(data) < limits.chunk_size:
            carry, clean = data, False  # keep small pieces together: fewer, larger chunks scan faster
            continue
        yield _tagged(data[: cut + 1], overlap)
        carry, overlap, clean = data[cut + 1 :], 0, True
    if carry:
        if not checked:
            _check_text(name, carry)
        yield _tagged(carry if carry.endswith(b"\n") else carry + b"\n", overlap)


class Overlapped(bytes):
    """A piece of a line too long to hold, starting with ``overlap`` bytes the last piece ended with."""

    overlap: int = 0


def cut_long_line(data: bytes, overlap: int = 0) -> tuple[bytes, bytes]:
    """Cut a newline-free run of ``data`` so that no match is lost at the cut: (piece, rest).

    Progress output rewrites one line with ``\\r``: it is cut after a ``\\r``, so every segment
    (what the verifier reads) stays whole. Without one, the rest starts with the last
    ``overlap`` bytes of the piece, so a match shorter than that is seen whole in one of them.
    """
    cr = data.rfind(b"\r", len(data) // 2)
    if cr >= 0:
        return data[: cr + 1], data[cr + 1 :]
    return data, Overlapped(data[-overlap:] if overlap else b"")


def _tagged(piece: bytes, overlap: int) -> bytes:
    if not overlap:
        return piece
    tagged = Overlapped(piece)
    tagged.overlap = overlap
    return tagged


def _check_text(name: str, block: bytes) -> None:
    sample = block[:8192]
    if b"\x00" in sample:
        raise BinaryInput(f"{name}: looks like binary data, not a text log (it contains NUL bytes)")
    if not sample:
        return
    # Terminal controls are text: \t \n \r, ESC's colours, and the backspaces Keras' progress bar
    # redraws itself with when its output is no terminal.
    control = sum(1 for b in sample if b < 8 or 13 < b < 27 or 27 < b < 32)
    if control > len(sample) // 10:
        raise BinaryInput(f"{name}: looks like binary data, not a text log")


def size_text(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
