"""A flight-recorder dump, pickled or JSON, turned into typed records.

The format is PyTorch's (torch/csrc/distributed/c10d/FlightRecorder.hpp and
FlightRecorderDetail.hpp, format "2.10" in torch 2.13): a dict with ``version``, ``pg_config``
(group name -> name, desc, ranks as the text "[0, 1]"), ``pg_status`` (pg id -> last enqueued,
started and completed collective), ``comm_lib_version`` (older: ``nccl_version``) and ``entries``,
one per recorded collective or p2p op. The JSON form (TORCH_NCCL_USE_JSON / dump_json) has the
same keys, strings for numbers in pg_status, 0 for unknown times and no stacks. The dump does
not say which rank wrote it: PyTorch's own analyser takes it from the file name, and so do we.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from signatures.flight_recorder.errors import DumpTooLarge, MalformedDump
from signatures.flight_recorder.sniff import MAX_DUMP_BYTES, is_pickle
from signatures.flight_recorder.sniff import looks_like_dump as looks_like_dump  # its old home
from signatures.flight_recorder.unpickle import check_plain, load_pickle
from signatures.lines import rank_from_name

STATES = ("scheduled", "started", "completed")
MAX_FRAMES = 24  # frames kept per entry: the collective's caller is within the first few
_RANKS_TEXT = re.compile(r"^\s*\[\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\]\s*$")


@dataclass(frozen=True)
class Frame:
    name: str
    filename: str
    line: int

    def __str__(self) -> str:
        return f"{self.name} at {self.filename}:{self.line}"


@dataclass(frozen=True)
class Entry:
    """One recorded collective (or p2p op) on one rank."""

    record_id: int
    pg_id: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str  # "nccl:all_reduce", "nccl:send 0->1"
    state: str  # scheduled (enqueued), started (kernel running) or completed
    retired: bool  # the watchdog saw the work finish (Gloo's recorder never moves state past scheduled)
    is_p2p: bool
    time_created_ns: int
    time_started_ns: int | None
    time_completed_ns: int | None
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    timeout_ms: int | None
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class Group:
    """A process group as one rank's dump describes it."""

    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Dump:
    """One rank's dump."""

    name: str
    rank: int
    version: str
    comm_lib_version: str | None
    groups: dict[str, Group]  # by group name
    last_enqueued: dict[int, int]  # pg id -> collective seq id, from pg_status
    last_completed: dict[int, int]
    entries: tuple[Entry, ...]


def parse_dump(data: bytes, name: str) -> Dump:
    """Read one dump file's bytes into a Dump; raise DumpError subclasses."""
    raw = load_pickle(data, name) if is_pickle(data[:2]) else _load_json(data, name)
    if not isinstance(raw, dict):
        raise MalformedDump(f"{name}: a {type(raw).__name__}, not the dict a flight-recorder dump is")
    if "entries" not in raw and "pg_config" not in raw:
        raise MalformedDump(f"{name}: has neither 'entries' nor 'pg_config': not a flight-recorder dump")
    rank = raw.get("rank") if isinstance(raw.get("rank"), int) else rank_from_name(name)
    if rank is None:
        raise MalformedDump(
            f"{name}: the dump does not say its rank and the file name does not either; "
            "keep PyTorch's names (nccl_trace_rank_<N>)"
        )
    entries = raw.get("entries")
    entries = [] if entries is None else entries  # torch leaves the key out when nothing was recorded
    if not isinstance(entries, list):
        raise MalformedDump(f"{name}: 'entries' is a {type(entries).__name__}, not a list")
    enqueued, completed = _pg_status(raw.get("pg_status"), name)
    version = raw.get("comm_lib_version", raw.get("nccl_version"))
    return Dump(
        name=name,
        rank=rank,
        version=str(raw.get("version", "?")),
        comm_lib_version=version if isinstance(version, str) and version else None,
        groups=_groups(raw.get("pg_config"), name),
        last_enqueued=enqueued,
        last_completed=completed,
        entries=tuple(_entry(e, name, i) for i, e in enumerate(entries)),
    )


def _load_json(data: bytes, name: str) -> Any:
    if len(data) > MAX_DUMP_BYTES:
        raise DumpTooLarge(f"{name}: the dump is {len(data)} bytes, past the {MAX_DUMP_BYTES} byte bound")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        why = f"shaped like a JSON flight-recorder dump, but not valid JSON ({exc})"
        raise MalformedDump(f"{name}: {why}") from None
    check_plain(value, name)
    return value


