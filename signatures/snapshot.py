"""The validated library as a pickle: cached per user, and built into the package at build time.

Parsing a hundred YAML files and checking every regex in them costs ~0.15 s of every start-up.
A library that loaded without problems is kept pickled in the user's cache folder and, by the
build step (``signatures.scanbuild``), in the package, so a read-only or cold cache still starts
without parsing. A snapshot is keyed by every file's name and bytes and by the source of the code
that validates them (and Python's version), so a changed library or format is never served stale.

Snapshots are read only from the package and the user's own cache folder, places trusted like
the installed code itself.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from signatures.spec import Signature

try:  # the builtin BLAKE2: hashlib's import (OpenSSL) costs 5-10 ms of every start-up, and
    # the library's 800 KB hash in 2 ms with it (5 ms with SHA-256)
    from _blake2 import blake2b
except ImportError:  # another Python's layout
    from hashlib import blake2b

PACKAGED = Path(__file__).parent / "compiled"
# The modules whose code decides what a YAML file is validated into: a change there changes the key.
VALIDATORS = ("loader.py", "yamldocs.py", "reader.py", "spec.py", "patterns.py", "snapshot.py")
# What unpickling a truncated or foreign file can raise; any of them means "not a snapshot".
NOT_A_SNAPSHOT = (
    OSError,
    EOFError,
    pickle.UnpicklingError,
    AttributeError,
    ImportError,
    IndexError,
    TypeError,
    ValueError,
)


def snapshot_key(files: Iterable[tuple[str, Path]]) -> str | None:
    """The key of the library made of ``(name, path)`` files; None when one cannot be read."""
    digest = blake2b(b"python %d.%d\0" % sys.version_info[:2], digest_size=16)  # its re judges the regexes
    here = Path(__file__).parent
    try:
        for name in VALIDATORS:
            digest.update(b"%s\0%s\0" % (name.encode(), (here / name).read_bytes()))
        for name, path in files:
            data = path.read_bytes()
            digest.update(b"%s\0%d\0%s" % (name.encode(), len(data), data))
    except OSError:
        return None
    return f"library-{digest.hexdigest()[:32]}.pickle"


def load_snapshot(key: str, folders: Sequence[Path | None]) -> list[Signature] | None:
    """The signatures kept under ``key`` in the first of ``folders`` that has them."""
    for folder in folders:
        if folder is None:
            continue
        try:
            found = pickle.loads((folder / key).read_bytes())
        except NOT_A_SNAPSHOT:
            continue
        if isinstance(found, list) and all(isinstance(s, Signature) for s in found):
            return found
    return None


def save_snapshot(key: str, signatures: list[Signature], folder: Path | None) -> None:
    """Keep ``signatures`` under ``key`` in ``folder``; an unwritable folder is fine."""
    if folder is None:
        return
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{key}.{os.getpid()}.tmp"
        tmp.write_bytes(pickle.dumps(signatures, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(folder / key)  # atomic: a concurrent reader never sees half a file
