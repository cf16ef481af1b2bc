"""Archives inside archives, and decompression bombs refused in a moment, naming the member.

The bombs are real: a 14 MB gzip that ``gzip -d`` expands to about 14 GB of text (built fast from
concatenated members, which gzip reads as one stream), and zips whose members expand 1000x.
"""

from __future__ import annotations

import gzip
import io
import time
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.jobs.limits import WorkerLimits
from handlers.jobs import Job, LogRef
from signatures import InputTooLarge, Source, diagnose
from signatures.errors import ArchiveTooDeep, DecompressionBomb
from signatures.library import Library
from signatures.sources import Limits, open_texts
from tests.conftest import WorkerStack
from tests.sigfactory import build_library, signature_doc

LOG = "step 1\nstep 2\n[rank4]: kernel-fault happened\nstep 3\n"
# What the worker lets the engine read (bot/jobs/limits.py), so the bounds are the real ones.
WORKER = Limits(max_bytes=WorkerLimits().max_text_bytes)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def zipped(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def gzip_bomb(path: Path, size: int = 14 << 20) -> int:
    """Write a gzip of about ``size`` bytes that expands about 1000x to newline-only text;
    returns the expanded size."""
    member = gzip.compress(b"\n" * (64 << 20), compresslevel=9)
    copies = max(1, size // len(member))
    with path.open("wb") as out:
        for _ in range(copies):
            out.write(member)
    return copies * (64 << 20)


def _read(source: Source, limits: Limits = WORKER) -> list[tuple[str, bytes]]:
    return [(name, b"".join(chunks)) for name, chunks in open_texts(source, limits)]


# -- nested archives ---------------------------------------------------------------------------


def test_a_zip_inside_a_zip_is_read(library: Library) -> None:
    inner = zipped({"rank0.log": b"step 1\n", "rank4.log": LOG.encode()})
    outer = zipped({"notes.txt": b"run 7\n", "logs.zip": inner})
    d = diagnose([Source.from_bytes("job.zip", outer)], library=library)
    assert d.signature and d.signature.id == "kernel-fault"
    assert d.initiating and d.initiating.file == "job.zip:logs.zip:rank4.log" and d.initiating.line == 3


def test_archives_are_opened_by_what_they_hold_not_their_names() -> None:
    texts = _read(Source.from_bytes("bundle", zipped({"a.log": gzip.compress(LOG.encode())})))
    assert texts == [("bundle:a.log", LOG.encode())]
    texts = _read(Source.from_bytes("logs.zip.gz", gzip.compress(zipped({"b.log": b"x\n"}))))
    assert texts == [("logs.zip.gz:b.log", b"x\n")]


def test_three_archives_deep_are_read_and_a_fourth_is_refused() -> None:
    data = zipped({"rank4.log": LOG.encode()})
    for level in (2, 3):
        data = zipped({f"level{level}.zip": data})
    [(name, text)] = _read(Source.from_bytes("level1.zip", data))
    assert (name, text) == ("level1.zip:level3.zip:level2.zip:rank4.log", LOG.encode())
    deeper = zipped({"level0.zip": data})
    with pytest.raises(ArchiveTooDeep, match=r"deeper.zip:level0.zip:level3.zip:level2.zip: archives nested"):
        _read(Source.from_bytes("deeper.zip", deeper))


# -- bombs ---------------------------------------------------------------------------------------


def test_a_14_mb_gzip_bomb_is_refused_in_well_under_a_second(library: Library, tmp_path: Path) -> None:
    bomb = tmp_path / "train.log.gz"
    expands_to = gzip_bomb(bomb)
    assert bomb.stat().st_size > 13 << 20 and expands_to > 13 << 30
    started = time.perf_counter()
    with pytest.raises(DecompressionBomb, match=r"train.log.gz: expands more than 200x") as refused:
        diagnose([Source.from_path(bomb)], library=library, limits=WORKER)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"the bomb took {elapsed:.2f} s to refuse"
    assert isinstance(refused.value, InputTooLarge)


def test_a_zip_bomb_is_refused_from_its_directory_before_decompressing(tmp_path: Path) -> None:
    bomb = zipped({"ok.log": b"step 1\n", "big.log": b"\n" * (32 << 20)})
    started = time.perf_counter()
    with pytest.raises(DecompressionBomb, match=r"^job.zip:big.log: expands more than 200x"):
        _read(Source.from_bytes("job.zip", bomb))
    assert time.perf_counter() - started < 0.5


def test_a_bomb_inside_nested_archives_names_the_member() -> None:
    inner = zipped({"rank0.log": gzip.compress(b"\n" * (32 << 20))})
    with pytest.raises(DecompressionBomb, match=r"^outer.zip:inner.zip:rank0.log: expands more than"):
        _read(Source.from_bytes("outer.zip", zipped({"inner.zip": inner})))


def test_small_or_ordinary_archives_are_not_bombs(library: Library) -> None:
    # Below the floor any ratio is fine: 8 MB of one repeated line compresses ~500x.
    repetitive = b"[rank0]: step ok\n" * (8 << 20 >> 4)
    assert _read(Source.from_bytes("quiet.log.gz", gzip.compress(repetitive)))[0][1] == repetitive
    # A real-looking log past the floor compresses far less than 200x.
    block = b"".join(
        b"[rank%d]: step %d loss=%.4f tok/s=%d\n" % (i % 8, i, 1 / (i + 1), i * 37) for i in range(5000)
    )
    lines = block * ((17 << 20) // len(block) + 1)
    assert len(lines) > 16 << 20
    assert _read(Source.from_bytes("long.log.gz", gzip.compress(lines, compresslevel=6)))[0][1] == lines


def test_the_total_bound_stops_decompression_early() -> None:
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(400_000)))
    with pytest.raises(InputTooLarge, match=r"x.gz: expands past 1.0 MB, the limit"):
        _read(Source.from_bytes("x.gz", data), Limits(max_bytes=1 << 20))


async def test_a_worker_refuses_a_gzip_bomb_in_moments_not_at_its_time_limit(
    stack: WorkerStack, engine_pool: Any, tmp_path: Path
) -> None:
    worker = stack.worker(executor=engine_pool, limits=WorkerLimits(job_timeout_s=120))
    # A first job warms the engine's process (start-up is not what is measured).
    warm = Job(source="webhook", dedupe_key="warm", channel="C1", thread_ts="1700.000000")
    await stack.queue.enqueue(replace(warm, logs=[LogRef("inline", "warm.log", text=LOG)]))
    await worker.drain(timeout_s=60)
    bomb = tmp_path / "rank0.log.gz"
    gzip_bomb(bomb)
    f = stack.slack.add_file("rank0.log.gz", bomb.read_bytes())
    job = Job(
        source="file",
        dedupe_key=f["id"],
        channel="C1",
        thread_ts="1700.000001",
        logs=[LogRef("slack_file", "rank0.log.gz", file_id=f["id"])],
    )
    await stack.queue.enqueue(job)
    started = time.perf_counter()
    await worker.drain(timeout_s=60)
    elapsed = time.perf_counter() - started
    [reply] = stack.slack.thread("C1", "1700.000001")
    assert "rank0.log.gz: expands more than 200x" in reply.text
    print(f"bomb job (14 MB download, refusal, reply): {elapsed:.2f} s")
    assert elapsed < 5, f"download, refusal and reply took {elapsed:.1f} s, not moments"
