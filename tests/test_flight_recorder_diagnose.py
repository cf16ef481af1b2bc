"""Dumps wherever logs go: the finding leads a diagnosis, timeouts follow, and a hang asks for dumps."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

from signatures import InputError, Source, Status, diagnose
from signatures.flight_recorder import UnsafeDump
from tests.flight_recorder.make_dumps import hang64, watchdog_log

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "flight_recorder"
EXAMPLE = ROOT / "signatures" / "examples" / "llama-64gpu-triton.log"
WATCHDOG_ONLY = DATA / "hang64-watchdog.log"


def test_watchdog_timeouts_with_the_dumps_name_the_stuck_rank() -> None:
    d = diagnose([WATCHDOG_ONLY, DATA / "hang64.zip"])
    assert d.status is Status.FAILURE
    assert d.signature is not None and d.signature.id == "nccl-collective-rank-missing"
    assert d.initiating is not None
    assert d.initiating.file.endswith("hang64.zip:nccl_trace_rank_37") and d.initiating.line == 1
    assert d.initiating.rank == 37
    assert d.initiating.text == (
        "rank 37 never entered ALLREDUCE seq 81234 of the default group (pg 0); ranks 0-36,38-63 waited in it"
    )
    assert "train_step (train.py:88)" in " ".join(d.initiating.after)
    [timeouts] = [g for g in d.downstream if g.signature and g.signature.id.startswith("nccl-watchdog")]
    assert timeouts.count == 63 and 37 not in timeouts.ranks
    assert d.environment["flight_recorder"].startswith("64 dumps (format 2.10)")
    assert d.environment["nccl"] == "2.21.5"
    assert not any("TORCH_NCCL_DUMP_ON_TIMEOUT" in fact for fact in d.missing_facts)


def test_watchdog_timeouts_alone_ask_for_the_dumps() -> None:
    d = diagnose([WATCHDOG_ONLY])
    assert d.signature is not None and d.signature.id == "nccl-watchdog-collective-timeout"
    ask = next(f for f in d.missing_facts if "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in f)
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in ask and "attach every rank's dump" in ask


def test_clean_dumps_claim_nothing_and_stop_the_ask() -> None:
    d = diagnose([Source.from_text("rank0.log", watchdog_log(8, 49, skip=-1)), DATA / "clean8.zip"])
    assert d.signature is not None and d.signature.id == "nccl-watchdog-collective-timeout"
    assert d.environment["flight_recorder"].endswith("no rank behind or disagreeing")
    assert not any("TORCH_NCCL_DUMP_ON_TIMEOUT" in fact for fact in d.missing_facts)
    assert diagnose([DATA / "clean8.zip"]).status is Status.CLEAN


def test_a_mismatch_in_json_dumps_is_named_with_both_ops() -> None:
    d = diagnose([DATA / "mismatch8-json.zip"])
    assert d.signature is not None and d.signature.id == "collective-mismatch-desync"
    assert d.initiating is not None and d.initiating.rank == 5
    assert "BROADCAST [4096] Float" in d.initiating.text and "ALLREDUCE [1] Float" in d.initiating.text


@pytest.mark.parametrize("case", ["stuck", "stuck-json", "mismatch"])
def test_real_gloo_dumps_from_a_folder(case: str) -> None:
    folder = DATA / "real-gloo" / case
    d = diagnose(sorted(folder.iterdir()))
    assert d.initiating is not None
    expected = {"stuck": 3, "stuck-json": 3, "mismatch": 2}[case]
    assert d.initiating.rank == expected
    assert d.initiating.file == str(folder / sorted(p.name for p in folder.iterdir())[expected])


def test_a_real_error_in_a_log_keeps_the_lead_over_the_dumps() -> None:
    # The 64-GPU example has its own initiating error; the dumps' finding is a consequence of it.
    d = diagnose([EXAMPLE, DATA / "hang64.zip"])
    assert d.signature is not None and d.signature.id == "triton-compilation-failed"
    assert any(g.signature and g.signature.id == "nccl-collective-rank-missing" for g in d.downstream)


def test_dumps_and_logs_in_one_zip_and_gzipped(tmp_path: Path) -> None:
    bundle = tmp_path / "incident.zip"
    with zipfile.ZipFile(bundle, "w") as z, zipfile.ZipFile(DATA / "hang64.zip") as dumps:
        z.write(WATCHDOG_ONLY, "logs/all-ranks.log")
        for name in dumps.namelist():
            z.writestr(f"dumps/{name}", dumps.read(name))
    d = diagnose([bundle])
    assert d.initiating is not None and d.initiating.rank == 37
    assert d.initiating.file.endswith("incident.zip:dumps/nccl_trace_rank_37")

    gz = tmp_path / "nccl_trace_rank_37.gz"
    gz.write_bytes(gzip.compress(pickle.dumps(hang64()["nccl_trace_rank_37"], protocol=2)))
    others = [Source.from_bytes(n, pickle.dumps(v)) for n, v in hang64().items() if not n.endswith("_37")]
    d = diagnose([*others, gz])
    assert d.initiating is not None and d.initiating.rank == 37


def test_a_hostile_dump_among_the_logs_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return os.system, (f"touch {marker}",)

    evil = Source.from_bytes("nccl_trace_rank_3", pickle.dumps({"entries": [Evil()]}, protocol=2))
    # Among logs, the dump is refused with a note and the logs are still diagnosed...
    d = diagnose([WATCHDOG_ONLY, evil])
    [note] = d.skipped
    assert note.startswith("nccl_trace_rank_3") and "asks to import" in note
    assert d.signature is not None and not marker.exists()
    # ...and alone, the refusal is the answer.
    with pytest.raises(UnsafeDump, match="asks to import") as info:
        diagnose([evil])
    assert isinstance(info.value, InputError) and not marker.exists()


def test_the_cli_reads_folders_of_dumps_and_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli.main import main

    dumps = tmp_path / "dumps"
    dumps.mkdir()
    with zipfile.ZipFile(DATA / "hang64.zip") as z:
        z.extractall(dumps)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "all.log").write_bytes(WATCHDOG_ONLY.read_bytes())
    assert main(["diagnose", "--json", str(dumps), str(logs)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["signature"]["id"] == "nccl-collective-rank-missing"
    assert out["initiating"]["rank"] == 37 and out["initiating"]["file"] == str(dumps / "nccl_trace_rank_37")
