"""Reading several log files at once in a process pool (one file per task)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from signatures.hits import TextScan, read_text
from signatures.library import Library
from signatures.sources import Limits, Source, _Budget, open_texts

_worker_library: Library | None = None


def _init(root: str | None, backend: str | None) -> None:
    global _worker_library
    _worker_library = Library.load(Path(root) if root else None, backend=backend)


def _scan_one(source: Source, limits: Limits) -> list[TextScan]:
    assert _worker_library is not None
    budget = _Budget(limits)
    scans = [
        read_text(_worker_library, name, 0, chunks) for name, chunks in open_texts(source, limits, budget)
    ]
    for scan in scans:
        scan.detach()
    return scans


def scan_files(
    sources: list[Source], library: Library, limits: Limits, processes: int
) -> list[list[TextScan]]:
    """Scan each file in a worker process; results come back in the order of ``sources``."""
    # Largest files first keeps both workers busy to the end; the result order is restored after.
    order = sorted(range(len(sources)), key=lambda i: -_size(sources[i]))
    global _worker_library
    if "fork" in multiprocessing.get_all_start_methods():
        # Forked workers inherit the compiled library: no second load or compile.
        _worker_library = library
        pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("fork"))
    else:
        root = str(library.root) if library.root else None
        pool = ProcessPoolExecutor(max_workers=processes, initializer=_init, initargs=(root, library.backend))
    with pool:
        futures = {i: pool.submit(_scan_one, sources[i], limits) for i in order}
        results = {i: f.result() for i, f in futures.items()}
    out = []
    for i in range(len(sources)):
        for scan in results[i]:
            scan.attach(library)
        out.append(results[i])
    return out


def _size(source: Source) -> int:
    try:
        return source.path.stat().st_size if source.path else 0
    except OSError:
        return 0
