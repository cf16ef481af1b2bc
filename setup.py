"""Build step: put the bundled library's validated snapshot and scanning database into the package.

Everything else is in pyproject.toml. A wheel built here carries ``signatures/compiled/``: the
library pickled after validation (``*.pickle``) and the compiled Hyperscan database (``*.db``),
so a scan where the user's cache folder is not writable still starts without parsing YAML or
compiling. When the database cannot be built (no Hyperscan wheel for this platform), the package
is built without it and compiles at run time, as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUILD = "import signatures.scanbuild as s; s.main()"


class BuildWithScanDatabase(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "signatures" / "compiled"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent), "DENPEX_CACHE_DIR": ""}
        try:
            subprocess.run([sys.executable, "-c", BUILD, str(target)], check=True, env=env)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"warning: nothing built into signatures/compiled/ ({exc})", file=sys.stderr)


setup(cmdclass={"build_py": BuildWithScanDatabase})
