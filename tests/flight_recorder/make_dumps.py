"""Regenerate the flight-recorder dumps the tests read. Two sources, both committed:

1. ``python tests/flight_recorder/make_dumps.py``: dumps *built to the format* PyTorch writes, for
   the NCCL cases a CPU cannot produce (64 ranks, started/completed states, stacks). The format is
   that of torch 2.13.0 (format "2.10"): torch/csrc/distributed/c10d/FlightRecorder.hpp (the keys,
   ``version_val``), FlightRecorderDetail.hpp (``getCollectiveTrace``: one dict per entry with
   record_id, pg_id, process_group as a (name, desc) tuple, thread_name, thread_id,
   collective_seq_id, p2p_seq_id, op_id, profiling_name, time_created_ns, input/output sizes
   and dtypes, state, time_discovered_started/completed_ns or None, retired, timeout_ms, is_p2p,
   frames; ``getPgConfig``: ranks as the text "[0, 1]"; ``getPgStatus``; ``dump_json``: the JSON
   form, sorted keys, 0 for unknown times, pg_status values as strings, no frames). PyTorch
   pickles with protocol 2; so does this script (the same data, not the same bytes).
2. ``python tests/flight_recorder/make_dumps.py --real`` with torch 2.13 installed (any CPU build):
   the *real writer*. Four Gloo ranks on this machine's loopback, TORCH_FR_BUFFER_SIZE=200, run
   a few all_reduces, then one scenario each (a rank skips the last all_reduce; a rank broadcasts
   where the others all-reduce; every rank completes) and each rank writes
   ``torch._C._distributed_c10d._dump_fr_trace(includeStackTraces=False)`` as nccl_trace_rank_<N>
   (and ``_dump_fr_trace_json()`` of the stuck case into stuck-json/), byte for byte. Stacks are
   left out so no path of the machine that made them is committed. Gloo's recorder never moves
   an entry past "scheduled"; ``retired`` and pg_status say what completed.

The NCCL recorder itself needs CUDA, which is why the 64-rank cases are built.
"""

from __future__ import annotations

import io
import json
import pickle
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
T0 = 1_767_261_600_000_000_000  # 2026-01-01T10:00:00Z, in ns like c10::getTime()
STEP_NS = 350_000_000
TIMEOUT_MS = 600_000
TORCH_C10D = "site-packages/torch/distributed/distributed_c10d.py"


def frames(caller_line: int) -> list[dict[str, Any]]:
    """A stack as torch symbolises it, innermost first."""
    return [
        {"name": "all_reduce", "filename": TORCH_C10D, "line": 2501},
        {"name": "wrapper", "filename": "site-packages/torch/distributed/c10d_logger.py", "line": 83},
        {"name": "train_step", "filename": "train.py", "line": caller_line},
        {"name": "main", "filename": "train.py", "line": 120},
    ]


def entry(
    record_id: int,
    seq: int,
    *,
    op: str = "all_reduce",
    sizes: list[list[int]] | None = None,
    dtype: str = "Float",
    state: str = "completed",
    pg: tuple[str, str] = ("0", "default_pg"),
    pg_id: int = 0,
    caller_line: int = 88,
) -> dict[str, Any]:
    """One entry of getCollectiveTrace (FlightRecorderDetail.hpp, torch 2.13)."""
    sizes = sizes if sizes is not None else [[1024, 1024]]
    created = T0 + seq % 1000 * STEP_NS
    started = created + 1_000_000 if state in ("started", "completed") else None
    completed = created + 40_000_000 if state == "completed" else None
    return {
        "frames": frames(caller_line),
        "record_id": record_id,
        "pg_id": pg_id,
        "process_group": pg,
        "thread_name": "pt_main_thread",
        "thread_id": "140337184278336",
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": created,
        "input_sizes": sizes,
        "input_dtypes": [dtype] * len(sizes),
        "output_sizes": sizes,
        "output_dtypes": [dtype] * len(sizes),
        "state": state,
        "time_discovered_started_ns": started,
        "time_discovered_completed_ns": completed,
        "retired": state == "completed",
        "timeout_ms": TIMEOUT_MS,
        "is_p2p": False,
    }


def dump(world: int, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """dump_dict: version, pg_config, comm_lib_version, pg_status, entries."""
    status = {}
    for pg in sorted({e["pg_id"] for e in entries}) or [0]:
        mine = [e for e in entries if e["pg_id"] == pg]
        status[str(pg)] = {
            "last_enqueued_collective": max((e["collective_seq_id"] for e in mine), default=-1),
            "last_started_collective": max(
                (e["collective_seq_id"] for e in mine if e["state"] != "scheduled"), default=-1
            ),
            "last_completed_collective": max(
                (e["collective_seq_id"] for e in mine if e["state"] == "completed"), default=-1
            ),
        }
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "comm_lib_version": "2.21.5",
        "pg_status": status,
        "entries": entries,
    }


