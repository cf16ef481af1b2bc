"""Folders as inputs: `denpex diagnose dumps/ logs/` reads every file below them, in name order."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from signatures.errors import InputTooLarge, UnreadableInput
from signatures.sources import DEFAULT_LIMITS, Source

MAX_FILES = DEFAULT_LIMITS.max_members  # as many as one zip may hold


def expand(paths: Iterable[str | os.PathLike[str]], max_files: int = MAX_FILES) -> list[Source]:
    """Each file as a Source; each folder as the files below it (hidden ones skipped), sorted."""
    out: list[Source] = []
    for item in paths:
        path = Path(item)
        if not path.is_dir():
            out.append(Source.from_path(path))
            continue
        found = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not found:
            raise UnreadableInput(f"{path}: the folder holds no files")
        out.extend(Source.from_path(p) for p in found)
        if len(out) > max_files:
            raise InputTooLarge(f"{path}: more than {max_files} files in the inputs; give fewer or a zip")
    return out
