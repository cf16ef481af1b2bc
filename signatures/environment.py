"""Environment facts a log states about itself: versions, GPU model, world size.

These come from `python -m torch.utils.collect_env` output, `nvidia-smi`, NCCL's INFO banner and
the launcher's own lines. Each fact is a scan pattern like any fingerprint, so reading them costs
nothing extra; the first value seen wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FactPattern:
    key: str
    scan: str  # scan form, for the bulk scanner
    verify: re.Pattern[str]  # group "v" is the value, matched on the unwrapped message
    value: str | None = None  # the value when the match itself is the fact


def _fact(key: str, regex: str, *, scan: str | None = None, value: str | None = None) -> FactPattern:
    return FactPattern(key, scan or re.sub(r"\(\?P<v>", "(", regex).lstrip("^"), re.compile(regex), value)


FACTS: tuple[FactPattern, ...] = (
    _fact("torch", r"PyTorch version: (?P<v>[0-9][\w.+-]*)"),
    _fact("torch", r"\btorch(?:==| version:? )(?P<v>[0-9]+\.[0-9]+[\w.+-]*)"),
    _fact("cuda", r"CUDA used to build PyTorch: (?P<v>[0-9][\w.]*)"),
    _fact("cuda", r"CUDA Version: (?P<v>[0-9]+\.[0-9]+)"),
    _fact("cuda", r"CUDA runtime version: (?P<v>[0-9][\w.]*)"),
    _fact("driver", r"Nvidia driver version: (?P<v>[0-9][\w.]*)"),
    _fact("driver", r"Driver Version: (?P<v>[0-9]+\.[0-9.]+)"),
    _fact("nccl", r"NCCL version (?P<v>[0-9]+\.[0-9]+\.[0-9]+[\w.+-]*)"),
    _fact("triton", r"\btriton(?:==| version:? )(?P<v>[0-9]+\.[0-9]+[\w.+-]*)"),
    _fact("python", r"Python version: (?P<v>3\.[0-9]+(?:\.[0-9]+)?)"),
    _fact("gpu", r"GPU 0: (?P<v>NVIDIA [A-Za-z0-9 .-]+?)(?: \(UUID|$)"),
    # nvidia-smi's table row; scanning for the literal first keeps the leading `| 0 ` cheap.
    _fact(
        "gpu",
        r"\| +[0-9]+ +(?P<v>NVIDIA [A-Za-z0-9 .-]+?) +(?:On|Off) +\|",
        scan=r"NVIDIA [^|\n]+(?:On|Off) +\|",
    ),
    # DeepSpeed's launcher prints "dist_world_size=4"
    _fact("world_size", r"\b(?:dist_world_size|world_size|WORLD_SIZE|world size)[=: ]+(?P<v>[0-9]+)\b"),
    _fact("world_size", r"\bnRanks (?P<v>[0-9]+)\b"),
    _fact("world_size", r"\bRANK and WORLD_SIZE in environ: [0-9]+/(?P<v>[0-9]+)\b"),  # DeiT-style utils
    _fact("world_size", r"\bRank of current process: [0-9]+\. World size: (?P<v>[0-9]+)\b"),  # detectron2
    # "Initialized (rank/world-size) 0/1"
    _fact("world_size", r"\(?rank/world[-_ ]size\)?:? [0-9]+/(?P<v>[0-9]+)\b"),
    # How many nodes the job spans: with one, a local rank is the global rank.
    _fact("nnodes", r"--nnodes[= ](?P<v>[0-9]+)(?::[0-9]+)?\b"),
    _fact("nnodes", r"\b(?:nnodes|NNODES|num_nodes|num_machines)[=: ]+(?P<v>[0-9]+)\b"),
    _fact("nnodes", r"\bgroup_world_size=(?P<v>[0-9]+)\b"),
    _fact("nnodes", r"\bnNodes (?P<v>[0-9]+)\b"),
    _fact("nnodes", r"--(?P<v>standalone)\b"),
    # torchrun started with --nproc-per-node and no --nnodes or rendezvous runs on one node.
    _fact(
        "nnodes",
        r"\b(?:torchrun|torch\.distributed\.(?:run|launch))\b(?![^\n]*--(?:nnodes|rdzv|node[_-]rank))"
        r"[^\n]*--nproc[_-]per[_-]node",
        scan=r"(?:torchrun|torch\.distributed\.(?:run|launch))[^\n]*--nproc[_-]per[_-]node",
        value="1",
    ),
    # A process stating its own rank in its settings ("self.dist_rank: 1", "global_rank=3",
    # "RANK: 2", "{'rank': 3, ...}"): a line or a field that begins with the key, not a sentence
    # ("Waiting for rank: 4"), or its rank beside the count of all ("nranks: 2 local rank: 1":
    # Paddle's communicator, whose ranks are the job's; detectron2's "Rank of current process: 0.
    # World size: 4"). attribution.py trusts it only in a log of that one process.
    _fact(
        "declared_rank",
        r"(?:(?:^|[{,(]\s*)['\"]?(?:\w+\.)*(?:(?:dist|global)_rank|RANK|rank)['\"]?(?:=|: ?)"
        r"|\bnranks: ?[0-9]+,? (?:local )?rank: ?|\bRank of current process: |\brank/world[-_ ]size\)?:? "
        r"|\brank_id(?:=|: ?))"  # Paddle's "HybridParallelInfo: rank_id: 0, mp_degree: 1, ..."
        r"(?P<v>[0-9]+)\b",
        scan=(
            r"(?:dist_rank|global_rank|RANK|rank|rank_id)['\"]?(?:=|: ?)[0-9]|nranks: ?[0-9]"
            r"|Rank of current process: [0-9]|rank/world[-_ ]size\)?:? [0-9]"
        ),
    ),
    # Evidence the engine looks for before it asks (signatures/missing.py); not environment.
    _fact("last_reason", r"\blast reason: (?P<v>\S.*)"),
    _fact("xid", r"\bNVRM: Xid \((?P<v>[^)\n]+)\)"),
)
EVIDENCE_ONLY = frozenset({"declared_rank", "last_reason", "step", "xid"})  # step: read from progress lines


def read_fact(pattern: FactPattern, message: str) -> str | None:
    """The value ``pattern`` reads from ``message``, or None."""
    m = pattern.verify.search(message)
    if m is None:
        return None
    return pattern.value if pattern.value is not None else m.group("v").strip()
