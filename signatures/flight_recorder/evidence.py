"""The finding as evidence: one sentence a signature recognises, and the details below it.

The sentence becomes line 1 of the lagging rank's dump, scanned with the library like any log
line, so the signature that names it (distributed/nccl-collective-rank-missing.yaml, or
collective-mismatch-desync.yaml for a mismatch) brings its summary, fixes and decision path.
Only the sentence is scanned; what the dump itself says (group names, stacks) goes into the
context lines, so a crafted dump cannot plant a line another signature would match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from signatures.flight_recorder.analysis import (
    MISMATCH,
    MISSING,
    Analysis,
    Finding,
    Position,
    op_name,
    stack_of,
)
from signatures.flight_recorder.parse import Entry, Frame

# c10d's OpType names, as the watchdog prints them ("WorkNCCL(SeqNum=8, OpType=ALLREDUCE").
OP_TYPES = {
    "all_reduce": "ALLREDUCE",
    "allreduce_coalesced": "ALLREDUCE_COALESCED",
    "all_gather": "ALLGATHER",
    "_allgather_base": "_ALLGATHER_BASE",
    "_all_gather_base": "_ALLGATHER_BASE",
    "all_gather_into_tensor_coalesced": "ALLGATHER_COALESCED",
    "reduce_scatter": "REDUCE_SCATTER",
    "_reduce_scatter_base": "_REDUCE_SCATTER_BASE",
    "reduce_scatter_tensor_coalesced": "REDUCE_SCATTER_COALESCED",
    "all_to_all": "ALLTOALL",
    "all_to_all_single": "ALLTOALL_BASE",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_LIBRARY_PATHS = ("torch/distributed/", "torch/nn/parallel/", "multiprocessing/", "site-packages/")
MAX_STACK = 3  # frames shown per stack: the caller's own lines, not the whole interpreter


def sentence(f: Finding) -> str:
    """The one line that states the finding (what the signatures' fingerprints match)."""
    where = f"seq {f.seq} of {_group(f)}"
    named, others = _ranks_word(f.named), _ranks_word(f.others)
    op = op_type(f.entry)
    if f.kind == MISSING:
        return f"{named} never entered {op} {where}; {others} waited in it"
    if f.kind == MISMATCH:
        assert f.odd_entry is not None
        return (
            f"{named} entered {_op_and_size(f.odd_entry)} as {where}, where {others} entered "
            f"{_op_and_size(f.entry)}: the ranks disagree on the collective"
        )
    return f"{named} enqueued {op} {where} but never started it; {others} started it and waited"


def details(analysis: Analysis) -> list[str]:
    """Context lines under the sentence: where each side stood, and what it was calling."""
    f = analysis.finding
    assert f is not None
    lines = [_position_line(f.named, f.positions)]
    stack = _stack(stack_of(f.positions.get(f.named[0])))
    if stack:
        lines.append(f"rank {f.named[0]}'s last collective was called from {stack}")
    when = _time(f.entry.time_created_ns)
    since = f"; the first entered seq {f.seq} at {when}" if when else ""
    lines.append(_position_line(f.others, f.positions) + since)
    stack = _stack(f.entry.frames)
    if stack:
        lines.append(f"they called seq {f.seq} from {stack}")
    lines.append(
        f"flight recorder: {analysis.dumps} dumps compared; {_group(f)} has ranks {ranges(f.group.ranks)}"
    )
    if f.without_dump:
        lines.append(f"no dump was given for ranks {ranges(f.without_dump)} of that group")
    return lines


def summary_fact(analysis: Analysis, version: str) -> str:
    """The environment fact that says the dumps were read, and what they showed."""
    groups = "1 group" if analysis.groups == 1 else f"{analysis.groups} groups"
    text = f"{analysis.dumps} dumps (format {version}), {groups} compared"
    if analysis.finding is None:
        text += "; no rank behind or disagreeing"
    if analysis.without_dump:
        text += f"; no dump for ranks {ranges(analysis.without_dump)}"
    return text


def op_type(e: Entry) -> str:
    """'ALLREDUCE' for 'nccl:all_reduce', in the watchdog's words."""
    name = op_name(e)
    return OP_TYPES.get(name) or _clean(name).upper() or "?"


def ranges(ranks: Iterable[int]) -> str:
    """'0-36,38-63' for a set of ranks."""
    out: list[str] = []
    items = sorted(set(ranks))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


def _ranks_word(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranges(ranks)}"


def _group(f: Finding) -> str:
    g = f.group
    label = "the default group" if g.is_default else f"group {_clean(g.shown)}"
    return f"{label} (pg {g.pg_id})"


def _op_and_size(e: Entry) -> str:
    sizes = ",".join("x".join(str(d) for d in shape) or "scalar" for shape in e.input_sizes[:4])
    dtype = _clean(e.input_dtypes[0]) if e.input_dtypes else ""
    shown = f" [{sizes}]" if sizes else ""
    return f"{op_type(e)}{shown}" + (f" {dtype}" if dtype else "")


def _position_line(ranks: Sequence[int], positions: dict[int, Position]) -> str:
    # Ranks that stood at the same place are told once: "ranks 0-36,38-63: last entered ...".
    by_place: dict[tuple[int | None, int | None], list[int]] = {}
    for r in ranks:
        p = positions.get(r)
        by_place.setdefault((p.last_entered, p.last_completed) if p else (None, None), []).append(r)
    parts = []
    for (entered, completed), members in sorted(by_place.items(), key=lambda kv: kv[1][0])[:3]:
        e = "none" if entered is None else f"seq {entered}"
        c = "none" if completed is None else f"seq {completed}"
        parts.append(f"{_ranks_word(members)}: last entered {e}, last completed {c}")
    return "; ".join(parts)


def _stack(frames: Sequence[Frame]) -> str:
    # Innermost frames are torch's own (all_reduce, the c10d logger's wrapper): show the caller's.
    own = [fr for fr in frames if not any(lib in fr.filename for lib in _LIBRARY_PATHS)]
    chosen = (own or list(frames))[:MAX_STACK]
    return " <- ".join(f"{_clean(fr.name)} ({_short_path(fr.filename)}:{fr.line})" for fr in chosen)


def _short_path(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return _clean("/".join(parts[-2:]))


def _time(ns: int) -> str | None:
    if ns <= 0:
        return None
    try:
        return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def _clean(text: str) -> str:
    """A name from the dump, safe to print in one line: letters, digits and ._- only."""
    return _UNSAFE.sub("_", str(text))[:60]
