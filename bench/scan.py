"""Scanning speed and memory: `denpex diagnose` against ripgrep on the same multi-rank logs.

Not a test. Generates deterministic 64-rank logs (timestamps, tqdm bars, NCCL INFO chatter,
benign warnings, and a failure cascade near the end: one rank's initiating error, the other
ranks' NCCL watchdog timeouts, torchrun's ChildFailedError), then times, in the same run:

- `denpex diagnose --json` and `rg -F -f <library literals>` on the same file (median of runs),
  with MB/s, their ratio, peak RSS and whether the planted initiating line was named;
- time against file size (linear?), against library size (10, 80, 500 signatures);
- 16 rank files of 64 MB with 1 and 2 worker processes;
- a 10 MB log end to end in the CLI, start-up included.

    python bench/scan.py [--quick] [--out bench/out]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "RuntimeError: CUDA error: an illegal memory access was encountered"
PLANTED_RANK = 37
MB = 1 << 20


def generate(path: Path, size: int, *, ranks: int = 64, seed: int = 1) -> None:
    """Write a deterministic multi-rank training log of about ``size`` bytes."""
    rng = random.Random(seed)
    hosts = [f"gpu-node-{i:03d}" for i in range((ranks + 7) // 8)]
    body = size - 64 * 1024
    with path.open("w", encoding="utf-8") as out:
        written = 0
        step = 0
        second = 0
        for r in range(ranks):
            out.write(
                f"[rank{r}]:{hosts[r // 8]}:{4000 + r % 8}:{4100 + r % 8} [{r % 8}] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
            )
        while written < body:
            step += 1
            second += 1
            stamp = f"2026-11-29 {3 + second // 3600 % 20:02d}:{second // 60 % 60:02d}:{second % 60:02d},{rng.randrange(1000):03d}"
            lines = []
            for r in rng.sample(range(ranks), 8):
                lines.append(
                    f"[rank{r}]:[{stamp}] [INFO] [train.py:412] step {step} | loss {3 + rng.random():.4f} | "
                    f"grad_norm {rng.random() * 2:.3f} | lr 3.00e-04 | tokens/s {1.2 + rng.random() / 10:.3f}e+06\n"
                )
            r = rng.randrange(ranks)
            lines.append(
                f"[rank{r}]:{hosts[r // 8]}:{4000 + r % 8}:{4100 + r % 8} [{r % 8}] NCCL INFO Channel "
                f"{step % 32:02d}/32 :    0   1   2   3   4   5   6   7\n"
            )
            if step % 50 == 0:
                bar = "".join(
                    f"\r{p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:{p:02d}<00:10, 9.9it/s]"
                    for p in range(0, 101, 20)
                )
                lines.append(f"[rank0]:Epoch {step // 50}:{bar}\n")
            if step % 997 == 0:
                lines.append(
                    "[rank3]:/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:91: UserWarning: "
                    "None of the inputs have requires_grad=True. Gradients will be None\n"
                )
            if step % 1499 == 0:
                lines.append(
                    "[rank5]:huggingface/tokenizers: The current process just got forked, after parallelism has "
                    "already been used. Disabling parallelism to avoid deadlocks...\n"
                )
            chunk = "".join(lines)
            out.write(chunk)
            written += len(chunk)
        # The failure cascade near the end.
        stamp = "2026-11-29 23:50:00"
        out.write(f"[rank{PLANTED_RANK}]:[{stamp},001] [INFO] [train.py:412] step {step + 1} | loss 3.1\n")
        out.write(f"[rank{PLANTED_RANK}]:Traceback (most recent call last):\n")
        out.write(f'[rank{PLANTED_RANK}]:  File "/workspace/train.py", line 488, in main\n')
        out.write(f"[rank{PLANTED_RANK}]:    loss.backward()\n")
        out.write(f"[rank{PLANTED_RANK}]:{PLANTED}\n")
        out.write(
            f"[rank{PLANTED_RANK}]:CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        )
        out.write(f"[rank{PLANTED_RANK}]:For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n")
        for r in range(ranks):
            if r == PLANTED_RANK:
                continue
            out.write(
                f"[rank{r}]:[E1129 23:59:{r % 60:02d}.123456 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum=9921, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
                f"ran for 600031 milliseconds before timing out.\n"
            )
        out.write("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
        out.write(f"  rank      : {PLANTED_RANK} (local_rank: {PLANTED_RANK % 8})\n")


def literals_file(path: Path) -> int:
    from signatures.engine import default_library

    lits = sorted({fp.literal for s in default_library().signatures for fp in s.fingerprints if fp.literal})
    path.write_text("\n".join(lits) + "\n", encoding="utf-8")
    return len(lits)


def run_timed(cmd: list[str], stdout: Path) -> tuple[float, int]:
    """Wall time and peak RSS (KB) of a child process; stdout goes to a real file."""
    start = time.perf_counter()
    with stdout.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"command failed ({' '.join(cmd[:4])} ...): {err.strip()}")
    return elapsed, usage.ru_maxrss


def median_run(cmd: list[str], out: Path, runs: int) -> tuple[float, int]:
    times, rss = [], 0
    for _ in range(runs):
        t, r = run_timed(cmd, out)
        times.append(t)
        rss = max(rss, r)
    return statistics.median(times), rss


def denpex_cmd(*files: Path, extra: list[str] | None = None) -> list[str]:
    return [sys.executable, "-m", "bot.cli", "diagnose", "--json", *(extra or []), *map(str, files)]


def planted_found(out: Path) -> bool:
    data = json.loads(out.read_text())
    init = data.get("initiating") or {}
    return PLANTED in (init.get("text") or "") and init.get("rank") == PLANTED_RANK


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--quick", action="store_true", help="100 MB instead of 1 GB, fewer runs")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rg = shutil.which("rg")
    big = 100 * MB if args.quick else 1024 * MB
    sizes = [100 * MB, 256 * MB, 512 * MB, big] if not args.quick else [25 * MB, 50 * MB, 100 * MB]
    lits = args.out / "literals.txt"
    n_lits = literals_file(lits)
    print(f"library literals: {n_lits}; ripgrep: {rg or 'not installed (apt-get install ripgrep)'}")

    print("\n## Single file, full library")
    print(
        "| size | denpex s | denpex MB/s | rg s | rg MB/s | ratio (denpex/rg) | denpex peak RSS MB | planted line named |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size in sorted(set(sizes)):
        log = args.out / f"multirank-{size // MB}MB.log"
        if not log.exists() or abs(log.stat().st_size - size) > 2 * MB:
            generate(log, size)
        real = log.stat().st_size / MB
        t, rss = median_run(denpex_cmd(log), args.out / "denpex.json", args.runs)
        found = planted_found(args.out / "denpex.json")
        if rg:
            trg, _ = median_run([rg, "-F", "-f", str(lits), str(log)], args.out / "rg.txt", args.runs)
            rg_cols = f"{trg:.2f} | {real / trg:.0f} | {t / trg:.2f}"
        else:
            rg_cols = "- | - | -"
        print(f"| {real:.0f} MB | {t:.2f} | {real / t:.0f} | {rg_cols} | {rss / 1024:.0f} | {found} |")

    print("\n## Library size (100 MB file)")
    log = args.out / "multirank-100MB.log"
    if not log.exists():
        generate(log, 100 * MB)
    print("| signatures | seconds |")
    print("|---|---|")
    for count in (10, 80, 500):
        with tempfile.TemporaryDirectory() as tmp:
            lib = _library_of_size(Path(tmp), count)
            t, _ = median_run(
                denpex_cmd(log, extra=["--library", str(lib)]), args.out / "lib.json", args.runs
            )
        print(f"| {count} | {t:.2f} |")

    print("\n## 16 rank files of 64 MB (32 MB with --quick)")
    each = 32 * MB if args.quick else 64 * MB
    files = []
    for r in range(16):
        path = args.out / f"rank{r:02d}-{each // MB}MB.log"
        if not path.exists():
            generate(path, each, seed=100 + r)
        files.append(path)
    total = sum(p.stat().st_size for p in files) / MB
    results = {}
    for procs in (1, 2):
        t, _ = median_run(
            denpex_cmd(*files, extra=["--processes", str(procs)]), args.out / "multi.json", args.runs
        )
        results[procs] = t
        named = json.loads((args.out / "multi.json").read_text()).get("initiating") or {}
        print(f"- {procs} process(es): {t:.2f} s, {total / t:.0f} MB/s, initiating rank {named.get('rank')}")
    print(f"- speed-up with 2 processes: {results[1] / results[2]:.2f}x")

    print("\n## 10 MB log, CLI end to end (start-up included)")
    small = args.out / "multirank-10MB.log"
    if not small.exists():
        generate(small, 10 * MB)
    t, _ = median_run(denpex_cmd(small), args.out / "small.json", max(args.runs, 5))
    print(f"- {t:.2f} s, planted line named: {planted_found(args.out / 'small.json')}")
    return 0


def _library_of_size(root: Path, count: int) -> Path:
    """A library folder of ``count`` signatures: the real ones, trimmed or padded with generated ones."""
    import yaml

    from signatures.loader import LIBRARY_DIR

    files = sorted(LIBRARY_DIR.glob("*/*.yaml"))
    chosen = files[:count]
    for f in chosen:
        (root / f.parent.name).mkdir(exist_ok=True)
        shutil.copy(f, root / f.parent.name / f.name)
    base = yaml.safe_load(files[0].read_text())
    rng = random.Random(count)
    for i in range(max(0, count - len(files))):
        doc = dict(base)
        doc["id"] = f"generated-{i:04d}"
        doc["category"] = "framework"
        doc["related"] = []
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))
        doc["fingerprints"] = [
            {"literal": f"GeneratedFailure{i}: {word} went wrong"},
            {"regex": f"gen{i}_{word} code [0-9]+ at step [0-9]+"},
        ]
        doc["samples"] = {
            "positive": [
                {
                    "log": f"GeneratedFailure{i}: {word} went wrong\n",
                    "line": f"GeneratedFailure{i}",
                    "source": "generated",
                }
            ],
            "negative": [{"log": "fine\n", "why": "generated"}],
        }
        (root / "framework").mkdir(exist_ok=True)
        (root / "framework" / f"generated-{i:04d}.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    # related ids may point at signatures left out of a trimmed library: drop them.
    for f in root.glob("*/*.yaml"):
        doc = yaml.safe_load(f.read_text())
        doc["related"] = []
        f.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return root


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
