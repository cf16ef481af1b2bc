"""The build step: put the bundled library's snapshot and scanning database into the package.

python -m signatures.scanbuild [FOLDER]    # default: signatures/compiled/ (setup.py runs it)
"""

from __future__ import annotations

import sys
from pathlib import Path

from signatures.library import Library
from signatures.loader import LIBRARY_DIR, library_files, load_signatures, read_signatures
from signatures.scan import HyperscanScanner
from signatures.scandb import PACKAGED, save_database
from signatures.snapshot import save_snapshot, snapshot_key


def build(folder: Path = PACKAGED) -> Path | None:
    """Compile the bundled library's database into ``folder``; None when Hyperscan is absent."""
    try:
        scanner = HyperscanScanner(Library(load_signatures()).scan_patterns)
    except ImportError:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("hyperscan-*.db"):
        old.unlink()
    save_database(scanner.key, scanner.dump(), folder)
    return folder / scanner.key


def build_snapshot(folder: Path = PACKAGED) -> Path:
    """Parse and validate the bundled library (never from a cache) and pickle it into ``folder``."""
    files = library_files(LIBRARY_DIR)
    key = snapshot_key(files)
    if key is None:
        raise OSError(f"cannot read the library under {LIBRARY_DIR}")
    signatures = read_signatures(LIBRARY_DIR, files)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("library-*.pickle"):
        old.unlink()
    save_snapshot(key, signatures, folder)
    return folder / key


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGED
    print(build_snapshot(folder))
    built = build(folder)
    print(built or "hyperscan is not installed: no database built")


if __name__ == "__main__":
    main()
