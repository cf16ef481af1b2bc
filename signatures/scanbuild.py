"""The build step: compile the bundled library's scanning database into the package.

python -m signatures.scanbuild [FOLDER]    # default: signatures/compiled/ (setup.py runs it)
"""

from __future__ import annotations

import sys
from pathlib import Path

from signatures.library import Library
from signatures.loader import load_signatures
from signatures.scan import HyperscanScanner
from signatures.scandb import PACKAGED, save_database


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


def main() -> None:
    built = build(Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGED)
    print(built or "hyperscan is not installed: no database built")


if __name__ == "__main__":
    main()
