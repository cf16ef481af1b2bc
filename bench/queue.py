"""Queue throughput: jobs per second that one and two worker processes complete for a 10 MB log.

Not a test. Starts its own redis-server (AOF on, fsync every second, as deployed) on a free
port and the Slack stand-in from tests/, writes a deterministic multi-rank log with a failure
near the end, and runs ``python -m bot.cli.worker`` processes against them. Each job is the full
path a user's upload takes: files.info, a 10 MB download with the bot token, the engine in the
worker's process pool, the store, and the threaded reply. Start-up (process spawn, library
load) is excluded by warm-up jobs; the timed batch starts once every worker has answered.

    python -m bench.queue [--jobs 24] [--size-mb 10] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.jobs.connection import connect
from bot.jobs.keys import Keys
from bot.jobs.queue import JobQueue
from handlers.jobs import Job, LogRef
from signatures import Source, diagnose
from tests.slack_standin import SlackStandin

ROOT = Path(__file__).resolve().parent.parent
FAILED_RANK = 11


def make_log(size: int, *, ranks: int = 32, seed: int = 7) -> bytes:
    """A deterministic multi-rank training log of about ``size`` bytes, failing near the end."""
    rng = random.Random(seed)
    lines: list[str] = []
    written = 0
    step = 0
    while written < size - 8 * 1024:
        step += 1
        stamp = f"2026-11-29 {step // 3600 % 24:02d}:{step // 60 % 60:02d}:{step % 60:02d}"
        for r in rng.sample(range(ranks), 6):
            line = (
                f"[rank{r}]:[{stamp}] [INFO] step {step} | loss {2 + rng.random():.4f} | "
                f"grad_norm {rng.random() * 2:.3f} | lr 3.0e-04 | tokens/s {1.1 + rng.random() / 10:.3f}e+06\n"
            )
            lines.append(line)
            written += len(line)
        if step % 200 == 0:
            line = f"[rank{rng.randrange(ranks)}]: NCCL INFO Channel {step % 32:02d}/32 : 0 1 2 3 4 5 6 7\n"
            lines.append(line)
            written += len(line)
    lines += [
        f"[rank{FAILED_RANK}]:Traceback (most recent call last):\n",
        f'[rank{FAILED_RANK}]:  File "/workspace/train.py", line 488, in main\n',
        f"[rank{FAILED_RANK}]:    loss.backward()\n",
        f"[rank{FAILED_RANK}]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 3 has a total capacity of 79.10 GiB of which 1.02 GiB is free.\n",
    ]
    lines += [
        f"[rank{r}]:[E1129 23:59:{r:02d}.123456 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=9921, OpType=ALLREDUCE) ran for 600031 "
        "milliseconds before timing out.\n"
        for r in range(ranks)
        if r != FAILED_RANK
    ]
    return "".join(lines).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
           "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"redis://127.0.0.1:{port}/0"


def spawn_worker(
    redis_url: str, slack: SlackStandin, prefix: str, name: str, logs: Path
) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SLACK_BOT_TOKEN=slack.token,
        SLACK_SIGNING_SECRET="bench",
        SLACK_API_URL=slack.api_url,
        PYTHONPATH=str(ROOT),
        DENPEX_WORKERS="1",
    )
    env.pop("SLACK_APP_TOKEN", None)
    with (logs / f"{name}.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot.cli.worker", "--prefix", prefix, "--name", name],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )


async def wait_for(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        await asyncio.sleep(0.01)


async def run_batch(
    queue: JobQueue,
    slack: SlackStandin,
    file_id: str,
    size: int,
    tag: str,
    count: int,
    precomputed: dict[str, Any] | None = None,
) -> float:
    """Enqueue ``count`` jobs and return the seconds until every one has its reply."""
    jobs = [
        Job(
            source="report" if precomputed else "file",
            dedupe_key=f"{tag}-{i}",
            channel="CBENCH",
            thread_ts=f"{tag}.{i:06d}",
            logs=[]
            if precomputed
            else [LogRef("slack_file", "train-32ranks.log", file_id=file_id, size=size)],
            precomputed=precomputed,
        )
        for i in range(count)
    ]
    start = time.perf_counter()
    for job in jobs:
        await queue.enqueue(job)

    async def answered() -> bool:
        return all(slack.thread("CBENCH", j.thread_ts or "") for j in jobs)

    await wait_for(answered, f"{count} replies")
    return time.perf_counter() - start


async def bench(args: argparse.Namespace) -> None:
    data = make_log(args.size_mb * 1024 * 1024)
    work = Path(tempfile.mkdtemp(prefix="denpex-bench-queue-"))
    redis_proc, url = start_redis(work)
    slack = SlackStandin()
    await slack.start()
    file_id = slack.add_file("train-32ranks.log", data)["id"]
    try:
        redis = None
        for _ in range(200):
            try:
                redis = await connect(url)
                break
            except Exception:
                await asyncio.sleep(0.05)
        assert redis is not None
        info = await redis.info("server")
        print(f"log: {len(data) / 1024 / 1024:.1f} MB, 32 ranks, failure near the end")
        print(f"redis-server {info['redis_version']} (AOF everysec), Slack stand-in on loopback")
        print(f"cpus: {os.cpu_count()}, jobs per run: {args.jobs}")
        results: dict[int, float] = {}
        for n in args.workers:
            prefix = f"bench-{n}w"
            queue = JobQueue(redis, keys=Keys(prefix))
            await queue.setup()
            procs = [spawn_worker(url, slack, prefix, f"w{n}-{i}", work) for i in range(n)]
            try:

                async def joined(n: int = n, prefix: str = prefix) -> bool:
                    consumers = await redis.xinfo_consumers(f"{prefix}:jobs", "workers")
                    return len(consumers) == n

                await wait_for(joined, "workers to start")
                # Warm-up: every worker spawns its engine process and loads the library.
                await run_batch(queue, slack, file_id, len(data), f"warm{n}", 2 * n)
                seconds = await run_batch(queue, slack, file_id, len(data), f"timed{n}", args.jobs)
                if n == 1:
                    # The queue's own ceiling: precomputed diagnoses (denpex report) skip the
                    # download and the engine; what is left is Redis, the store and the reply.
                    diagnosis = diagnose([Source.from_bytes("train-32ranks.log", data)]).to_dict()
                    bare = await run_batch(queue, slack, file_id, 0, "bare", 200, diagnosis)
            finally:
                for p in procs:
                    p.send_signal(signal.SIGTERM)
                for p in procs:
                    p.wait(60)
            results[n] = args.jobs / seconds
            print(
                f"{n} worker{'s' if n > 1 else ' '}: {args.jobs} jobs in {seconds:6.2f} s = "
                f"{results[n]:5.2f} jobs/s ({seconds / args.jobs * 1000:.0f} ms per job, "
                f"{results[n] * len(data) / 1024 / 1024:.0f} MB/s of logs)"
            )
            if n == 1:
                print(
                    f"1 worker, no engine (precomputed): 200 jobs in {bare:6.2f} s = {200 / bare:6.1f} jobs/s"
                )
        if 1 in results and 2 in results:
            print(f"speed-up with 2 workers: {results[2] / results[1]:.2f}x")
        sample = next(m for m in slack.messages if m.channel == "CBENCH")
        print(f"answer posted: {sample.text[:120]}")
        await redis.aclose()
    finally:
        await slack.close()
        redis_proc.terminate()
        redis_proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--size-mb", type=int, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    asyncio.run(bench(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
