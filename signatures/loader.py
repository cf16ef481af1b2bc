"""Reading the library: YAML documents on disk validated into ``Signature`` objects.

Every problem in a library is collected and reported at once, naming the file, the field and the
reason, so an author fixes a broken library in one pass instead of one error at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from signatures import snapshot
from signatures.spec import (
    Problem,
    Signature,
    SignatureError,
)

LIBRARY_DIR = Path(__file__).parent / "library"


def load_signatures(root: Path | None = None, *, extra: Iterable[Path] = ()) -> list[Signature]:
    """Load and validate every ``<category>/<id>.yaml`` under ``root``; raise SignatureError.

    A library that loaded before is served from its snapshot (signatures/snapshot.py): from the
    user's cache folder, else from the package, so YAML is parsed only when the files changed.
    """
    root = root or LIBRARY_DIR
    files = library_files(root, extra)
    key = snapshot.snapshot_key(files) if files else None
    if key is not None:
        kept = snapshot.load_snapshot(key, (cache_dir(), snapshot.PACKAGED))
        if kept is not None:
            return kept
    signatures = read_signatures(root, files)
    if key is not None:
        snapshot.save_snapshot(key, signatures, cache_dir())
    return signatures


def library_files(root: Path, extra: Iterable[Path] = ()) -> list[tuple[str, Path]]:
    """Every ``<category>/<id>.yaml`` under ``root`` then ``extra``, each with its display name."""
    return [(_display(path, root), path) for path in sorted(root.glob("*/*.yaml")) + sorted(extra)]


def read_signatures(root: Path, files: list[tuple[str, Path]]) -> list[Signature]:
    """Parse and validate ``(name, path)`` YAML files, without any snapshot; raise SignatureError."""
    # Here, not at the top: a start-up served from a snapshot needs neither yaml nor the reader.
    from signatures.reader import SignatureReader
    from signatures.yamldocs import read_documents

    problems: list[Problem] = []
    signatures: list[Signature] = []
    if not files:
        problems.append(Problem(str(root), "(library)", "no signature files found"))
    for name, doc in read_documents(files, problems):
        sig = SignatureReader(name, problems).read(doc)
        if sig is not None:
            signatures.append(sig)
    problems.extend(_library_problems(signatures))
    if problems:
        raise SignatureError(problems)
    return signatures


def cache_dir() -> Path | None:
    """Denpex's cache folder: ``DENPEX_CACHE_DIR`` (empty disables caching), else the user's."""
    folder = os.environ.get("DENPEX_CACHE_DIR")
    if folder == "":
        return None
    return (
        Path(folder)
        if folder
        else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "denpex"
    )


def _library_problems(signatures: list[Signature]) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for sig in signatures:
        if sig.id in seen:
            problems.append(Problem(sig.path, "id", f"duplicate id {sig.id!r} (also in {seen[sig.id]})"))
        seen.setdefault(sig.id, sig.path)
    owner: dict[tuple[str, bool], str] = {}
    for sig in signatures:
        for i, rel in enumerate(sig.related):
            if rel not in seen:
                problems.append(Problem(sig.path, f"related[{i}]", f"unknown signature {rel!r}"))
        for i, fp in enumerate(sig.fingerprints):
            key = (fp.text, fp.ignore_case)
            other = owner.setdefault(key, sig.id)
            if other != sig.id:
                problems.append(
                    Problem(sig.path, f"fingerprints[{i}]", f"same fingerprint as signature {other!r}")
                )
    return problems


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)
