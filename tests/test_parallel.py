"""Reading in a process pool gives exactly the answer of one pass (signatures/parallel.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import diagnose, parallel, pooling
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc("kernel-fault"),
            signature_doc(
                "peer-timeout",
                role="downstream",
                fingerprints=[{"regex": r"\[Rank (?P<rank>\d+)\] peer-timeout happened"}],
            ),
        ],
    )


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make tiny test files worth splitting, so ranges and their seams are exercised.
    monkeypatch.setattr(pooling, "RANGE_MIN", 4096)
    monkeypatch.setattr(pooling, "POOL_MIN", 1)


def _log(path: Path, failure_at: int, lines: int = 6000) -> Path:
    with path.open("w") as out:
        for i in range(lines):
            if i == failure_at:
                out.write('Traceback (most recent call last):\n  File "t.py", line 1, in f\n')
                out.write(f"[rank{i % 8}]: kernel-fault happened at {i}\n")
            elif i % 997 == 0:
                out.write(f"[Rank {i % 8}] peer-timeout happened\n")
            else:
                out.write(f"[rank{i % 8}]: step {i} loss {i / 7:.3f}\n")
    return path


def _same(a: dict, b: dict) -> None:
    assert a == b


@pytest.mark.usefixtures("small_ranges")
@pytest.mark.parametrize("failure_at", [10, 2999, 3000, 5990])
def test_one_file_in_ranges_equals_one_pass(library: Library, tmp_path: Path, failure_at: int) -> None:
    path = _log(tmp_path / "big.log", failure_at)
    one = diagnose([path], library=library, processes=1).to_dict()
    split = diagnose([path], library=library, processes=3).to_dict()
    _same(one, split)
    assert one["initiating"]["text"].endswith(f"kernel-fault happened at {failure_at}")
    assert one["lines_read"] == split["lines_read"]


@pytest.mark.usefixtures("small_ranges")
def test_several_files_in_a_pool_keep_their_order(library: Library, tmp_path: Path) -> None:
    paths = [_log(tmp_path / f"rank{i}.log", failure_at=100 * i + 50, lines=800) for i in range(4)]
    one = diagnose(paths, library=library, processes=1).to_dict()
    pooled = diagnose(paths, library=library, processes=2).to_dict()
    _same(one, pooled)
    assert one["initiating"]["file"].endswith("rank0.log")


def test_small_or_compressed_inputs_stay_in_process(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_text("x\n")
    assert not pooling.worth_a_pool([parallel.Source.from_path(path)], 2)
    assert not pooling.worth_a_pool([parallel.Source.from_bytes("b", b"x\n")], 2)


@pytest.mark.usefixtures("small_ranges")
def test_last_words_are_read_from_the_last_range(library: Library, tmp_path: Path) -> None:
    # No shape or signature names the failure: the last range's last lines must hold it, numbered
    # as in one pass.
    path = tmp_path / "quiet.log"
    with path.open("w") as out:
        out.writelines(f"[rank{i % 8}]: loading shard {i}\n" for i in range(5000))
        out.write("supervisor lost contact with the storage gateway\n")
    one = diagnose([path], library=library, processes=1).to_dict()
    split = diagnose([path], library=library, processes=3).to_dict()
    _same(one, split)
    assert one["status"] == "unrecognized"
    assert one["initiating"]["line"] == 5001
