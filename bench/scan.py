"""Scanning speed and memory: `denpex diagnose` against ripgrep with the same patterns.

Not a test. Generates deterministic 64-rank logs (timestamps, tqdm bars, NCCL INFO chatter,
benign warnings, and a failure cascade near the end), then, in one run, times:

- `denpex diagnose --json --processes 1` and `--processes 2` (separate columns) against
  `rg -j1 --no-mmap -c -f ALL`, where ALL is every pattern the engine's scanner searches
  (fingerprint literals and regexes, engine patterns; case-insensitive ones as `(?i)`): the same
  pattern set for every tool;
- a dense-match input (most lines carry a benign mention the verifier rejects), a no-newline
  input (`\\r`-only progress output, 64 MB) and start-up rows (a 7 KB log; with the user's cache,
  and with a cache folder that cannot be written, where the package's built-in data is used);
- time against library size (10, 80, 500 signatures).

Figures are CPU seconds (user+sys of the child, from wait4's rusage), medians of runs that
alternate the tools run by run; peak RSS is the child's (for 2 processes, the largest one). rg
reads with --no-mmap so its RSS is its own memory, not the mapped file. Ratios are denpex / rg:
in CPU for one process; in wall time for two (what two processes buy is elapsed time; on a
shared machine it is noisy). Inputs below 128 MB are read in one process even when two are
allowed (pooling.RANGE_MIN).

    python bench/scan.py [--quick] [--runs 3] [--out bench/out]
    python bench/scan.py --startup-only --runs 9     # only the start-up rows

The read-only row uses what the build step put into the package (``python -m
signatures.scanbuild`` in a source checkout; an installed wheel has it already).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "RuntimeError: CUDA error: an illegal memory access was encountered"
PLANTED_RANK = 37
MB = 1 << 20


def generate(path: Path, size: int, *, ranks: int = 64, seed: int = 1, reserve: int = 64 * 1024) -> None:
    """Write a deterministic multi-rank training log of about ``size`` bytes (``reserve``: the cascade's)."""
    rng = random.Random(seed)
    hosts = [f"gpu-node-{i:03d}" for i in range((ranks + 7) // 8)]
    body = size - reserve
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


def patterns_file(path: Path) -> int:
    """Every pattern the scanner searches, one per line, in the syntax rg reads."""
    from signatures.engine import default_library

    lines = [("(?i)" if p.ignore_case else "") + _rust(p.regex) for p in default_library().scan_patterns]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def _rust(regex: str) -> str:
    """Python's escapes of characters that need none (re.escape writes "\\ ") are plain in Rust."""
    return re.sub(
        r"\\(.)",
        lambda m: m.group(0) if m.group(1).isalnum() or m.group(1) in RUST_META else m.group(1),
        regex,
    )


RUST_META = ".+*?()|[]{}^$#&-~\\"


def dense(path: Path, size: int) -> None:
    """Most lines name an exception mid-line (flagged by the scan, rejected by the verifier)."""
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as out:
        written, i = 0, 0
        while written < size:
            i += 1
            line = (
                f"[rank{i % 64}]:[2026-11-29 03:{i // 60 % 60:02d}:{i % 60:02d}] step {i} "
                f"check ValueError: none, continuing (retry {rng.randrange(9)})\n"
            )
            out.write(line)
            written += len(line)
        out.write(f"[rank{PLANTED_RANK}]:{PLANTED}\n")


def no_newline(path: Path, size: int) -> None:
    """\\r-only progress output with the error in the middle of the run of bars."""
    with path.open("w", encoding="utf-8") as out:
        written, i = 0, 0
        while written < size:
            i += 1
            bar = f"\r{i % 100:3d}%|{'#' * (i % 100 // 10):<10}| {i}/9999999 [00:{i % 60:02d}<00:10, 9.9it/s]"
            if i == 400_000:
                bar += f"\r[rank{PLANTED_RANK}]:{PLANTED}"
            out.write(bar)
            written += len(bar)
        out.write("\n")


@dataclass
class Run:
    cpu: float  # user + sys seconds of the child
    rss_mb: float
    wall: float = 0.0  # elapsed seconds (on a shared machine: read with care)


def run_once(cmd: list[str], stdout: Path) -> Run:
    began = time.perf_counter()
    with stdout.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # rg -c exits 1 when nothing matched
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"command failed ({' '.join(cmd[:4])} ...): {err.strip()}")
    if proc.stderr:
        proc.stderr.close()
    return Run(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, time.perf_counter() - began)


def alternated(cmds: dict[str, list[str]], out: Path, runs: int) -> dict[str, Run]:
    """Median CPU and max RSS of each command, the commands taking turns run by run."""
    got: dict[str, list[Run]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            got[name].append(run_once(cmd, out / f"{name}.out"))
    return {
        name: Run(
            statistics.median(r.cpu for r in rs),
            max(r.rss_mb for r in rs),
            statistics.median(r.wall for r in rs),
        )
        for name, rs in got.items()
    }


def denpex_cmd(*files: Path, procs: int = 1, extra: list[str] | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bot.cli",
        "diagnose",
        "--json",
        "--processes",
        str(procs),
        *(extra or []),
        *map(str, files),
    ]


def named(out: Path) -> bool:
    data = json.loads(out.read_text())
    init = data.get("initiating") or {}
    return PLANTED in (init.get("text") or "") and init.get("rank") == PLANTED_RANK


def compare(
    label: str, log: Path, rg: str | None, pats: Path, out: Path, runs: int, procs: bool = True
) -> None:
    cmds = {"d1": denpex_cmd(log)}
    if procs:
        cmds["d2"] = denpex_cmd(log, procs=2)
    if rg:
        cmds["rg"] = [rg, "-j1", "--no-mmap", "-c", "-f", str(pats), str(log)]
    res = alternated(cmds, out, runs)
    found = named(out / "d1.out")
    mb = log.stat().st_size / MB
    r = res.get("rg")
    d2 = res.get("d2")
    cols = [
        label,
        f"{mb:.0f}",
        f"{res['d1'].cpu:.2f}",
        f"{mb / res['d1'].cpu:.0f}",
        f"{r.cpu:.2f}" if r else "rg absent",
        f"**{res['d1'].cpu / r.cpu:.2f}**" if r else "-",
        f"{d2.cpu:.2f}" if d2 else "-",
        f"{d2.wall / r.wall:.2f}" if r and d2 else "-",
        f"{res['d1'].rss_mb:.0f}",
        f"{d2.rss_mb:.0f}" if d2 else "-",
        f"{r.rss_mb:.0f}" if r else "-",
        str(found),
    ]
    print("| " + " | ".join(cols) + " |", flush=True)


HEADER = (
    "| input | MB | denpex 1 proc CPU s | MB/s | rg -j1 CPU s | 1 proc / rg (CPU) | denpex 2 procs CPU s | "
    "2 procs / rg (wall) | RSS 1 proc MB | RSS 2 procs MB (per process) | rg RSS MB | planted line named |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--quick", action="store_true", help="100 MB instead of 1 GB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    parser.add_argument("--startup-only", action="store_true", help="only the start-up rows (7 KB log)")
    # An installed Denpex runs from its .pyc files; without them every run compiles ~50 modules
    # again (~130 ms), a start-up no user pays, so the children may write and read them.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rg = shutil.which("rg")
    pats = args.out / "patterns.txt"
    n = patterns_file(pats)
    print(f"patterns (the scanner's whole set, for every tool): {n}")
    print(f"ripgrep: {rg or 'NOT INSTALLED: rg columns are empty (apt-get install ripgrep)'}")
    print(f"runs: {args.runs}, alternated; figures are medians of child CPU seconds (user+sys)\n")
    print(HEADER)
    made: list[Path] = []
    if args.startup_only:
        startup(args.out, rg, pats, args.runs, made)
        return 0
    sizes = [10 * MB, 100 * MB] + ([] if args.quick else [1024 * MB])
    for size in sizes:
        log = args.out / f"multirank-{size // MB}MB.log"
        if not log.exists() or abs(log.stat().st_size - size) > 2 * MB:
            generate(log, size)
        made.append(log)
        compare("multi-rank log", log, rg, pats, args.out, args.runs)
    log = args.out / "dense.log"
    dense(log, 50 * MB)
    made.append(log)
    compare("dense matches", log, rg, pats, args.out, args.runs, procs=False)
    log = args.out / "no-newline.log"
    no_newline(log, 64 * MB)
    made.append(log)
    compare("no newline (\\r only)", log, rg, pats, args.out, args.runs, procs=False)
    startup(args.out, rg, pats, args.runs, made)

    print("\n## Library size (100 MB multi-rank log, 1 process, CPU s)")
    log = args.out / "multirank-100MB.log"
    print("| signatures | CPU s |\n|---|---|")
    for count in (10, 80, 500):
        with tempfile.TemporaryDirectory() as tmp:
            lib = _library_of_size(Path(tmp), count)
            res = alternated({"lib": denpex_cmd(log, extra=["--library", str(lib)])}, args.out, args.runs)
        print(f"| {count} | {res['lib'].cpu:.2f} |")
    if not args.keep:
        for path in made:
            path.unlink(missing_ok=True)
    return 0


def startup(out: Path, rg: str | None, pats: Path, runs: int, made: list[Path]) -> None:
    """The start-up rows: a 7 KB log with the user's cache, then with a cache that cannot be written."""
    small = out / "small-7KB.log"
    generate(small, 7 * 1024, ranks=8, reserve=3 * 1024)
    made.append(small)
    compare("start-up (7 KB log)", small, rg, pats, out, max(runs, 5), procs=False)
    saved = os.environ.get("DENPEX_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        blocker = Path(tmp) / "a-file"
        blocker.write_text(
            "a file where the cache folder's parent should be: not even root can write below it"
        )
        os.environ["DENPEX_CACHE_DIR"] = str(blocker / "denpex")
        try:
            compare("start-up, read-only cache", small, rg, pats, out, max(runs, 5), procs=False)
        finally:
            if saved is None:
                os.environ.pop("DENPEX_CACHE_DIR", None)
            else:
                os.environ["DENPEX_CACHE_DIR"] = saved


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
