"""`denpex watch` end to end: a writer appends a failing log in bursts, the real CLI follows it,
and a local webhook receiver checks every report's signature as the server does."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_valid

ROOT = Path(__file__).resolve().parent.parent
SECRET = "watch-test-secret"
WAIT_S = 60.0  # the most a report may take on a loaded machine; a passing run takes about a second


@dataclass
class Receiver:
    """A stand-in for the server's job-failure webhook: it keeps the reports whose signature holds."""

    reports: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        timestamp = request.headers.get(TIMESTAMP_HEADER, "")
        fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) <= 300
        if not fresh or not signature_valid(
            SECRET, timestamp, body, request.headers.get(SIGNATURE_HEADER, "")
        ):
            self.refused += 1
            return web.json_response({"error": "bad signature"}, status=401)
        report = json.loads(body)
        self.reports.append(report)
        return web.json_response({"job": report["job_id"], "duplicate": False}, status=202)

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        """The first ``count`` reports, once they are in."""
        deadline = time.monotonic() + WAIT_S
        while len(self.reports) < count:
            assert time.monotonic() < deadline, f"waited for report {count}; have {self.events()}"
            await asyncio.sleep(0.05)
        return self.reports[:count]

    def events(self) -> list[str]:
        return [r["diagnosis"]["status"] + ":" + r["job_id"] for r in self.reports]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    app = web.Application()
    app.router.add_post(PATH, r.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    r.url = f"http://127.0.0.1:{port}"
    try:
        yield r
    finally:
        await runner.cleanup()


async def watch(*args: str, stdin: int | None = None) -> asyncio.subprocess.Process:
    """The real CLI, as a process of its own."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "watch",
        *args,
        cwd=ROOT,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "DENPEX_JOB_ID": "", "SLURM_JOB_ID": "", "KUBERNETES_SERVICE_HOST": ""},
    )


async def tell(proc: asyncio.subprocess.Process, command: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(command.encode() + b"\n")
    await proc.stdin.drain()


async def test_watch_reports_degradation_failure_cascade_once_each_and_passes_the_exit_code_on(
    receiver: Receiver, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    proc = await watch(
        str(log),
        "--json",
        "--url",
        receiver.url,
        "--secret-file",
        str(secret),
        "--job-id",
        "prod-4242",
        "--settle",
        "0.3",
        "--",
        sys.executable,
        "-m",
        "tests.watch_writer",
        str(log),
        stdin=asyncio.subprocess.PIPE,
    )
    # The writer is the watched command: it reads its bursts from the watch's standard input.
    await tell(proc, "burst warmup")
    await tell(proc, "burst degraded")
    (degraded,) = await receiver.wait_for(1)
    await tell(proc, "burst training")  # more of the same: no news, no report
    await tell(proc, "rotate")
    await tell(proc, "burst failure")
    failure = (await receiver.wait_for(2))[1]
    await tell(proc, "burst cascade")
    cascade = (await receiver.wait_for(3))[2]
    await tell(proc, "exit 3")
    stdout, stderr = await asyncio.wait_for(proc.communicate(), WAIT_S)

    assert proc.returncode == 3, stderr.decode()
    assert receiver.refused == 0
    assert degraded["job_id"] == "prod-4242:degraded-1"
    assert degraded["status"] == "degraded (still running)"
    assert degraded["diagnosis"]["status"] == "degraded"
    assert degraded["diagnosis"]["signature"]["id"] == "dynamo-recompile-limit"
    # The run then died: the recompile limit stays the initiating line, now of a failure.
    assert failure["job_id"] == "prod-4242:failure-2"
    assert failure["diagnosis"]["status"] == "failure"
    assert failure["diagnosis"]["initiating"]["line"] == degraded["diagnosis"]["initiating"]["line"]
    assert [g["ranks"] for g in failure["diagnosis"]["downstream"]] == [[1]]
    assert cascade["job_id"] == "prod-4242:cascade-3"
    assert sorted(r for g in cascade["diagnosis"]["downstream"] for r in g["ranks"]) == [0, 1, 3]
    final = (await receiver.wait_for(4))[3]
    assert final["job_id"] == "prod-4242"  # the job's own id: an epilog's report of it is a duplicate
    assert final["exit_code"] == 3
    assert final["status"] == "failed"
    assert len(receiver.reports) == 4

    # The same reports on standard output, one JSON object per line, with diagnose's keys.
    lines = [json.loads(line) for line in stdout.decode().splitlines()]
    assert [x["event"] for x in lines] == ["degraded", "failure", "cascade", "final"]
    assert lines[-1]["exit_code"] == 3
    diagnose_keys = set(final["diagnosis"])
    assert all(set(x) - {"event", "exit_code"} == diagnose_keys for x in lines)
    # Every line was read once, across the rotation: the lines of both files, no more.
    written = (tmp_path / "train.log.1").read_text().count("\n") + log.read_text().count("\n")
    assert lines[-1]["lines_read"] == written


async def test_watch_of_a_pid_ends_with_a_final_report_when_the_process_ends(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    sleeper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; sys.stdin.read()", stdin=asyncio.subprocess.PIPE
    )
    proc = await watch(str(tmp_path / "rank*.log"), "--json", "--pid", str(sleeper.pid), "--settle", "0")
    log.write_text("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert proc.stdout is not None
    first = json.loads(await asyncio.wait_for(proc.stdout.readline(), WAIT_S))
    assert (first["event"], first["status"]) == ("failure", "failure")
    assert first["signature"]["id"].startswith("cuda-oom")
    assert sleeper.stdin is not None
    sleeper.stdin.close()
    await sleeper.wait()
    rest, stderr = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 0, stderr.decode()
    (final,) = [json.loads(line) for line in rest.decode().splitlines()]
    assert (final["event"], final["exit_code"], final["status"]) == ("final", None, "failure")


async def test_watch_of_a_command_reads_its_output_and_passes_it_on(tmp_path: Path) -> None:
    script = (
        "print('[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB'); exit(1)"
    )
    proc = await watch("--json", "--", sys.executable, "-c", script)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 1
    assert b"CUDA out of memory" in stderr  # the command's output, passed on (stdout is the JSON)
    (final,) = [json.loads(line) for line in stdout.decode().splitlines()]
    assert final["event"] == "final"
    assert final["exit_code"] == 1
    assert final["initiating"]["rank"] == 2


async def test_watch_stops_on_sigterm_with_a_final_report(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("[rank0]: step 1 loss 2.0 1.1 it/s\n[rank0]: step 2 loss 1.9 1.1 it/s\n")
    proc = await watch(str(log), "--json", "--settle", "0")
    assert proc.stderr is not None
    ready = await asyncio.wait_for(proc.stderr.readline(), WAIT_S)
    assert ready.startswith(b"denpex watch: watching"), ready  # from here on it handles SIGTERM
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 0, stderr.decode()
    (final,) = [json.loads(line) for line in stdout.decode().splitlines()]
    assert (final["event"], final["status"], final["lines_read"]) == ("final", "clean", 2)


def test_watch_without_anywhere_to_report_is_refused(tmp_path: Path) -> None:
    from bot.cli.main import main

    assert main(["watch", str(tmp_path / "x.log")]) == 2
    assert main(["watch", "--json"]) == 2
    assert main(["watch", "--json", "--pid", "1", "--", "true"]) == 2


async def test_a_refused_report_is_said_on_stderr_not_retried_and_the_exit_code_still_passed_on(
    receiver: Receiver, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not-the-servers-secret")
    script = (
        "print('[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB'); exit(1)"
    )
    proc = await watch(
        "--url",
        receiver.url,
        "--secret-file",
        str(secret),
        "--job-id",
        "j-1",
        "--",
        sys.executable,
        "-c",
        script,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 1
    not_sent = [line for line in stderr.decode().splitlines() if "not sent" in line]
    assert not_sent and "HTTP 401" in not_sent[-1]
    assert receiver.refused == len(not_sent)  # a refusal is final: no second try
    assert receiver.reports == []
