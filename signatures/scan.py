"""Multi-pattern scanners: which fingerprints occur anywhere in a chunk, in one pass.

The engine never runs Python per line over the whole log. A scanner answers "which of these
patterns occur in this 1 MB chunk" in C; only for those does Python locate the lines. Hyperscan
is fastest; an RE2 set is the fallback where its wheel does not install; the plain ``re`` scanner
exists for platforms with neither, and as the reference the others are tested against.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from signatures.scandb import database_key, load_database, save_database


@dataclass(frozen=True)
class ScanPattern:
    id: int
    regex: str  # the scan form: unanchored, no named groups, never matches a newline
    ignore_case: bool


class ScanCompileError(Exception):
    """A pattern the scanning backend cannot compile; ``index`` says which."""

    def __init__(self, index: int | None, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(reason)


class Scanner(Protocol):
    name: str

    def scan(self, chunk: bytes) -> set[int]:
        """Ids of the patterns that match somewhere in ``chunk``."""
        ...


def first_ends(scanner: Scanner, chunk: bytes) -> dict[int, int]:
    """Matching pattern ids and, where the backend tells, where a first match ends (else 0)."""
    ends = getattr(scanner, "first_ends", None)
    if ends is not None:
        return dict(ends(chunk))
    return dict.fromkeys(scanner.scan(chunk), 0)


class HyperscanScanner:
    name = "hyperscan"

    def __init__(self, patterns: Sequence[ScanPattern]) -> None:
        import hyperscan

        base = hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_MULTILINE
        expressions = [p.regex.encode("utf-8") for p in patterns]
        flags = [base | (hyperscan.HS_FLAG_CASELESS if p.ignore_case else 0) for p in patterns]
        self._hyperscan = hyperscan
        self.db, self.key = hyperscan_database(expressions, flags, [p.id for p in patterns])

    def dump(self) -> bytes:
        """The compiled database, as ``hyperscan.loadb`` reads it back."""
        return bytes(self._hyperscan.dumpb(self.db))

    def scan(self, chunk: bytes) -> set[int]:
        return set(self.first_ends(chunk))

    def first_ends(self, chunk: bytes) -> dict[int, int]:
        """Each matching pattern's id and where its first match ends: locating starts there."""
        found: dict[int, int] = {}

        def on_match(pid: int, start: int, end: int, flags: int, context: Any) -> None:
            found.setdefault(pid, end)

        self.db.scan(chunk, match_event_handler=on_match)
        return found


def hyperscan_database(expressions: list[bytes], flags: list[int], ids: list[int]) -> tuple[Any, str]:
    """A block-mode database of ``expressions`` and its cache key: loaded compiled when it was kept
    (the user's cache, else the package), else compiled (0.01-0.3 s) and kept for the next run."""
    import hyperscan

    key = database_key(hyperscan, expressions, flags, ids)
    data = load_database(key)
    if data is not None:
        try:
            db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)  # a loaded database has none
            return db, key
        except hyperscan.error:
            pass  # a stale or foreign file: compile afresh
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=expressions, ids=ids, elements=len(expressions), flags=flags)
    except hyperscan.error as exc:
        raise ScanCompileError(_hs_index(str(exc)), f"hyperscan cannot compile it: {exc}") from None
    save_database(key, bytes(hyperscan.dumpb(db)))
    return db, key


def _hs_index(message: str) -> int | None:
    m = re.search(r"(?:expression|pattern)\D*(\d+)", message, re.IGNORECASE)
    return int(m.group(1)) if m else None


class Re2Scanner:
    name = "re2"

    def __init__(self, patterns: Sequence[ScanPattern]) -> None:
        import re2

        options = re2.Options()
        self._set = re2.Set.SearchSet(options)
        self._ids: list[int] = []
        for p in patterns:
            flags = "(?m)" + ("(?i)" if p.ignore_case else "")
            try:
                self._set.Add(flags + p.regex)
            except Exception as exc:  # re2 raises a bare error type per build
                raise ScanCompileError(p.id, f"RE2 cannot compile it: {exc}") from None
            self._ids.append(p.id)
        self._set.Compile()

    def scan(self, chunk: bytes) -> set[int]:
        return {self._ids[i] for i in self._set.Match(chunk) or ()}  # None when nothing matched


class PythonScanner:
    """One ``re.search`` per pattern per chunk: slow, but the reference semantics."""

    name = "python"

    def __init__(self, patterns: Sequence[ScanPattern]) -> None:
        self._compiled = [
            (
                p.id,
                re.compile(p.regex.encode("utf-8"), re.MULTILINE | (re.IGNORECASE if p.ignore_case else 0)),
            )
            for p in patterns
        ]

    def scan(self, chunk: bytes) -> set[int]:
        return {pid for pid, rx in self._compiled if rx.search(chunk)}


BACKENDS: dict[str, Callable[[Sequence[ScanPattern]], Scanner]] = {
    "hyperscan": HyperscanScanner,
    "re2": Re2Scanner,
    "python": PythonScanner,
}


def available_backends() -> list[str]:
    """Backends whose module is installed here, fastest first (found without importing them)."""
    names = [name for name in ("hyperscan", "re2") if importlib.util.find_spec(name) is not None]
    return [*names, "python"]


def make_scanner(patterns: Sequence[ScanPattern], backend: str | None = None) -> Scanner:
    """The fastest available scanner (or the one named) over ``patterns``."""
    name = backend or available_backends()[0]
    if name not in BACKENDS:
        raise ValueError(f"unknown scanning backend {name!r}; one of {', '.join(BACKENDS)}")
    return BACKENDS[name](patterns)
