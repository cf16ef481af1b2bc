"""Folders as inputs: every file below them, in name order, bounded in count."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures.errors import InputTooLarge, UnreadableInput
from signatures.folders import expand


def test_a_folder_is_its_files_in_name_order_hidden_ones_skipped(tmp_path: Path) -> None:
    (tmp_path / "dumps" / "node1").mkdir(parents=True)
    for name in ("dumps/nccl_trace_rank_1", "dumps/nccl_trace_rank_0", "dumps/node1/nccl_trace_rank_8"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "dumps" / ".DS_Store").write_bytes(b"x")
    log = tmp_path / "train.log"
    log.write_text("ok\n")
    names = [Path(s.name).relative_to(tmp_path).as_posix() for s in expand([tmp_path / "dumps", log])]
    assert names == [
        "dumps/nccl_trace_rank_0",
        "dumps/nccl_trace_rank_1",
        "dumps/node1/nccl_trace_rank_8",
        "train.log",
    ]


def test_an_empty_folder_and_too_many_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnreadableInput, match="holds no files"):
        expand([tmp_path / "empty"])
    (tmp_path / "many").mkdir()
    for i in range(5):
        (tmp_path / "many" / f"r{i}.log").write_text("x\n")
    with pytest.raises(InputTooLarge, match="more than 4 files"):
        expand([tmp_path / "many"], max_files=4)


def test_a_missing_path_is_left_for_the_reader_to_report(tmp_path: Path) -> None:
    [source] = expand([tmp_path / "nope.log"])
    assert source.path == tmp_path / "nope.log"
