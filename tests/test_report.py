"""``denpex report`` and the shipped integrations (curl, Slurm epilog) against a live endpoint."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.cli import report
from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from handlers.jobs import Job
from handlers.webhook import TokenBucket, WebhookConfig, register
from tests.served_app import served_app
from tests.slack_standin import SlackStandin

ROOT = Path(__file__).resolve().parents[1]
INTEGRATIONS = ROOT / "deploy" / "integrations"
SECRET = "whsec-report-test-9f8e7d6c5b4a"
CANARY = "step 3 loss=2.3812 canary-line-that-must-not-leave-the-cluster"
TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWx"
OOM_LOG = "\n".join(
    [CANARY]
    + [f"step {i} loss=2.{i:03d} lr=3e-4" for i in range(4, 60)]
    + [
        f"export HF_TOKEN={TOKEN}",
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "train.py", line 88, in <module>',
        "[rank3]:     loss.backward()",
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 3 has a total capacity of 79.15 GiB of which 1.02 GiB is free.",
        "E1102 12:00:01 torch/distributed/elastic/multiprocessing/api.py:881] failed (exitcode: 1)",
    ]
)


@dataclass
class Server:
    base: str
    redis: Any
    queue: JobQueue

    async def jobs(self) -> list[Job]:
        entries = await self.redis.xrange(self.queue.keys.jobs)
        return [Job.from_json(fields["job"]) for _, fields in entries]


@pytest.fixture
async def server(fake_redis: Any, key_prefix: str) -> AsyncIterator[Server]:
    queue = JobQueue(fake_redis, keys=Keys(key_prefix))
    config = WebhookConfig(secrets={"default": SECRET}, max_body_bytes=1 << 20, route=lambda *_: "C0DEFAULT")
    app = web.Application()
    limiter = TokenBucket(fake_redis, rate=10, burst=10, prefix=f"{key_prefix}:rate")
    register(app, queue=queue, config=config, limiter=limiter)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield Server(f"http://127.0.0.1:{runner.addresses[0][1]}", fake_redis, queue)
    finally:
        await runner.cleanup()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="denpex")
    report.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "slurm-4242.out"
    path.write_text(OOM_LOG + "\n")
    return path


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "webhook-secret"
    path.write_text(SECRET + "\n")
    return path


def test_dry_run_prints_the_diagnosis_and_never_the_log(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(["report", str(log_file), "--dry-run", "--job-id", "4242", "--exit-code", "1"])
    assert args.func(args) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["job_id"] == "4242"
    assert payload["exit_code"] == 1
    assert "log" not in payload and "log_url" not in payload
    assert payload["diagnosis"]["status"] == "failure"
    assert "OutOfMemoryError" in payload["diagnosis"]["initiating"]["text"]
    sent = json.dumps(payload)
    assert CANARY not in sent  # far from the evidence window: the log itself is not sent
    assert TOKEN not in sent


async def test_report_posts_a_signed_diagnosis_that_is_queued(
    server: Server, log_file: Path, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", str(log_file), "--url", server.base, "--secret-file", str(secret_file)]
    argv += ["--job-id", "4242", "--job-name", "llama", "--cluster", "prod", "--exit-code", "1"]
    args = parse(argv)
    # The CLI is synchronous; run it off the loop that serves the endpoint.
    assert await asyncio.to_thread(args.func, args) == 0
    assert "job 4242 reported" in capsys.readouterr().out
    [job] = await server.jobs()
    assert job.logs == []
    assert job.precomputed is not None
    assert job.precomputed["status"] == "failure"
    assert job.header == "Job llama (4242) failed on prod with exit code 1"
    assert CANARY not in job.to_json()

    # Sent again (an epilog re-run): recognised as the same job.
    assert await asyncio.to_thread(args.func, args) == 0
    assert "already reported" in capsys.readouterr().out
    assert len(await server.jobs()) == 1


async def test_wrong_secret_is_reported_as_an_error(
    server: Server, log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-secret")
    args = parse(["report", str(log_file), "--url", server.base, "--secret-file", str(wrong)])
    assert await asyncio.to_thread(args.func, args) == 1
    assert "HTTP 401: bad signature" in capsys.readouterr().err
    assert await server.jobs() == []


def test_url_and_secret_are_required_unless_dry_run(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(["report", str(log_file)])
    assert args.func(args) == 2
    assert "--url and --secret-file are required" in capsys.readouterr().err


def test_unreadable_log_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["report", str(tmp_path / "missing.log"), "--dry-run"])
    assert args.func(args) == 1
    assert "missing.log" in capsys.readouterr().err


async def test_curl_example_is_accepted_by_the_endpoint(
    server: Server, tmp_path: Path, secret_file: Path
) -> None:
    if not (shutil.which("curl") and shutil.which("openssl")):
        pytest.skip("curl and openssl are needed to run the example")
    body = {"job_id": "curl-1", "job_name": "bert", "cluster": "dev", "exit_code": 2}
    body["log"] = OOM_LOG
    (tmp_path / "body.json").write_text(json.dumps(body))
    env = dict(os.environ, DENPEX_URL=server.base, DENPEX_SECRET_FILE=str(secret_file))
    proc = await asyncio.create_subprocess_exec(
        str(INTEGRATIONS / "curl" / "report-failure.sh"),
        str(tmp_path / "body.json"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert json.loads(out) == {"job": "curl-1", "duplicate": False}
    [job] = await server.jobs()
    assert job.header == "Job bert (curl-1) failed on dev with exit code 2"


FAKE_SCONTROL = """#!/bin/sh
cat <<INFO
JobId=$2 JobName=pretrain-7b
   UserId=alice(1000) GroupId=alice(1000)
   JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0
   BatchHost=node01
   StdErr=$LOGDIR/err.log
   StdOut=$LOGDIR/out.log
