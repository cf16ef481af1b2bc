"""``denpex advise``: the decision as the exit status, the hosts on an ``exclude:`` line, and the
advice in ``denpex diagnose``'s terminal output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
TRITON = ROOT / "signatures" / "examples" / "llama-64gpu-triton.log"
NODE_FAILURE = CORPUS / "extra2b" / "extra2b-070.log"  # srun: Node failure on worker-1
IB_ERROR = CORPUS / "extra" / "extra-034.log"  # an InfiniBand completion error
ECC_NO_HOST = CORPUS / "extra2a" / "extra2a-029.log"  # uncorrectable ECC, no host in the log
HEALTHY = ROOT / "tests" / "healthy" / "torchrun-ddp.log"


def advise(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str]:
    code = main(["advise", *map(str, args)])
    return code, capsys.readouterr().out


def test_a_transient_failure_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = advise(capsys, IB_ERROR)
    assert code == 0
    assert out.splitlines()[0] == "decision: restart" and "exclude:" not in out


def test_a_node_failure_exits_3_and_prints_the_host_to_exclude(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = advise(capsys, NODE_FAILURE)
    assert code == 3
    assert out.splitlines()[:2] == ["decision: restart-excluding", "exclude: worker-1"]
    assert "Restart without worker-1: Slurm lost the node" in out


def test_a_deterministic_failure_exits_4(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = advise(capsys, TRITON)
    assert code == 4
    assert "Do not restart: Triton cannot compile this kernel" in out


def test_a_node_failure_without_a_host_exits_5_unless_the_host_is_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = advise(capsys, ECC_NO_HOST)
    assert code == 5 and "decision: investigate" in out
    code, out = advise(capsys, ECC_NO_HOST, "--host", "gpu-node-07")
    assert code == 3 and "exclude: gpu-node-07" in out


def test_a_log_without_a_failure_exits_5_with_no_decision(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = advise(capsys, HEALTHY)
    assert code == 5
    assert out.startswith("decision: none\nNo failure found in the log")


def test_unreadable_input_still_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(tmp_path / "missing.log")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_json_carries_the_advice_and_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = advise(capsys, NODE_FAILURE, "--json")
    data = json.loads(out)
    assert code == data["exit_code"] == 3
    assert data["signature"] == "slurm-node-failure"
    assert data["advice"]["decision"] == "restart-excluding"
    assert data["advice"]["exclude_hosts"] == ["worker-1"]


def test_help_states_every_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    parts = ("0 restart", "3 restart without the hosts", "4 stop", "5 investigate", "2 input it cannot read")
    assert [p for p in parts if p not in text] == []


def test_diagnose_prints_what_to_do_next_under_the_headline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(NODE_FAILURE)]) == 0
    out = capsys.readouterr().out
    assert "What to do next  restart-excluding · confidence 0.90" in out
    assert out.index("What to do next") < out.index("Where it started")


def test_signatures_show_states_the_restart_class(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["signatures", "show", "cuda-ecc-uncorrectable"]) == 0
    out = capsys.readouterr().out
    assert "If it ends a job  node\nuncorrectable ECC or NVLink error; the GPU is at fault" in out
