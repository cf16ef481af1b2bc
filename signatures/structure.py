"""Lines that tell who is who: the launcher's failure table, NCCL's communicator lines, mp.spawn.

A failing line often carries no rank of its own, but the log names it elsewhere: torchrun's
failure table says which rank failed first, on which host, with which local rank and pid;
NCCL's ``host:pid:tid`` prefix becomes a rank through the ``comm 0x... rank N nranks M`` line of
the same process; mp.spawn says whose traceback follows. Each such line is a scan pattern like a
fingerprint; reading it yields a ``Sighting``, and ``attribution.py`` puts the sightings together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from signatures.lines import LineFacts, rank_from_name, unwrap


@dataclass(frozen=True)
class Sighting:
    """What one line says about a process: its rank, local rank, host, pid."""

    file_index: int
    line: int
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    nranks: int | None = None  # the size of the NCCL communicator ``rank`` is counted in
    first_failure: bool = False  # the launcher's "Root Cause (first observed failure)" row
    spawn: bool = False  # mp.spawn: the traceback below this line is this rank's
    time: str | None = None
    stop: bool = False  # the process says it was asked to stop (SIGTERM, SIGINT received)
    section: str | None = None  # "begin" or "end": a rule naming the rank whose output it bounds
    finished: bool = False  # the run says it finished as meant (MLPerf's run_stop with success)


Reader = Callable[[int, int, LineFacts, Sequence[str], Callable[[], Sequence[str]]], Sighting | None]


@dataclass(frozen=True)
class StructurePattern:
    name: str
    needles: tuple[bytes, ...]  # one of these literals is in every such line (see shapes.Shape)
    verify: re.Pattern[str]
    read: Reader
    scan_form: str = ""  # without needles: what the bulk scanner looks for, a superset of verify

    @property
    def scan(self) -> str:
        return self.scan_form or "|".join(re.escape(n.decode("ascii")) for n in self.needles)


_TABLE_ROW = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_TABLE_FIELD = re.compile(r"^\s*(?P<key>host|time|exitcode)\s*: (?P<value>.+?)\s*$")
_TABLE_PID = re.compile(r"\(pid: (?P<pid>\d+)\)")
_TABLE_ENTRY = re.compile(r"^\s*\[\d+\]:\s*$")


def _read_table_row(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """torchrun's failure table: `rank : 12 (local_rank: 4)` with host, time and pid around it."""
    m = _TABLE_ROW.match(facts.message)
    if m is None:
        return None
    fields: dict[str, str] = {}
    first = False
    for raw in reversed(before[-8:]):
        message = unwrap(raw).message
        if (f := _TABLE_FIELD.match(message)) is not None:
            fields.setdefault(f.group("key"), f.group("value"))
        elif _TABLE_ENTRY.match(message):
            continue
        else:
            first = message.strip().startswith("Root Cause")
            break
    for raw in after()[:2]:
        if (f := _TABLE_FIELD.match(unwrap(raw).message)) is not None:
            fields.setdefault(f.group("key"), f.group("value"))
    pid = _TABLE_PID.search(fields.get("exitcode", ""))
    return Sighting(
        file_index,
        line,
        rank=int(m.group("rank")),
        local_rank=int(m.group("local")),
        host=fields.get("host"),
        pid=int(pid.group("pid")) if pid else None,
        first_failure=first,
        time=fields.get("time"),
    )


# "comm 0x... rank 1 nranks 2", and NCCL 2.2x's "ncclCommInitRankConfig comm 0x... rank 1 nranks 2".
_COMM = re.compile(
    r"NCCL INFO (?:ncclCommInitRank\w* )?(?:comm 0x[0-9a-f]+ )?rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)"
)


