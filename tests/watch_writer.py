"""A training job's log, written in bursts on command: the writer half of the watch tests.

Run as ``python -m tests.watch_writer LOG``; it reads commands from standard input, one a line:
``burst NAME`` appends that burst, ``rotate`` moves LOG to LOG.1 (the writer goes on in a new
LOG, as a log rotator would leave it), ``exit CODE`` ends it with that code. Each command is
answered with ``done`` on standard error once its bytes are written.
"""

from __future__ import annotations

import os
import sys

RECOMPILE = (
    "W0115 10:22:41.553000 7712 torch/_dynamo/convert_frame.py:906] [0/8] "
    "torch._dynamo hit config.recompile_limit (8)\n"
    "W0115 10:22:41.553000 7712 torch/_dynamo/convert_frame.py:906] [0/8]    "
    "function: 'forward' (/workspace/model.py:88)\n"
)
OOM = (
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 1 has a total capacity of 79.15 GiB of which 1.20 GiB is free.\n"
)


def watchdog(rank: int) -> str:
    """ProcessGroupNCCL's watchdog line on ``rank``: it only re-reports a peer's failure."""
    return (
        f"[rank{rank}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
        "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
    )


def steps(first: int, last: int, rate: str) -> str:
    """Progress lines of rank 0, steps ``first`` to ``last``."""
    return "".join(f"[rank0]: step {s} loss {2 + 1 / s:.4f} {rate} it/s\n" for s in range(first, last + 1))


BURSTS = {
    "warmup": steps(1, 40, "1.21"),
    "degraded": RECOMPILE + steps(41, 60, "0.25"),
    "training": steps(61, 200, "0.25"),
    "failure": OOM,
    "cascade": watchdog(0) + watchdog(3),
}


def generated(index: int) -> bytes:
    """Block ``index`` of a long run's log (about 100 KB, deterministic)."""
    out = []
    for k in range(1000):
        s = index * 1000 + k
        out.append(
            f"[rank{k % 8}]: step {s} loss {2 + 1 / (s + 1):.4f} lr 3.0e-04 grad_norm 0.{k % 97:02d} 1.2 it/s"
        )
        if k % 100 == 7:
            out.append(
                f"[rank{k % 8}]: n7:1234:1290 [{k % 8}] NCCL INFO Channel 02/0 : {k % 8}[7] -> 0[0] via IPC"
            )
        if k % 250 == 3:
            out.append(f"[rank{k % 8}]: ERROR:root:failed to upload metrics batch {s}, will retry")
        if k == 500:
            out.append(RECOMPILE.rstrip("\n"))
    return ("\n".join(out) + "\n").encode()


def generate(path: str, megabytes: int) -> int:
    with open(path, "ab") as out:
        written, index = 0, 0
        while written < megabytes << 20:
            block = generated(index)[: (megabytes << 20) - written]
            out.write(block)
            written += len(block)
            index += 1
    return 0


def main(path: str) -> int:
    out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - it is reopened on rotation
    for command in sys.stdin:
        word, _, arg = command.strip().partition(" ")
        if word == "burst":
            text = BURSTS[arg]
            # A line cut in two writes (in the first line: the burst's lines all complete together).
            cut = min(len(text) // 2, text.index("\n") // 2 + 1)
            out.write(text[:cut])
            out.flush()
            out.write(text[cut:])
            out.flush()
        elif word == "rotate":
            out.close()
            os.replace(path, path + ".1")
            out = open(path, "a", encoding="utf-8")  # noqa: SIM115
        elif word == "exit":
            out.close()
            return int(arg)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--generate":
        sys.exit(generate(sys.argv[1], int(sys.argv[3])))
    sys.exit(main(sys.argv[1]))
