"""Time from a job-failure webhook received to the diagnosis posted in Slack, for a 10 MB log.

Run from the repository root: ``.venv/bin/python bench/webhook.py [--mb 10] [--runs 3]``.
It starts the real app in-process on 127.0.0.1 (in-process Redis, the Slack stand-in as the
Web API), and compares two ways of reporting the same failed job:

- inline: the log in the webhook body; the server's worker diagnoses it;
- report: ``denpex report`` diagnoses on the "cluster" and posts only the diagnosis.

For each it prints the median of ``--runs`` runs: the time on the sender's side (``report``
only), the time from the request sent to the answer posted in the thread (the stand-in's clock
when the threaded ``chat.postMessage`` arrives), and to the job acknowledged (after what the
worker does once the answer is out). The worker's engine pool is warmed up first, so the
figures are steady-state, not process start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The repository root instead of bench/ itself, whose module names (queue.py) shadow the stdlib's.
_BENCH, _ROOT = Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent
sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from bot.cli import report  # noqa: E402
from bot.jobs.connection import connect  # noqa: E402
from bot.jobs.keys import Keys  # noqa: E402
from bot.ops.settings import Settings  # noqa: E402
from bot.web.app import RUNTIME, create_app  # noqa: E402
from handlers.webhook import PATH, sign  # noqa: E402
from tests.slack_standin import SlackStandin  # noqa: E402

SECRET = "bench-webhook-secret"
FAILURE = [
    "[rank5]: Traceback (most recent call last):",
    '[rank5]:   File "/workspace/train.py", line 212, in train_step',
    "[rank5]:     loss.backward()",
    "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 5 has a "
    "total capacity of 79.15 GiB of which 2.11 GiB is free. Of the allocated memory 71.20 GiB is "
    "allocated by PyTorch.",
    "W1130 04:12:09.114000 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
    "1234 closing signal SIGTERM",
    "E1130 04:12:10.201000 torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: 1) local_rank: 5 (pid: 1239) of binary: /usr/bin/python",
]


def make_log(size_bytes: int) -> str:
    """A multi-rank training log of about ``size_bytes``, ending in a CUDA OOM on rank 5."""
    lines: list[str] = []
    total, step = 0, 0
    while total < size_bytes:
        rank = step % 8
        line = (
            f"[rank{rank}]:2024-11-30 04:{(step // 600) % 60:02d}:{(step // 10) % 60:02d} INFO "
            f"step={step} loss={2.5 - (step % 1000) / 1000:.4f} lr=3.0e-04 "
            f"grad_norm={0.8 + (step % 17) / 10:.3f} tokens/s={41000 + step % 977}"
        )
        lines.append(line)
        total += len(line) + 1
        step += 1
    return "\n".join(lines + FAILURE) + "\n"


async def post(base: str, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    ts = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Denpex-Timestamp": ts,
        "X-Denpex-Signature": sign(SECRET, ts, body),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(base + PATH, data=body, headers=headers) as resp,
    ):
        if resp.status != 202:
            raise SystemExit(f"webhook answered {resp.status}: {await resp.text()}")


class TimedStandin(SlackStandin):
    """The Slack stand-in, noting when each answer in a thread was posted."""

    def __init__(self) -> None:
        super().__init__()
        self.thread_posts: list[float] = []

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "chat.postMessage" and args.get("thread_ts"):
            self.thread_posts.append(time.perf_counter())
        return super()._answer(method, args)


async def posted_after(runtime: Any, slack: TimedStandin, start: float) -> tuple[float, float]:
    """Seconds from ``start`` to the diagnosis posted in the thread, and to the job acknowledged."""
    before = len(slack.thread_posts)
    await runtime.worker.drain(timeout_s=600)
    done = time.perf_counter()
    if len(slack.thread_posts) == before:
        raise SystemExit("no diagnosis was posted")
    return slack.thread_posts[before] - start, done - start


async def run(mb: float, runs: int) -> None:
    slack = TimedStandin()
    await slack.start()
    redis = await connect(None)
    settings = Settings(
        slack_bot_token=slack.token,
        slack_signing_secret="bench",
        slack_api_url=slack.api_url,
        webhook_secret=SECRET,
        default_channel="C0BENCH",
        webhook_rate=1000.0,
        webhook_burst=1000,
        webhook_max_bytes=int(mb * 1024 * 1024 * 2),
        job_timeout_s=600.0,
    )
    app = create_app(settings, redis=redis, keys=Keys("bench-webhook"), start_workers=False)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    runtime = app[RUNTIME]
    text = make_log(int(mb * 1024 * 1024))
    size_mb = len(text.encode()) / 1024 / 1024
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "slurm-4242.out"
        log_path.write_text(text)
        secret_path = Path(tmp) / "secret"
        secret_path.write_text(SECRET)
        try:
            # Warm-up: start the engine's process pool and load the library.
            start = time.perf_counter()
            await post(base, {"job_id": "warm-up", "log": "\n".join(FAILURE)})
            await posted_after(runtime, slack, start)

            inline: list[float] = []
            inline_acked: list[float] = []
            sender: list[float] = []
            server: list[float] = []
            server_acked: list[float] = []
            for i in range(runs):
                start = time.perf_counter()
                await post(base, {"job_id": f"inline-{i}", "cluster": "bench", "log": text})
                posted, acked = await posted_after(runtime, slack, start)
                inline.append(posted)
                inline_acked.append(acked)

                parser = argparse.ArgumentParser()
                report.add_commands(parser.add_subparsers())
                args = parser.parse_args(["report", str(log_path), "--dry-run"])
                start = time.perf_counter()
                payload = await asyncio.to_thread(report.build_payload, args)
                payload["job_id"] = f"report-{i}"
                sender.append(time.perf_counter() - start)
                start = time.perf_counter()
                await post(base, payload)
                posted, acked = await posted_after(runtime, slack, start)
                server.append(posted)
                server_acked.append(acked)
        finally:
            await runtime.worker.close()
            await runner.cleanup()
            await slack.close()
            await redis.aclose()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:8.0f} ms"

    print(f"log: {size_mb:.1f} MB, median of {runs} run(s), warm worker, in-process Redis")
    print(f"inline log      webhook received -> diagnosis posted       {ms(inline)}")
    print(f"inline log      webhook received -> job done (acknowledged) {ms(inline_acked)}")
    print(f"denpex report   diagnose on the sender (not on the server) {ms(sender)}")
    print(f"denpex report   webhook received -> diagnosis posted       {ms(server)}")
    print(f"denpex report   webhook received -> job done (acknowledged) {ms(server_acked)}")
    print(
        f"denpex report   end to end (sender + server)               "
        f"{ms([a + b for a, b in zip(sender, server, strict=True)])}"
    )


def main() -> int:
    """Parse the options and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0, help="log size in MB (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="runs per mode (default 3)")
    options = parser.parse_args()
    asyncio.run(run(options.mb, options.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