def _groups(raw: Any, name: str) -> dict[str, Group]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise MalformedDump(f"{name}: 'pg_config' is a {type(raw).__name__}, not a dict")
    out: dict[str, Group] = {}
    for key, info in raw.items():
        if not isinstance(info, dict):
            raise MalformedDump(f"{name}: pg_config[{str(key)[:40]!r}] is not a dict")
        out[str(key)] = Group(
            name=str(info.get("name", key)),
            desc=str(info.get("desc", "undefined")),
            ranks=_ranks(info.get("ranks"), name, str(key)),
        )
    return out


def _ranks(raw: Any, name: str, group: str) -> tuple[int, ...]:
    # PyTorch writes the member list as text, "[0, 1, 2]"; read it as numbers, never evaluate it.
    if isinstance(raw, list) and all(isinstance(r, int) for r in raw):
        return tuple(raw)
    if isinstance(raw, str) and _RANKS_TEXT.match(raw):
        return tuple(int(r) for r in re.findall(r"\d+", raw))
    raise MalformedDump(f"{name}: pg_config[{group[:40]!r}].ranks is not a list of ranks")


def _pg_status(raw: Any, name: str) -> tuple[dict[int, int], dict[int, int]]:
    enqueued: dict[int, int] = {}
    completed: dict[int, int] = {}
    if not isinstance(raw, dict):
        return enqueued, completed
    for key, status in raw.items():
        pg = _int_or_none(key)
        if pg is None or not isinstance(status, dict):
            continue
        for field, into in (("last_enqueued_collective", enqueued), ("last_completed_collective", completed)):
            value = _int_or_none(status.get(field))
            if value is not None and value >= 0:
                into[pg] = value
    return enqueued, completed


def _entry(raw: Any, name: str, index: int) -> Entry:
    where = f"{name}: entries[{index}]"
    if not isinstance(raw, dict):
        raise MalformedDump(f"{where} is a {type(raw).__name__}, not a dict")
    group = raw.get("process_group")
    if not (isinstance(group, list | tuple) and len(group) == 2):
        raise MalformedDump(f"{where}.process_group is not a (name, desc) pair")
    profiling = raw.get("profiling_name")
    if not isinstance(profiling, str):
        raise MalformedDump(f"{where}.profiling_name is missing")
    state = raw.get("state")
    if state not in STATES:
        raise MalformedDump(f"{where}.state is {str(state)[:20]!r}, not one of {', '.join(STATES)}")
    seq = _int_or_none(raw.get("collective_seq_id", raw.get("seq_id")))
    if seq is None:
        raise MalformedDump(f"{where} has no collective_seq_id")
    is_p2p = raw.get("is_p2p")
    return Entry(
        record_id=_int_or_none(raw.get("record_id")) or 0,
        pg_id=_int_or_none(raw.get("pg_id")) or 0,
        pg_name=str(group[0]),
        pg_desc=str(group[1]),
        collective_seq_id=seq,
        p2p_seq_id=_int_or_none(raw.get("p2p_seq_id")) or 0,
        op_id=_int_or_none(raw.get("op_id")) or 0,
        profiling_name=profiling,
        state=state,
        retired=raw.get("retired") is True,
        is_p2p=is_p2p if isinstance(is_p2p, bool) else any(p in profiling for p in ("send", "recv")),
        time_created_ns=_int_or_none(raw.get("time_created_ns")) or 0,
        time_started_ns=_int_or_none(raw.get("time_discovered_started_ns")) or None,
        time_completed_ns=_int_or_none(raw.get("time_discovered_completed_ns")) or None,
        input_sizes=_sizes(raw.get("input_sizes")),
        output_sizes=_sizes(raw.get("output_sizes")),
        input_dtypes=tuple(str(x) for x in raw.get("input_dtypes") or () if isinstance(x, str)),
        output_dtypes=tuple(str(x) for x in raw.get("output_dtypes") or () if isinstance(x, str)),
        timeout_ms=_int_or_none(raw.get("timeout_ms")),
        frames=_frames(raw.get("frames")),
    )


def _sizes(raw: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(
        tuple(d for d in shape if isinstance(d, int)) for shape in raw if isinstance(shape, list | tuple)
    )


def _frames(raw: Any) -> tuple[Frame, ...]:
    if not isinstance(raw, list | tuple):
        return ()
    out = []
    for f in raw[:MAX_FRAMES]:
        if isinstance(f, dict):
            line = _int_or_none(f.get("line")) or 0
            out.append(Frame(str(f.get("name", "?")), str(f.get("filename", "?")), line))
    return tuple(out)


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