INFO
"""
FAKE_DENPEX = """#!/bin/sh
printf '%s\\n' "$@" > "$LOGDIR/denpex-args"
"""


async def run_epilog(
    tmp_path: Path, script: Path = INTEGRATIONS / "slurm" / "denpex-epilog.sh", **env: str
) -> list[str] | None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("scontrol", FAKE_SCONTROL), ("denpex", FAKE_DENPEX)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "out.log").write_text(OOM_LOG)
    (tmp_path / "err.log").write_text("")
    base = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LOGDIR": str(tmp_path),
        "DENPEX_URL": "http://127.0.0.1:9",
        "DENPEX_SECRET_FILE": str(tmp_path / "secret"),
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_USER": "alice",
        "SLURM_CLUSTER_NAME": "prod",
    }
    proc = await asyncio.create_subprocess_exec(str(script), env=base | env)
    assert await proc.wait() == 0  # an epilog must never fail: that would drain the node
    args_file = tmp_path / "denpex-args"
    return args_file.read_text().splitlines() if args_file.exists() else None


async def test_slurm_epilog_reports_failed_jobs_with_their_output_files(tmp_path: Path) -> None:
    args = await run_epilog(tmp_path, SLURM_JOB_EXIT_CODE2="1:0")
    assert args is not None
    assert args[:3] == ["report", str(tmp_path / "out.log"), str(tmp_path / "err.log")]
    flags = dict(zip(args[3::2], args[4::2], strict=True))
    assert flags["--job-id"] == "prod-77"
    assert flags["--job-name"] == "pretrain-7b"
    assert flags["--exit-code"] == "1"
    assert flags["--user"] == "alice"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_JOB_EXIT_CODE2": "0:9"}, "137"),  # killed by SIGKILL
        ({"SLURM_JOB_EXIT_CODE": "512"}, "2"),  # older Slurm: the raw wait status
    ],
)
async def test_slurm_epilog_reads_signals_and_raw_status(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    args = await run_epilog(tmp_path, **env)
    assert args is not None
    assert args[args.index("--exit-code") + 1] == expected


async def test_slurm_epilog_ignores_successful_jobs(tmp_path: Path) -> None:
    assert await run_epilog(tmp_path, SLURM_JOB_EXIT_CODE2="0:0") is None


async def test_slurm_epilog_installed_without_its_library_exits_0_and_reports_nothing(
    tmp_path: Path,
) -> None:
    alone = tmp_path / "etc-slurm" / "denpex-epilog.sh"
    alone.parent.mkdir()
    shutil.copy2(INTEGRATIONS / "slurm" / "denpex-epilog.sh", alone)
    assert await run_epilog(tmp_path, alone, SLURM_JOB_EXIT_CODE2="1:0") is None
    beside = alone.parent / "denpex-slurm-lib.sh"
    shutil.copy2(INTEGRATIONS / "slurm" / "denpex-slurm-lib.sh", beside)
    assert await run_epilog(tmp_path, alone, SLURM_JOB_EXIT_CODE2="1:0") is not None


# -- end to end: the real app, the worker, the Slack stand-in ---------------------------------


@dataclass
class App:
    base: str
    runtime: Any
    slack: SlackStandin


@pytest.fixture
async def denpex_app(fake_redis: Any, key_prefix: str, slack_api: SlackStandin) -> AsyncIterator[App]:
    async with served_app(
        fake_redis, key_prefix, slack_api, signing_secret="signing-e2e", webhook_secret=SECRET
    ) as (base, runtime):
        yield App(base, runtime, slack_api)


async def test_report_ends_as_a_diagnosis_in_the_slack_thread(
    denpex_app: App, log_file: Path, secret_file: Path
) -> None:
    argv = ["report", str(log_file), "--url", denpex_app.base, "--secret-file", str(secret_file)]
    argv += ["--job-id", "e2e-1", "--job-name", "llama", "--cluster", "prod", "--exit-code", "1"]
    args = parse(argv)
    assert await asyncio.to_thread(args.func, args) == 0
    assert await denpex_app.runtime.worker.drain(timeout_s=60) == 1

    posts = denpex_app.slack.answered("chat.postMessage")
    parent, *replies = posts
    assert parent.args["channel"] == "C0TRAINING"
    assert "Job llama (e2e-1) failed on prod with exit code 1" in parent.args["text"]
    parent_ts = denpex_app.slack.messages[0].ts
    assert replies and all(r.args.get("thread_ts") == parent_ts for r in replies)
    answer = json.dumps([r.args for r in replies])
    assert "out of memory" in answer.lower()
    everything = json.dumps([c.args for c in denpex_app.slack.calls])
    assert TOKEN not in everything and CANARY not in everything


async def test_inline_log_is_diagnosed_by_the_worker_and_posted(
    denpex_app: App, tmp_path: Path, secret_file: Path
) -> None:
    body = {"job_id": "e2e-inline", "job_name": "bert", "cluster": "dev", "exit_code": 1}
    body["log"] = OOM_LOG
    (tmp_path / "body.json").write_text(json.dumps(body))
    if not (shutil.which("curl") and shutil.which("openssl")):
        pytest.skip("curl and openssl are needed to run the example")
    env = dict(os.environ, DENPEX_URL=denpex_app.base, DENPEX_SECRET_FILE=str(secret_file))
    proc = await asyncio.create_subprocess_exec(
        str(INTEGRATIONS / "curl" / "report-failure.sh"),
        str(tmp_path / "body.json"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert json.loads(out) == {"job": "e2e-inline", "duplicate": False}
    try:
        assert await denpex_app.runtime.worker.drain(timeout_s=120) == 1
    finally:
        await denpex_app.runtime.worker.close()
    replies = [c for c in denpex_app.slack.answered("chat.postMessage") if c.args.get("thread_ts")]
    assert replies
    answer = json.dumps([r.args for r in replies])
    assert "out of memory" in answer.lower()
    assert TOKEN not in json.dumps([c.args for c in denpex_app.slack.calls])


FAKE_KUBECTL = """#!/bin/sh
# Answers the kubectl calls of report-failed-job.sh for a Job that failed.
case "$*" in
  *"wait"*"condition=complete"*) exec sleep 30 ;;
  *"wait"*"condition=failed"*) exit 0 ;;
  *"get job/"*"conditions"*) printf 'Failed' ;;
  *"get job/"*"metadata.uid"*) printf 'uid-123' ;;
  *"get pods"*"-o name"*) echo pod/train-abc ;;
  *"get pods"*"exitCode"*) printf '137' ;;
  *"logs pod/train-abc"*) cat "$LOGDIR/pod.log" ;;
  *"config current-context"*) echo gpu-east ;;
  *) echo "unexpected kubectl $*" >&2; exit 1 ;;
esac
"""


async def test_kubernetes_script_reports_a_failed_job_from_its_pod_logs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("kubectl", FAKE_KUBECTL), ("denpex", FAKE_DENPEX)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "pod.log").write_text(OOM_LOG)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        LOGDIR=str(tmp_path),
        DENPEX_URL="http://127.0.0.1:9",
        DENPEX_SECRET_FILE=str(tmp_path / "secret"),
    )
    proc = await asyncio.create_subprocess_exec(
        str(INTEGRATIONS / "kubernetes" / "report-failed-job.sh"), "training", "llama", env=env
    )
    assert await asyncio.wait_for(proc.wait(), timeout=60) == 0
    args = (tmp_path / "denpex-args").read_text().splitlines()
    assert args[0] == "report" and args[1].endswith("train-abc.log")
    flags = dict(zip(args[2::2], args[3::2], strict=True))
    assert flags["--job-id"] == "k8s-uid-123"
    assert flags["--job-name"] == "llama"
    assert flags["--cluster"] == "gpu-east"
    assert flags["--exit-code"] == "137"
