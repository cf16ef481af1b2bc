"""``denpex report --exit-code-advice [--wait S]``: the exit status is the advice, the server's
(with the history rules) when it answers in time, else the diagnosis' own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli import report
from tests.corpus.cases import load_cases
from tests.served_app import served_app
from tests.slack_standin import SlackStandin
from tests.test_report import SECRET, parse, secret_file

__all__ = ["secret_file"]  # fixture
CASES = {c.id: c for c in load_cases()}


@pytest.fixture
async def server(fake_redis: Any, key_prefix: str, slack_api: SlackStandin) -> AsyncIterator[tuple[str, Any]]:
    async with served_app(
        fake_redis, key_prefix, slack_api, signing_secret="signing-advice", webhook_secret=SECRET
    ) as served:
        yield served


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "POLL_S", 0.1)


def log(tmp_path: Path, case_id: str) -> Path:
    path = tmp_path / f"{case_id}.out"
    path.write_bytes(CASES[case_id].data)
    return path


async def run_with_server(runtime: Any, argv: list[str]) -> int:
    """Run the CLI in a thread while the server's worker diagnoses what it sends."""
    args = parse(argv)
    cli = asyncio.create_task(asyncio.to_thread(args.func, args))
    while not cli.done():
        await runtime.worker.drain(timeout_s=10)
        await asyncio.sleep(0.05)
    code: int = await cli
    return code


async def test_wait_gives_the_servers_advice_which_stops_a_repeat(
    server: tuple[str, Any], tmp_path: Path, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, runtime = server
    ib_error = log(tmp_path, "extra-034")  # nccl-ib-transport-error: transient
    argv = ["report", str(ib_error), "--url", base, "--secret-file", str(secret_file), "--job-name", "llama"]
    argv += ["--exit-code-advice", "--wait", "20"]
    assert await run_with_server(runtime, [*argv, "--job-id", "slurm-77.0"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("decision: restart\n") and "job slurm-77.0 reported" in err
    # The requeued job fails the same way: only the server knows it is the second time in a row.
    assert await run_with_server(runtime, [*argv, "--job-id", "slurm-77.1"]) == 4
    out, _ = capsys.readouterr()
    assert out.startswith("decision: stop\n")
    assert "ended the previous run of llama too" in out


async def test_without_wait_the_diagnosis_own_advice_decides_at_once(
    server: tuple[str, Any], tmp_path: Path, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, runtime = server
    node = log(tmp_path, "extra2b-070")  # Node failure on worker-1
    argv = ["report", str(node), "--url", base, "--secret-file", str(secret_file), "--exit-code-advice"]
    assert await run_with_server(runtime, argv) == 3
    assert capsys.readouterr().out.splitlines()[:2] == ["decision: restart-excluding", "exclude: worker-1"]


async def test_an_unreachable_server_still_gives_a_decision(
    tmp_path: Path, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = log(tmp_path, "extra2b-070")
    argv = ["report", str(node), "--url", "http://127.0.0.1:9", "--secret-file", str(secret_file)]
    args = parse([*argv, "--exit-code-advice", "--wait", "5"])
    assert await asyncio.to_thread(args.func, args) == 3
    out, err = capsys.readouterr()
    assert "exclude: worker-1" in out
    assert "not sent; the advice below is this diagnosis' own" in err
    # Without --exit-code-advice the old contract holds: 1, not sent.
    args = parse(argv)
    assert await asyncio.to_thread(args.func, args) == 1
