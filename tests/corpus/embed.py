"""Embed a short failure excerpt in long healthy multi-rank output, as real logs hold it.

Users paste the failing part of a log; real files carry thousands of healthy lines first. The
prefix is torchrun-style DDP output from ``tests/healthy/generate.py`` (16 ranks over 2 nodes,
NCCL chatter, deprecation warnings, step lines), with the warnings that benign signatures name
left out, so it offers no line that competes with the excerpt's own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from tests.healthy.generate import torchrun_ddp

PREFIX_SEED = 5521
PREFIX_STEPS = 9400  # about 5,300 lines before the excerpt
PLANNED_STEPS = 20000  # what the step lines count towards: the run is cut off mid-training


@dataclass(frozen=True)
class Embedded:
    data: bytes
    offset: int  # lines before the excerpt: excerpt line n is line offset + n of ``data``


@cache
def healthy_prefix() -> bytes:
    """The healthy run that precedes every excerpt; it stops mid-training."""
    text = torchrun_ddp(
        random.Random(PREFIX_SEED), benign=False, steps=PREFIX_STEPS, finish=False, planned=PLANNED_STEPS
    )
    return text.encode("utf-8")


@cache
def healthy_ending() -> bytes:
    """The lines a successful torchrun run ends with, for excerpts that show no failure."""
    text = torchrun_ddp(
        random.Random(PREFIX_SEED), benign=False, steps=PREFIX_STEPS, finish=True, planned=PLANNED_STEPS
    )
    return text.encode("utf-8")[len(healthy_prefix()) :]


def embed(excerpt: bytes, *, healthy_end: bool = False) -> Embedded:
    """Put ``excerpt`` after the healthy prefix; ``healthy_end`` appends a successful ending."""
    prefix = healthy_prefix()
    data = prefix + excerpt
    if healthy_end:
        if not excerpt.endswith(b"\n"):
            data += b"\n"
        data += healthy_ending()
    return Embedded(data=data, offset=prefix.count(b"\n"))
