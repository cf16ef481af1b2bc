"""The engine over growing logs: fed in pieces, it answers as over the whole file, in bounded memory."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from signatures import diagnose
from signatures.engine import default_library
from signatures.hits import TAIL_KEPT
from signatures.incremental import Incident
from signatures.library import CAP_SIGNATURE
from signatures.progress import KEPT

ROOT = Path(__file__).resolve().parent.parent
LOGS = [
    "signatures/examples/llama-64gpu-triton.log",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/corpus/real").glob("*.log"))[:6],
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/corpus/long").glob("*.log"))[:2],
]


def fed_in_pieces(path: Path, seed: int) -> Incident:
    incident = Incident(default_library())
    text = incident.text(str(path))
    data = path.read_bytes()
    rnd = random.Random(seed)
    at = 0
    while at < len(data):
        size = rnd.choice((1, 7, 80, 1000, 65536))  # mid-line cuts, single bytes, large reads
        text.feed(data[at : at + size])
        at += size
    incident.close()
    return incident


@pytest.mark.parametrize("name", LOGS)
def test_pieces_give_the_diagnosis_of_the_whole_file(name: str) -> None:
    path = ROOT / name
    whole = diagnose([path]).to_dict()
    assert fed_in_pieces(path, seed=len(name)).diagnosis().to_dict() == whole


def test_last_words_fed_in_pieces_are_the_whole_files(tmp_path: Path) -> None:
    # No shape names the failure: the pieces' last lines must be kept across pieces and numbered
    # as in one read.
    path = tmp_path / "quiet.log"
    lines = [f"[rank{i % 4}]: loading shard {i}\n" for i in range(3000)]
    path.write_text("".join(lines) + "supervisor lost contact with the storage gateway\n")
    whole = diagnose([path]).to_dict()
    assert whole["status"] == "unrecognized" and whole["initiating"]["line"] == 3001
    assert fed_in_pieces(path, seed=7).diagnosis().to_dict() == whole


def test_a_quiet_log_is_scanned_to_its_last_complete_line_and_waits_for_the_rest() -> None:
    incident = Incident(default_library())
    text = incident.text("rank3.log")
    text.feed(
        b"step 1 loss 2.0\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\nstep"
    )
    assert incident.diagnosis().status.value == "empty"  # held back: lines may follow
    text.flush()  # the log went quiet
    d = incident.diagnosis()
    assert d.signature is not None and d.signature.id.startswith("cuda-oom")
    assert (d.initiating and d.initiating.line, d.lines_read) == (2, 2)  # "step" waits for its newline
    text.feed(b" 2 loss 1.9\n")
    incident.close()
    assert incident.diagnosis().lines_read == 3


def test_a_long_run_keeps_hits_within_the_engines_allowances() -> None:
    incident = Incident(default_library())
    text = incident.text("train.log")
    recompile = b"W0115 10:22:41 convert_frame.py:906] torch._dynamo hit config.recompile_limit (8)\n"
    handled = b"ERROR:root:failed to write checkpoint shard, will retry\n"
    rounds = 30
    per_round = 200
    for r in range(rounds):
        block = b"".join(
            recompile + handled + f"[rank0]: step {r * per_round + i} loss 2.0 1.0 it/s\n".encode()
            for i in range(per_round)
        )
        text.feed(block)
    incident.close()
    scan = text.scan
    library = default_library()
    by_pattern: dict[int, int] = {}
    for hit in text.snapshot().hits:
        by_pattern[hit.matcher.pid] = by_pattern.get(hit.matcher.pid, 0) + 1
    total = rounds * per_round
    for pid, kept in by_pattern.items():
        assert kept <= library.matchers[pid].cap + TAIL_KEPT
    recompile_pid = next(
        pid
        for pid in by_pattern
        if (s := library.matchers[pid].signature) and s.id == "dynamo-recompile-limit"
    )
    assert by_pattern[recompile_pid] == min(total, CAP_SIGNATURE)
    # As in one read of a whole file, a signature past its cap is no longer verified line by line.
    assert CAP_SIGNATURE <= scan.counts[recompile_pid] < total
    assert len(scan.progress) == KEPT
    assert scan.lines == 3 * total
