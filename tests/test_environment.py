"""Environment facts read from the log itself (signatures/environment.py)."""

from __future__ import annotations

import pytest

from signatures import Source, diagnose

COLLECT_ENV = """\
PyTorch version: 2.4.1+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1
Python version: 3.10.14 (main, Mar 21 2024, 16:24:04) [GCC 11.2.0] (64-bit runtime)
GPU models and configuration:
GPU 0: NVIDIA H100 80GB HBM3
Nvidia driver version: 535.161.08
[pip3] triton==3.0.0
"""

NVIDIA_SMI = """\
| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
"""


def test_collect_env_output_gives_versions_and_gpu() -> None:
    env = diagnose([Source.from_text("env.txt", COLLECT_ENV)]).environment
    assert env["torch"] == "2.4.1+cu121"
    assert env["cuda"] == "12.1"
    assert env["python"] == "3.10.14"
    assert env["gpu"] == "NVIDIA H100 80GB HBM3"
    assert env["driver"] == "535.161.08"
    assert env["triton"] == "3.0.0"


def test_nvidia_smi_and_nccl_banner() -> None:
    log = NVIDIA_SMI + "node1:123:456 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nworld_size=64\n"
    env = diagnose([Source.from_text("smi.txt", log)]).environment
    assert env["driver"] == "535.104.05"
    assert env["cuda"] == "12.2"
    assert env["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert env["nccl"] == "2.21.5+cuda12.4"
    assert env["world_size"] == "64"


def test_no_facts_no_guesses() -> None:
    env = diagnose([Source.from_text("x.log", "step 1 loss 2.0\nusing torch for training\n")]).environment
    assert env == {}


def test_collect_env_is_asked_for_when_versions_are_missing() -> None:
    d = diagnose(
        [Source.from_text("x.log", "RuntimeError: CUDA error: an illegal memory access was encountered\n")]
    )
    assert any("collect_env" in fact for fact in d.missing_facts)
    with_env = diagnose(
        [
            Source.from_text(
                "x.log", COLLECT_ENV + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            )
        ]
    )
    assert not any("collect_env" in fact for fact in with_env.missing_facts)


@pytest.mark.parametrize(
    ("line", "nodes"),
    [
        ("torchrun --standalone --nproc_per_node=2 train.py", "standalone"),
        ("torchrun --nnodes=4 --nproc_per_node=8 train.py", "4"),
        ("+ torchrun --nproc_per_node 1 example.py", "1"),  # torchrun's default is one node
        ("node1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0", "2"),
        ("I1104 07:30:13.505040 139911 api.py:520]   group_world_size=2", "2"),
    ],
)
def test_how_many_nodes_the_job_spans(line: str, nodes: str) -> None:
    assert diagnose([Source.from_text("launch.txt", line + "\n")]).environment.get("nnodes") == nodes


def test_evidence_only_facts_are_not_environment() -> None:
    env = diagnose(
        [Source.from_text("x.log", "W] last reason: 2/7: size mismatch\nstep 7 loss 1.0\n")]
    ).environment
    assert "last_reason" not in env and "step" not in env
