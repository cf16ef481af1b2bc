"""Reading the library: YAML documents on disk validated into ``Signature`` objects.

Every problem in a library is collected and reported at once, naming the file, the field and the
reason, so an author fixes a broken library in one pass instead of one error at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from signatures.reader import SignatureReader
from signatures.spec import (
    Problem,
    Signature,
    SignatureError,
)

LIBRARY_DIR = Path(__file__).parent / "library"


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping with the same key twice.

    safe_load silently keeps the last of two equal keys, so a second ``note:`` or ``regex:`` in a
    fingerprint would quietly replace the first; here it is a loading problem naming the key and line.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: SafeLoader reports it itself
                continue
            if first is not key_node.start_mark:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first on line {first.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def load_signatures(root: Path | None = None, *, extra: Iterable[Path] = ()) -> list[Signature]:
    """Load and validate every ``<category>/<id>.yaml`` under ``root``; raise SignatureError."""
    root = root or LIBRARY_DIR
    problems: list[Problem] = []
    signatures: list[Signature] = []
    paths = sorted(root.glob("*/*.yaml")) + sorted(extra)
    if not paths:
        problems.append(Problem(str(root), "(library)", "no signature files found"))
    for path, doc in _read_documents(paths, root, problems):
        sig = SignatureReader(_display(path, root), problems).read(doc)
        if sig is not None:
            signatures.append(sig)
    problems.extend(_library_problems(signatures))
    if problems:
        raise SignatureError(problems)
    return signatures


def _read_documents(paths: list[Path], root: Path, problems: list[Problem]) -> list[tuple[Path, Any]]:
    """Each file's YAML document, read with safe_load semantics (UniqueKeyLoader).

    Parsing a hundred files costs ~0.4 s of every start-up, so the parsed documents are kept as
    JSON in the cache folder, keyed by every file's path, size and modification time.
    """
    cache = _documents_cache(paths)
    if cache is not None:
        with contextlib.suppress(OSError, ValueError):
            cached = json.loads(cache.read_text(encoding="utf-8"))
            return [(p, doc) for p, doc in zip(paths, cached, strict=True)]
    out = []
    for path in paths:
        name = _display(path, root)
        try:
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # a SafeLoader
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(name, "(file)", f"cannot read: {exc}"))
            continue
        except yaml.YAMLError as exc:
            problems.append(Problem(name, "(yaml)", f"not valid YAML: {_one_line(exc)}"))
            continue
        out.append((path, doc))
    if cache is not None and len(out) == len(paths):
        with contextlib.suppress(OSError, TypeError, ValueError):  # dates and the like: no cache
            data = json.dumps([doc for _, doc in out])
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(data, encoding="utf-8")
            tmp.replace(cache)
    return out


def _documents_cache(paths: list[Path]) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    digest = hashlib.sha256(b"unique-keys\0")  # documents cached before duplicate keys were refused are stale
    try:
        for path in paths:
            stat = path.stat()
            digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    except OSError:
        return None
    return folder / f"library-{digest.hexdigest()[:32]}.json"


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


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
