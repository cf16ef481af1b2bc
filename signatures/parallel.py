"""Reading logs in a process pool: several files at once, and one large file in byte ranges.

One log per rank is common, so files are the natural unit of work. A single large plain-text
file is cut into ranges that start at line boundaries; each range is scanned on its own and the
results are joined by adding the line counts of the ranges before it, so the answer is the same
as reading the file in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from signatures import pooling
from signatures.errors import InputError
from signatures.flight_recorder import read_any
from signatures.hits import BEFORE_LINES, TextScan, read_text
from signatures.lastlines import keep_last_lines
from signatures.library import Library
from signatures.progress import KEPT as PROGRESS_KEPT
from signatures.skipping import Skips, read_each
from signatures.sources import (
    GZIP_MAGIC,
    ZIP_MAGIC,
    Budget,
    Limits,
    Source,
    file_blocks,
    open_texts,
    text_chunks,
)

_worker_library: Library | None = None


@dataclass(frozen=True)
class Task:
    source_index: int
    part: int
    parts: int


def scan_files(
    sources: list[Source], library: Library, limits: Limits, processes: int, skips: Skips | None = None
) -> list[list[TextScan]]:
    """Scan ``sources`` in a pool; results come back in the order of ``sources``."""
    # Imported here: the pool machinery costs start-up time that small inputs never need.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    tasks = _plan(sources, processes)
    global _worker_library
    if "fork" in multiprocessing.get_all_start_methods():
        # Forked workers inherit the compiled library: no second load or compile.
        _worker_library = library
        pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("fork"))
    else:
        root = str(library.root) if library.root else None
        pool = ProcessPoolExecutor(max_workers=processes, initializer=_init, initargs=(root, library.backend))
    with pool:
        futures = [
            (task, pool.submit(_run, sources[task.source_index], task, limits, skips is not None))
            for task in tasks
        ]
        done = []
        for task, future in futures:
            try:
                scans, notes = future.result()
            except InputError as exc:
                if skips is None:
                    raise
                skips.add(exc)
                scans, notes = [], []
            if skips is not None:
                for note in notes:
                    skips.add(InputError(note))
            done.append((task, scans))
    out: list[list[TextScan]] = []
    for index in range(len(sources)):
        parts = [scans for t, scans in sorted(done, key=lambda d: d[0].part) if t.source_index == index]
        scans = parts[0] if len(parts) == 1 else [_join([s for group in parts for s in group])]
        for scan in scans:
            scan.attach(library)
        out.append(scans)
    return out


def _plan(sources: list[Source], processes: int) -> list[Task]:
    # Largest work first keeps every worker busy to the end; the result order is restored after.
    tasks = []
    split = len(sources) < processes
    for index, source in enumerate(sources):
        size = pooling.size_on_disk(source)
        parts = min(processes, size // pooling.RANGE_MIN) if split and _plain(source) else 1
        tasks += [Task(index, part, max(parts, 1)) for part in range(max(parts, 1))]
    return sorted(tasks, key=lambda t: -pooling.size_on_disk(sources[t.source_index]) // t.parts)


def _init(root: str | None, backend: str | None) -> None:
    global _worker_library
    _worker_library = Library.load(Path(root) if root else None, backend=backend)


def _run(source: Source, task: Task, limits: Limits, skipping: bool) -> tuple[list[TextScan], list[str]]:
    library = _worker_library
    assert library is not None
    skips = Skips() if skipping else None
    if task.parts == 1:
        budget = Budget(limits)
        texts = open_texts(source, limits, budget)
        scans = read_each(texts, lambda n, c: read_any(library, n, 0, c), skips)
    else:
        scans = [_scan_range(library, source, task, limits)]
    for scan in scans:
        scan.detach()
    return scans, skips.notes if skips else []


def _scan_range(library: Library, source: Source, task: Task, limits: Limits) -> TextScan:
    assert source.path is not None
    size = source.path.stat().st_size
    with open(source.path, "rb", buffering=0) as handle:
        start = _line_start(handle, size * task.part // task.parts, size)
        end = _line_start(handle, size * (task.part + 1) // task.parts, size)
        seed = _lines_before(handle, start)
        chunks = text_chunks(source.name, file_blocks(handle, start, end), limits, Budget(limits), None)
        return read_text(library, source.name, 0, chunks, prev_tail=seed)


def _line_start(handle: IO[bytes], pos: int, size: int) -> int:
    """The offset of the first line that starts at or after ``pos``."""
    if pos <= 0:
        return 0
    handle.seek(pos - 1)
    offset = pos - 1
    while offset < size:
        block = handle.read(1 << 16)
        if not block:
            break
        i = block.find(b"\n")
        if i >= 0:
            return offset + i + 1
        offset += len(block)
    return size


def _lines_before(handle: IO[bytes], start: int) -> list[bytes]:
    """The last lines before ``start``, so a range's first hits still see their traceback."""
    if start == 0:
        return []
    back = min(start, 1 << 16)
    handle.seek(start - back)
    data = handle.read(back)
    return data.rstrip(b"\n").split(b"\n")[-BEFORE_LINES:]


def _join(parts: list[TextScan]) -> TextScan:
    """One file's scan from its ranges, in order: line numbers shift by the lines before."""
    joined = TextScan(name=parts[0].name, file_index=0, name_rank=parts[0].name_rank)
    offset = 0
    for part in parts:
        for hit in part.hits:
            hit.line += offset
        joined.hits.extend(part.hits)
        joined.sightings.extend(replace(x, line=x.line + offset) for x in part.sightings)
        joined.progress.extend((line + offset, text) for line, text in part.progress)
        joined.last_lines = keep_last_lines(joined.last_lines, [(n + offset, x) for n, x in part.last_lines])
        for pid, n in part.counts.items():
            joined.counts[pid] = joined.counts.get(pid, 0) + n
        for key, value in part.facts.items():
            joined.facts.setdefault(key, value)
        joined.bytes += part.bytes
        joined.has_text = joined.has_text or part.has_text
        offset += part.lines
    joined.lines = offset
    del joined.progress[:-PROGRESS_KEPT]
    return joined


def _plain(source: Source) -> bool:
    if source.path is None:
        return False
    try:
        with open(source.path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return False
    return not (head.startswith(GZIP_MAGIC) or head.startswith(ZIP_MAGIC))