def hang64() -> dict[str, dict[str, Any]]:
    """64 ranks; rank 37 never enters ALLREDUCE seq 81234, the others started it and wait."""
    out = {}
    for rank in range(64):
        last = 81233 if rank == 37 else 81234
        es = [entry(i, seq) for i, seq in enumerate(range(81225, last + 1))]
        if rank != 37:
            es[-1] = entry(len(es) - 1, 81234, state="started", caller_line=91)
        out[f"nccl_trace_rank_{rank}"] = dump(64, es)
    return out


def mismatch8() -> dict[str, dict[str, Any]]:
    """8 ranks; at seq 1151 rank 5 broadcasts 4096 floats where the others all-reduce one."""
    out = {}
    for rank in range(8):
        es = [entry(i, seq, sizes=[[1]]) for i, seq in enumerate(range(1145, 1151))]
        if rank == 5:
            es.append(entry(6, 1151, op="broadcast", sizes=[[4096]], state="started", caller_line=140))
        else:
            es.append(entry(6, 1151, sizes=[[1]], state="started"))
        out[f"nccl_trace_rank_{rank}"] = dump(8, es)
    return out


def clean8() -> dict[str, dict[str, Any]]:
    """8 ranks, every collective completed everywhere: nothing to claim."""
    entries = [entry(i, s) for i, s in enumerate(range(40, 50))]
    return {f"nccl_trace_rank_{r}": dump(8, entries) for r in range(8)}


def as_json(d: dict[str, Any]) -> bytes:
    """dump_json's form of a dump: no frames, 0 for unknown times, pg_status values as text."""
    out = {k: v for k, v in d.items() if k != "entries"}
    out["pg_status"] = {pg: {k: str(v) for k, v in s.items()} for pg, s in d["pg_status"].items()}
    out["entries"] = [
        {
            **{k: v for k, v in e.items() if k != "frames"},
            "time_discovered_started_ns": e["time_discovered_started_ns"] or 0,
            "time_discovered_completed_ns": e["time_discovered_completed_ns"] or 0,
        }
        for e in d["entries"]
    ]
    return json.dumps(out, sort_keys=True, separators=(",", ":")).encode()


def watchdog_log(world: int, seq: int, skip: int) -> str:
    """Every rank but ``skip`` prints only the watchdog's timeout (ProcessGroupNCCL.cpp wording)."""
    lines = []
    for rank in range(world):
        if rank == skip:
            continue
        lines.append(
            f"[rank{rank}]:[E0101 10:10:{rank % 60:02d}.{rank:06d} {1000 + rank} ProcessGroupNCCL.cpp:632] "
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            f"OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)={TIMEOUT_MS}) ran for "
            f"{TIMEOUT_MS + 41} milliseconds before timing out."
        )
    return "\n".join(lines) + "\n"


def write_zip(path: Path, files: dict[str, bytes]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 10, 0, 0))  # stable bytes on rerun
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    path.write_bytes(buffer.getvalue())


def built() -> None:
    pickled = {n: {k: pickle.dumps(v, protocol=2) for k, v in case().items()} for n, case in CASES.items()}
    write_zip(HERE / "hang64.zip", pickled["hang64"])
    write_zip(HERE / "clean8.zip", pickled["clean8"])
    write_zip(HERE / "mismatch8-json.zip", {f"{k}.json": as_json(v) for k, v in mismatch8().items()})
    (HERE / "hang64-watchdog.log").write_text(watchdog_log(64, 81234, skip=37), encoding="utf-8")


CASES = {"hang64": hang64, "mismatch8": mismatch8, "clean8": clean8}


def real() -> None:
    """Run four Gloo ranks per scenario with the flight recorder on; keep what torch wrote."""
    import os
    import socket

    import torch.multiprocessing as mp

    for scenario in ("stuck", "mismatch", "clean"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        out = HERE / "real-gloo" / scenario
        out.mkdir(parents=True, exist_ok=True)
        os.environ["TORCH_FR_BUFFER_SIZE"] = "200"
        mp.start_processes(_rank, args=(4, port, scenario, str(out)), nprocs=4, start_method="fork")


def _rank(rank: int, world: int, port: int, scenario: str, out: str) -> None:
    import os
    import time

    import torch
    import torch._C._distributed_c10d as c10d
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    if scenario == "stuck" and rank != 3:
        dist.all_reduce(t, async_op=True)  # rank 3 never enters it
    elif scenario == "mismatch":
        if rank == 2:
            dist.broadcast(torch.ones(8), src=0, async_op=True)
        else:
            dist.all_reduce(t, async_op=True)
    elif scenario == "clean":
        dist.all_reduce(t)
        dist.barrier()
    time.sleep(2)  # let the others record theirs before dumping
    Path(out, f"nccl_trace_rank_{rank}").write_bytes(c10d._dump_fr_trace(includeStackTraces=False))
    if scenario == "stuck":
        json_dir = Path(out).parent / "stuck-json"
        json_dir.mkdir(exist_ok=True)
        (json_dir / f"nccl_trace_rank_{rank}.json").write_bytes(c10d._dump_fr_trace_json())
    os._exit(0)  # a pending collective would block a clean shutdown


if __name__ == "__main__":
    if "--real" in sys.argv[1:]:
        real()
    else:
        built()
