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


def _fact(key: str, regex: str, *, scan: str | None = None) -> FactPattern:
    return FactPattern(key, scan or re.sub(r"\(\?P<v>", "(", regex).lstrip("^"), re.compile(regex))


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
    _fact("world_size", r"\b(?:world_size|WORLD_SIZE|world size)[=: ]+(?P<v>[0-9]+)\b"),
    _fact("world_size", r"\bnRanks (?P<v>[0-9]+)\b"),
)


def read_fact(pattern: FactPattern, message: str) -> str | None:
    m = pattern.verify.search(message)
    return m.group("v").strip() if m else None
