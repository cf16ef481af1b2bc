"""Compiled scanning databases: cached per user, and built into the package at build time.

Compiling the library's patterns costs ~0.3 s, so a compiled Hyperscan database is kept in the
user's cache folder. Where that folder is not writable (a CI job, a fresh container, a read-only
home), a database built into the package when it was built is used instead; each is keyed by
the exact patterns, flags, Hyperscan version and machine, so a stale one is never loaded.

The build step (setup.py) runs ``signatures.scanbuild``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from signatures.loader import cache_dir
from signatures.snapshot import blake2b

PACKAGED = Path(__file__).parent / "compiled"


def database_key(hyperscan: Any, expressions: list[bytes], flags: list[int], ids: list[int]) -> str:
    digest = blake2b(digest_size=16)
    digest.update(str(getattr(hyperscan, "__version__", "")).encode())
    digest.update(_machine().encode())
    for expr, flag, pid in zip(expressions, flags, ids, strict=True):
        digest.update(b"%d\0%d\0%s\0" % (pid, flag, expr))
    return f"hyperscan-{digest.hexdigest()[:32]}.db"


def _machine() -> str:
    """The machine's architecture, as platform.machine() says it (without importing platform: 10 ms)."""
    if hasattr(os, "uname"):
        return os.uname().machine
    import platform

    return platform.machine()


def load_database(key: str) -> bytes | None:
    """The compiled database for ``key``: from the user's cache, else from the package."""
    for folder in (cache_dir(), PACKAGED):
        if folder is None:
            continue
        with contextlib.suppress(OSError):
            return (folder / key).read_bytes()
    return None


def save_database(key: str, data: bytes, folder: Path | None = None) -> None:
    """Keep ``data`` in the cache folder (or ``folder``); a read-only folder is fine."""
    folder = folder or cache_dir()
    if folder is None:
        return
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{key}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        tmp.replace(folder / key)  # atomic: a concurrent reader never sees half a file
