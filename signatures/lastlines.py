"""The last lines of a text, kept while it is scanned: where a dying run says its last words."""

from __future__ import annotations

TAIL_LINES = 200  # lines a text keeps from its end
TEXT_KEPT = 2000  # characters kept of each of them


def keep_last(kept: list[tuple[int, str]], chunk: bytes, lines_through: int) -> list[tuple[int, str]]:
    """``kept`` moved on by ``chunk``, whose last newline ends line ``lines_through``."""
    if not chunk:
        return kept
    ended = chunk.endswith(b"\n")
    parts = (chunk[:-1] if ended else chunk).rsplit(b"\n", TAIL_LINES)
    if len(parts) > TAIL_LINES:
        parts = parts[1:]  # the rest of the chunk, before its last TAIL_LINES lines
    first = (lines_through if ended else lines_through + 1) - len(parts) + 1
    fresh = [
        (first + i, p[: 4 * TEXT_KEPT].decode("utf-8", "replace")[:TEXT_KEPT]) for i, p in enumerate(parts)
    ]
    return keep_last_lines(kept, fresh)


def keep_last_lines(kept: list[tuple[int, str]], fresh: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The last TAIL_LINES of ``kept`` followed by ``fresh`` (numbered lines; fresh ones win)."""
    if not fresh:
        return kept
    first = fresh[0][0]
    return ([x for x in kept if x[0] < first] + fresh)[-TAIL_LINES:]