def _read_comm(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """NCCL's communicator line: the process behind ``host:pid`` is ``rank`` of ``nranks``."""
    m = _COMM.search(facts.message)
    if m is None or facts.pid is None:
        return None
    return Sighting(
        file_index,
        line,
        rank=int(m.group("rank")),
        host=facts.host,
        pid=facts.pid,
        nranks=int(m.group("nranks")),
    )


# NCCL's first ring or channel of a process: "Ring 00 : 2[2] -> 3[3] via direct shared memory",
# "Channel 00/0 : 0[1b000] -> 1[1c000] via P2P/IPC": the rank before the arrow, with its device or
# bus id in brackets, is the process's own (a network line, "Ring 00 : 7 -> 0 [receive]", names a
# peer first). Only channel 00 is read: each process prints it once or twice, not 32 times.
_RING = re.compile(
    r"NCCL INFO (?:Ring|Channel) 00(?:/\d+)? ?: (?P<rank>\d+)\[[0-9a-f]+\] -> \d+\[[0-9a-f]+\]"
)


def _read_ring(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    m = _RING.search(facts.message)
    if m is None or facts.pid is None:
        return None
    return Sighting(file_index, line, rank=int(m.group("rank")), host=facts.host, pid=facts.pid)


_SPAWN = re.compile(r"-- Process (?P<index>\d+) terminated with the following error:")


def _read_spawn(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """mp.spawn's header: the traceback that follows is process ``index``'s (its rank)."""
    m = _SPAWN.search(facts.message)
    return Sighting(file_index, line, rank=int(m.group("index")), spawn=True) if m else None


# A process saying that it received a stop signal: "SIGTERM received. ... shutting down", vLLM's
# "trigger received signal=SIGTERM", DeepSpeed's "Main process received SIGINT, exiting".
_STOP = re.compile(
    r"\b(?:[Rr]eceived|[Cc]aught|[Gg]ot)\b[^\n]{0,40}?\bSIG(?:TERM|INT)\b"
    r"|\bSIG(?:TERM|INT)\b:? (?:signal )?received\b"
)


def _read_stop(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """A stop the process was asked for: what it prints while shutting down is its tear-down."""
    return Sighting(file_index, line, stop=True) if _STOP.search(facts.message) else None


# A launcher's rule around one process's output: "----------Begin global rank 1 STDERR----------",
# "===== worker 3 output =====", "---- End rank 2 ----". A local rank bounds nothing global.
_SECTION = re.compile(
    r"^\s*(?:-{3,}|={3,}|#{3,}|\*{3,})(?P<words>[^\n]{0,60}?)\b(?:global[ _-]?)?"
    r"(?:[Rr]ank|RANK|[Pp]rocess|[Ww]orker|[Tt]ask)[ _:=-]?(?P<rank>\d+)\b"
    r"[^\n]{0,40}?(?:-{3,}|={3,}|#{3,}|\*{3,})\s*$"
)
# Three rule characters (colour codes may sit between them) and the rank word within a line's
# reach: what the scanner flags. The literals alone ("###") would flag every tqdm bar drawn with
# "#", and each such line would be read: on a GB of training output, seconds of work for nothing.
_SECTION_SCAN = (
    r"[-=#*](?:\x1b\[[0-9;]*m)?[-=#*](?:\x1b\[[0-9;]*m)?[-=#*][^\n]{0,100}"
    r"(?:[Rr]ank|RANK|[Pp]rocess|[Ww]orker|[Tt]ask)[ _:=-]?\d"
)
_SECTION_END = re.compile(r"\b(?:[Ee]nd|END|[Ff]inish|FINISH|[Cc]lose|CLOSE)", re.IGNORECASE)


def _read_section(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """A rule bounding one process's output: what it opens (or closes) is that rank's."""
    m = _SECTION.match(facts.message)
    if m is None or "local" in m.group("words").lower():
        return None
    kind = "end" if _SECTION_END.search(m.group("words")) else "begin"
    return Sighting(file_index, line, rank=int(m.group("rank")), section=kind)


# `tail`'s header between files pasted together ("==> logs/rank3.out <=="): what follows is that
# file's, and its name may give the rank (as a file's own name does); a name without one ends
# the section above.
_FILE_HEADER = re.compile(r"^==> (?P<name>\S.{0,300}?) <==\s*$")


def _read_file_header(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """A pasted file's header: the lines below it are that file's."""
    m = _FILE_HEADER.match(facts.message)
    return Sighting(file_index, line, rank=rank_from_name(m.group("name")), section="begin") if m else None


# A run saying it finished as meant: MLPerf's `"key": "run_stop", ... "status": "success"`, HF
# Trainer's "Training completed.", Lightning's "`Trainer.fit` stopped: `max_epochs=20` reached."
_FINISHED = re.compile(
    r'"key": "run_stop"[^\n]*"status": "success"'
    r"|\bTraining completed\b"
    r"|`Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` reached"
)


def _read_finished(
    file_index: int, line: int, facts: LineFacts, before: Sequence[str], after: Callable[[], Sequence[str]]
) -> Sighting | None:
    """The run's own word that it finished: what it warns of after that is its tear-down."""
    return Sighting(file_index, line, finished=True) if _FINISHED.search(facts.message) else None


STRUCTURE: tuple[StructurePattern, ...] = (
    StructurePattern("failure-table", (b"(local_rank: ",), _TABLE_ROW, _read_table_row),
    StructurePattern("nccl-comm", (b" nranks ", b" nRanks "), _COMM, _read_comm),
    StructurePattern("nccl-ring", (b"INFO Ring 00 ", b"INFO Channel 00"), _RING, _read_ring),
    StructurePattern("spawn", (b"terminated with the following error",), _SPAWN, _read_spawn),
    StructurePattern("stop-signal", (b"SIGTERM", b"SIGINT"), _STOP, _read_stop),
    StructurePattern("section", (), _SECTION, _read_section, _SECTION_SCAN),
    StructurePattern("file-header", (b"==> ",), _FILE_HEADER, _read_file_header),
    StructurePattern(
        "finished", (b'"run_stop"', b"Training completed", b"Trainer.fit` stopped"), _FINISHED, _read_finished
    ),
)
