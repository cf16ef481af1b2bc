"""deploy/integrations/slurm/denpex-requeue.sh, the requeue-with-exclude loop, simulated: a fake
``scontrol`` (and ``logger``) on PATH record what the script does, and the real ``denpex`` judges
real corpus logs, alone (``advise``) or through a running server that remembers earlier runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.cases import load_cases
from tests.served_app import served_app
from tests.slack_standin import SlackStandin

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "integrations" / "slurm" / "denpex-requeue.sh"
DENPEX = Path(sys.executable).parent / "denpex"
SECRET = "whsec-requeue-test-0a1b2c3d"
CASES = {c.id: c for c in load_cases()}
IB_ERROR = CASES["extra-034"].data  # nccl-ib-transport-error: restart
NODE_FAILURE = CASES["extra2b-070"].data  # Node failure on worker-1: restart without it
ECC_NO_HOST = CASES["extra2a-029"].data  # uncorrectable ECC, no host in the log
TRITON = (ROOT / "signatures" / "examples" / "llama-64gpu-triton.log").read_bytes()  # stop

FAKE_SCONTROL = """#!/bin/sh
echo "$*" >> "$LOGDIR/scontrol-calls"
[ "$1" = show ] || exit 0
cat <<INFO
JobId=$3 JobName=pretrain-7b
   UserId=alice(1000) GroupId=alice(1000)
   Requeue=${REQUEUE:-1} Restarts=${RESTARTS:-0} BatchFlag=1 ExitCode=1:0
   NodeList=${NODELIST:-node[01-02]} BatchHost=${BATCHHOST:-node01}
   NumNodes=${NUMNODES:-2} NumCPUs=16
   ExcNodeList=${EXCLUDED:-(null)}
   StdErr=$LOGDIR/slurm err.log
   StdOut=$LOGDIR/slurm out.log
INFO
"""
FAKE_LOGGER = """#!/bin/sh
shift 3
echo "$*" >> "$LOGDIR/syslog"
"""

pytestmark = pytest.mark.skipif(not DENPEX.exists(), reason="the denpex command is not installed here")


def simulate_job(tmp_path: Path, log: bytes) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("scontrol", FAKE_SCONTROL), ("logger", FAKE_LOGGER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "slurm out.log").write_bytes(log)
    (tmp_path / "slurm err.log").write_text("")


async def epilog(tmp_path: Path, **env: str) -> tuple[list[str], str]:
    """Run the script as slurmctld would after job 77 failed; (scontrol calls, syslog)."""
    for name in ("scontrol-calls", "syslog"):
        (tmp_path / name).unlink(missing_ok=True)
    base = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "LOGDIR": str(tmp_path),
        "DENPEX_BIN": str(DENPEX),
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NAME": "pretrain-7b",
        "SLURM_JOB_USER": "alice",
        "SLURM_CLUSTER_NAME": "prod",
        "SLURM_JOB_EXIT_CODE2": "1:0",
    }
    proc = await asyncio.create_subprocess_exec(str(SCRIPT), env=base | env)
    assert await proc.wait() == 0  # an epilog must never fail: that would drain the node
    calls = (tmp_path / "scontrol-calls").read_text().splitlines()
    syslog = tmp_path / "syslog"
    return [c for c in calls if not c.startswith("show ")], syslog.read_text() if syslog.exists() else ""


async def test_a_transient_failure_is_requeued(tmp_path: Path) -> None:
    simulate_job(tmp_path, IB_ERROR)
    calls, syslog = await epilog(tmp_path)
    assert calls == ["requeue 77"]
    assert "requeued: Restart from the last checkpoint: an InfiniBand/RoCE link" in syslog


async def test_a_node_failure_is_requeued_without_the_host(tmp_path: Path) -> None:
    simulate_job(tmp_path, NODE_FAILURE)
    calls, syslog = await epilog(tmp_path, EXCLUDED="node09")
    assert calls == ["requeuehold 77", "update JobId=77 ExcNodeList=node09,worker-1", "release 77"]
    assert "requeued without worker-1: Restart without worker-1" in syslog


async def test_a_one_node_job_blames_its_node_when_the_log_names_none(tmp_path: Path) -> None:
    simulate_job(tmp_path, ECC_NO_HOST)
    calls, _ = await epilog(tmp_path, NUMNODES="1", BATCHHOST="gpu-node-07")
    assert calls == ["requeuehold 77", "update JobId=77 ExcNodeList=gpu-node-07", "release 77"]
    calls, syslog = await epilog(tmp_path)  # two nodes: which one is unknown
    assert calls == []
    assert "a person decides: Investigate before restarting: uncorrectable ECC" in syslog


async def test_a_deterministic_failure_stops_the_retries(tmp_path: Path) -> None:
    simulate_job(tmp_path, TRITON)
    calls, syslog = await epilog(tmp_path)
    assert calls == []
    assert "not requeued: Do not restart: Triton cannot compile this kernel" in syslog


async def test_retries_are_bounded_and_need_the_jobs_consent(tmp_path: Path) -> None:
    simulate_job(tmp_path, IB_ERROR)
    calls, syslog = await epilog(tmp_path, RESTARTS="3")
    assert calls == [] and "already requeued 3 times" in syslog
    calls, syslog = await epilog(tmp_path, REQUEUE="0")
    assert calls == [] and "does not allow requeueing" in syslog


async def test_a_job_that_succeeded_is_left_alone(tmp_path: Path) -> None:
    simulate_job(tmp_path, IB_ERROR)
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        env={
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "LOGDIR": str(tmp_path),
            "SLURM_JOB_ID": "77",
            "SLURM_JOB_EXIT_CODE2": "0:0",
            "DENPEX_BIN": str(DENPEX),
        },
    )
    assert await proc.wait() == 0
    assert not (tmp_path / "scontrol-calls").exists()


async def test_without_denpex_the_script_still_exits_0_and_requeues_nothing(tmp_path: Path) -> None:
    simulate_job(tmp_path, IB_ERROR)
    calls, syslog = await epilog(tmp_path, DENPEX_BIN=str(tmp_path / "no-such-denpex"))
    assert calls == [] and "denpex gave no advice" in syslog


# -- with the server: its history stops the same failure the second time in a row -----------


@pytest.fixture
async def server(fake_redis: Any, key_prefix: str, slack_api: SlackStandin) -> AsyncIterator[tuple[str, Any]]:
    async with served_app(
        fake_redis, key_prefix, slack_api, signing_secret="signing-requeue", webhook_secret=SECRET
    ) as served:
        yield served


async def test_the_same_failure_twice_in_a_row_is_requeued_once_then_stopped(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    if shutil.which("timeout") is None:
        pytest.skip("coreutils' timeout is needed")
    base, runtime = server
    (tmp_path / "secret").write_text(SECRET)
    env = {"DENPEX_URL": base, "DENPEX_SECRET_FILE": str(tmp_path / "secret"), "DENPEX_WAIT": "30"}
    simulate_job(tmp_path, IB_ERROR)

    async def run(restarts: str) -> tuple[list[str], str]:
        script = asyncio.create_task(epilog(tmp_path, RESTARTS=restarts, **env))
        while not script.done():  # the server's worker diagnoses each report as it arrives
            await runtime.worker.drain(timeout_s=10)
            await asyncio.sleep(0.05)
        return await script

    calls, syslog = await run("0")
    assert calls == ["requeue 77"]
    # The requeued job dies of the same InfiniBand error: no longer a flake.
    calls, syslog = await run("1")
    assert calls == []
    assert (
        "not requeued: Do not restart: InfiniBand/RoCE completion error in NCCL ended the previous run"
        in syslog
    )
