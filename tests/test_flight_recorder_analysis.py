"""Comparing dumps across ranks: the stuck rank, the mismatched collective, and clean runs."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest

from signatures.flight_recorder.analysis import MISMATCH, MISSING, NOT_STARTED, analyse
from signatures.flight_recorder.evidence import details, ranges, sentence, summary_fact
from signatures.flight_recorder.parse import Dump, parse_dump
from tests.flight_recorder.make_dumps import dump, entry

DATA = Path(__file__).resolve().parent / "flight_recorder"


def from_dir(folder: Path) -> list[Dump]:
    return [parse_dump(p.read_bytes(), p.name) for p in sorted(folder.iterdir())]


def from_zip(name: str) -> list[Dump]:
    with zipfile.ZipFile(DATA / name) as z:
        return [parse_dump(z.read(n), n) for n in z.namelist()]


def built(dumps: dict[int, dict[str, Any]]) -> list[Dump]:
    return [parse_dump(pickle.dumps(d, protocol=2), f"nccl_trace_rank_{r}") for r, d in dumps.items()]


@pytest.mark.parametrize("case", ["stuck", "stuck-json"])
def test_real_gloo_dumps_name_the_rank_that_never_entered(case: str) -> None:
    # torch 2.13's own writer: rank 3 skipped the fourth all_reduce, ranks 0-2 entered it.
    a = analyse(from_dir(DATA / "real-gloo" / case))
    f = a.finding
    assert f is not None and f.kind == MISSING
    assert (f.named, f.others, f.seq) == ((3,), (0, 1, 2), 4)
    assert sentence(f) == (
        "rank 3 never entered ALLREDUCE seq 4 of the default group (pg 0); ranks 0-2 waited in it"
    )
    assert f.positions[3].last_completed == 3 and f.positions[0].last_entered == 4


def test_real_gloo_dumps_name_a_mismatched_collective_with_both_ops() -> None:
    f = analyse(from_dir(DATA / "real-gloo" / "mismatch")).finding
    assert f is not None and f.kind == MISMATCH and f.named == (2,) and f.seq == 4
    text = sentence(f)
    assert text.startswith("rank 2 entered BROADCAST [8] Float as seq 4 of the default group (pg 0)")
    assert "where ranks 0-1,3 entered ALLREDUCE [4] Float" in text


def test_real_gloo_clean_run_makes_no_claim() -> None:
    a = analyse(from_dir(DATA / "real-gloo" / "clean"))
    assert a.finding is None and a.dumps == 4
    assert summary_fact(a, "2.10").endswith("no rank behind or disagreeing")


def test_64_rank_hang_names_rank_37_and_its_last_stack() -> None:
    a = analyse(from_zip("hang64.zip"))
    f = a.finding
    assert f is not None and f.named == (37,) and len(f.others) == 63
    assert sentence(f) == (
        "rank 37 never entered ALLREDUCE seq 81234 of the default group (pg 0); ranks 0-36,38-63 waited in it"
    )
    lines = details(a)
    assert lines[0] == "rank 37: last entered seq 81233, last completed seq 81233"
    assert "train_step (train.py:88)" in lines[1]  # where rank 37 last called a collective
    assert lines[2].startswith("ranks 0-36,38-63: last entered seq 81234, last completed seq 81233")
    assert "64 dumps compared" in lines[-1]


def test_built_json_mismatch_and_clean_dumps() -> None:
    f = analyse(from_zip("mismatch8-json.zip")).finding
    assert f is not None and f.kind == MISMATCH and f.named == (5,)
    assert "BROADCAST [4096] Float" in sentence(f) and "ALLREDUCE [1] Float" in sentence(f)
    assert analyse(from_zip("clean8.zip")).finding is None


def test_same_op_with_other_sizes_is_a_mismatch() -> None:
    dumps = {r: dump(4, [entry(0, 10, sizes=[[8]] if r == 2 else [[4]], state="started")]) for r in range(4)}
    f = analyse(built(dumps)).finding
    assert f is not None and f.kind == MISMATCH and f.named == (2,)
    assert "rank 2 entered ALLREDUCE [8] Float" in sentence(f)
    assert "where ranks 0-1,3 entered ALLREDUCE [4] Float" in sentence(f)


def test_all_to_all_sizes_may_differ_per_rank() -> None:
    dumps = {r: dump(2, [entry(0, 3, op="all_to_all", sizes=[[r + 1]], state="started")]) for r in range(2)}
    assert analyse(built(dumps)).finding is None


def test_a_rank_whose_gpu_never_started_the_collective() -> None:
    dumps = {
        r: dump(4, [entry(0, 7), entry(1, 8, state="scheduled" if r == 1 else "started")]) for r in range(4)
    }
    f = analyse(built(dumps)).finding
    assert f is not None and f.kind == NOT_STARTED and f.named == (1,)
    assert sentence(f).startswith("rank 1 enqueued ALLREDUCE seq 8 of the default group (pg 0) but never")


def test_several_ranks_behind_are_all_named() -> None:
    waiting = [entry(1, 6, state="started")]
    dumps = {r: dump(8, [entry(0, 5)] + ([] if r in (6, 7) else waiting)) for r in range(8)}
    f = analyse(built(dumps)).finding
    assert f is not None and f.named == (6, 7)
    assert sentence(f).startswith("ranks 6-7 never entered ALLREDUCE seq 6")


def test_every_rank_in_the_collective_and_none_behind_is_no_claim() -> None:
    # All entered and started seq 9, none finished: a fabric stall, not a rank to name.
    dumps = {r: dump(4, [entry(0, 8), entry(1, 9, state="started")]) for r in range(4)}
    assert analyse(built(dumps)).finding is None


def test_ids_rolled_out_of_a_ring_buffer_are_not_a_missing_rank() -> None:
    # Rank 0's buffer still holds seq 1-4, the others only 3-4: seq 1-2 prove nothing.
    dumps = {r: dump(4, [entry(i, s) for i, s in enumerate(range(1 if r == 0 else 3, 5))]) for r in range(4)}
    assert analyse(built(dumps)).finding is None


def test_the_earliest_stalled_group_is_the_finding() -> None:
    tp, dp = ("1", "tp"), ("2", "dp")

    def rank(r: int) -> dict[str, Any]:
        es = [entry(0, 50, pg=dp, pg_id=2, state="started")]  # every rank waits in dp seq 50 (later)
        if r != 3:
            es.insert(0, entry(1, 20, pg=tp, pg_id=1, state="started"))  # rank 3 never entered tp seq 20
        else:
            es.insert(0, entry(1, 19, pg=tp, pg_id=1))
        d = dump(4, es)
        d["pg_config"] = {n: {"name": n, "desc": desc, "ranks": "[0, 1, 2, 3]"} for n, desc in (tp, dp)}
        return d

    dumps = {r: rank(r) for r in range(4)}
    for d in dumps.values():  # tp's collective was entered well before dp's
        d["entries"][0]["time_created_ns"] -= 10**9
    f = analyse(built(dumps)).finding
    assert f is not None and f.group.desc == "tp" and f.named == (3,)
    assert "of group tp (pg 1)" in sentence(f)


def test_members_without_a_dump_are_said() -> None:
    dumps = {r: dump(8, [entry(0, 5)] + ([] if r == 2 else [entry(1, 6, state="started")])) for r in range(4)}
    a = analyse(built(dumps))
    assert a.finding is not None and a.finding.named == (2,)
    assert a.without_dump == (4, 5, 6, 7)
    assert details(a)[-1] == "no dump was given for ranks 4-7 of that group"


def test_hostile_names_in_a_dump_cannot_shape_the_sentence() -> None:
    hostile = entry(0, 1, pg=("9", "x; rank 0 never entered\nEVIL"), state="started")
    hostile["profiling_name"] = "nccl:all_reduce; CUDA out of memory"
    dumps = {0: dump(2, [hostile]), 1: dump(2, [])}
    for d in dumps.values():
        d["pg_config"]["9"] = {"name": "9", "desc": "?", "ranks": "[0, 1]"}
    f = analyse(built(dumps)).finding
    assert f is not None
    text = sentence(f)
    # The names come out as letters, digits and underscores: one line, one semicolon (ours).
    assert text == (
        "rank 1 never entered ALL_REDUCE_ seq 1 of group x_rank_0_never_entered_EVIL (pg 0); "
        "rank 0 waited in it"
    )


def test_ranges() -> None:
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert ranges([]) == ""
