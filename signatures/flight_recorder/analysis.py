"""Across ranks: which rank is behind, or disagrees, in which collective of which group.

The method is that of PyTorch's fr_trace analyser (torch/distributed/flight_recorder/components/
builder.py and utils.py, torch 2.13), cut to what an incident needs. Per process group, each
rank's collectives are keyed by ``collective_seq_id``; walking the sequence ids every rank still
holds in its ring buffer, the first id where the ranks disagree is the finding:

- *missing*: some members never entered it (their last entered id is lower), the others did;
- *mismatch*: all entered it, but one side's op, sizes or dtypes differ from the other's;
- *not started*: all entered it, most started it, a few only enqueued it (their GPU was still
  busy with something earlier).

Completed collectives are skipped; a group whose ranks all agree says nothing. When several
groups disagree, the one whose collective was entered first is the finding: a stuck rank stalls
every group it belongs to, and the earliest stall is the nearest to the cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from signatures.flight_recorder.parse import Dump, Entry, Frame

# Ops whose sizes and dtypes must agree on every rank (all-to-all, gather, scatter may differ).
SAME_SHAPE_OPS = frozenset(
    {
        "all_reduce",
        "allreduce_coalesced",
        "broadcast",
        "_broadcast_oop",
        "reduce",
        "_reduce_oop",
        "all_gather",
        "_allgather_base",
        "_all_gather_base",
        "all_gather_into_tensor_coalesced",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor_coalesced",
        "barrier",
    }
)
MISSING, MISMATCH, NOT_STARTED = "missing", "mismatch", "not started"


@dataclass(frozen=True)
class GroupId:
    """A process group: its name, its description, and its member ranks."""

    name: str
    desc: str
    pg_id: int
    ranks: tuple[int, ...]

    @property
    def is_default(self) -> bool:
        """Whether this is the default (world) group."""
        return self.desc == "default_pg" or (self.name == "0" and self.desc in ("", "undefined"))

    @property
    def shown(self) -> str:
        """The name a person gave the group (its description), else its pg name."""
        return self.desc if self.desc not in ("", "undefined") else self.name


@dataclass(frozen=True)
class Position:
    """How far one rank got in one group."""

    rank: int
    last_entered: int | None
    last_completed: int | None
    last_entry: Entry | None  # its newest recorded collective in the group


@dataclass(frozen=True)
class Finding:
    """The first collective where the ranks of one group disagree."""

    kind: str  # MISSING, MISMATCH or NOT_STARTED
    group: GroupId
    seq: int
    entry: Entry  # the collective as most ranks (the waiting side) recorded it
    named: tuple[int, ...]  # the ranks behind or odd
    others: tuple[int, ...]  # the ranks that waited (or agree among themselves)
    odd_entry: Entry | None  # MISMATCH: the collective as the named ranks recorded it
    positions: dict[int, Position]
    without_dump: tuple[int, ...]  # members whose dump was not given


@dataclass(frozen=True)
class Analysis:
    dumps: int
    finding: Finding | None
    groups: int  # groups compared
    without_dump: tuple[int, ...]  # ranks named in some group's members with no dump given


def analyse(dumps: Sequence[Dump]) -> Analysis:
    """Compare the dumps of all ranks; name the first disagreement, if any."""
    by_rank: dict[int, Dump] = {}
    for dump in dumps:
        by_rank.setdefault(dump.rank, dump)  # the same rank twice (a re-upload): the first counts
    findings: list[Finding] = []
    absent: set[int] = set()
    groups = _groups(by_rank)
    for group, entries in groups.items():
        absent.update(r for r in group.ranks if r not in by_rank)
        finding = _first_disagreement(group, entries, by_rank)
        if finding is not None:
            findings.append(finding)
    first = min(findings, key=lambda f: (f.entry.time_created_ns or 0, f.group.pg_id), default=None)
    return Analysis(len(by_rank), first, len(groups), tuple(sorted(absent)))


def _groups(by_rank: dict[int, Dump]) -> dict[GroupId, dict[int, list[Entry]]]:
    """Every collective entry, by group and rank. Members come from each dump's pg_config."""
    out: dict[GroupId, dict[int, list[Entry]]] = {}
    ids: dict[tuple[str, str], GroupId] = {}
    for rank, dump in sorted(by_rank.items()):
        for e in dump.entries:
            if e.is_p2p:
                continue  # p2p ops pair by peer, not by sequence: not compared here
            key = (e.pg_name, e.pg_desc)
            group = ids.get(key)
            if group is None:
                group = ids[key] = GroupId(e.pg_name, e.pg_desc, e.pg_id, _members(e, by_rank))
            out.setdefault(group, {}).setdefault(rank, []).append(e)
    return out


def _members(e: Entry, by_rank: dict[int, Dump]) -> tuple[int, ...]:
    for dump in by_rank.values():
        info = dump.groups.get(e.pg_name)
        if info is not None and info.ranks:
            return info.ranks
    # Gloo's recorder files its groups under an empty name; the default group holds every rank.
    if e.pg_desc == "default_pg" or e.pg_name == "0":
        largest = max((g.ranks for d in by_rank.values() for g in d.groups.values()), key=len, default=())
        return tuple(sorted(set(largest) | set(by_rank)))
    return tuple(sorted(r for r, d in by_rank.items() if any(x.pg_name == e.pg_name for x in d.entries)))


def _first_disagreement(
    group: GroupId, entries: dict[int, list[Entry]], by_rank: dict[int, Dump]
) -> Finding | None:
    ranks = [r for r in group.ranks if r in by_rank]
    if len(ranks) < 2:
        return None
    by_seq = {r: _by_seq(entries.get(r, [])) for r in ranks}
    positions = {r: _position(r, group, by_seq[r], by_rank[r]) for r in ranks}
    held = [min(s) for s in by_seq.values() if s]
    if not held:
        return None
    start = max(held)  # older ids rolled out of some rank's ring buffer: not comparable
    for seq in sorted({s for seqs in by_seq.values() for s in seqs if s >= start}):
        present = {r: by_seq[r][seq] for r in ranks if seq in by_seq[r]}
        behind = [r for r in ranks if r not in present and _entered(positions[r]) < seq]
        absent = tuple(r for r in group.ranks if r not in by_rank)
        if behind:
            first = present[min(present)][0]
            waited = tuple(sorted(present))
            return Finding(MISSING, group, seq, first, tuple(behind), waited, None, positions, absent)
        odd = _odd_ones(present)
        if odd is not None:
            named, agreeing = odd
            entry, odd_entry = present[agreeing[0]][0], present[named[0]][0]
            return Finding(MISMATCH, group, seq, entry, named, agreeing, odd_entry, positions, absent)
        if all(_done(e, by_rank[r]) for r, es in present.items() for e in es):
            continue
        states = {r: _state(es[0], by_rank[r]) for r, es in present.items()}
        queued = tuple(r for r, s in states.items() if s == "scheduled")
        running = tuple(r for r, s in states.items() if s != "scheduled")
        if queued and len(queued) < len(running):
            entry = present[running[0]][0]
            return Finding(NOT_STARTED, group, seq, entry, queued, running, None, positions, absent)
        return None  # every rank is in this collective and none is behind: nothing to name
    return None


def _by_seq(entries: list[Entry]) -> dict[int, list[Entry]]:
    out: dict[int, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.collective_seq_id, []).append(e)  # a coalesced group shares one id
    for group in out.values():
        group.sort(key=lambda e: e.op_id)
    return out


def _position(rank: int, group: GroupId, seqs: dict[int, list[Entry]], dump: Dump) -> Position:
    entered = max(seqs, default=None)
    status = dump.last_enqueued.get(group.pg_id)
    if status is not None and (entered is None or status > entered):
        entered = status
    done = [s for s, es in seqs.items() if all(_done(e, dump) for e in es)]
    completed = max(done, default=None)
    status = dump.last_completed.get(group.pg_id)
    if status is not None and (completed is None or status > completed):
        completed = status
    last = seqs[max(seqs)][-1] if seqs else None
    return Position(rank, entered, completed, last)


def _entered(p: Position) -> int:
    return p.last_entered if p.last_entered is not None else -1


def _done(e: Entry, dump: Dump) -> bool:
    if e.state == "completed" or e.retired:
        return True
    completed = dump.last_completed.get(e.pg_id)
    return completed is not None and e.collective_seq_id <= completed


def _state(e: Entry, dump: Dump) -> str:
    return "completed" if _done(e, dump) else e.state


def op_name(e: Entry) -> str:
    """'all_reduce' from 'nccl:all_reduce'; 'send' from 'nccl:send 0->1'."""
    return e.profiling_name.split(":", 1)[-1].split(" ", 1)[0]


def _shape(es: list[Entry]) -> tuple[object, ...]:
    out: list[object] = []
    for e in es:
        name = op_name(e)
        if name in SAME_SHAPE_OPS:
            out.append((name, e.input_sizes, e.output_sizes, e.input_dtypes))
        else:
            out.append((name,))
    return tuple(out)


def _odd_ones(present: dict[int, list[Entry]]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(odd ranks, agreeing ranks) when ranks recorded different collectives at one id."""
    kinds: dict[tuple[object, ...], list[int]] = {}
    for r, es in sorted(present.items()):
        kinds.setdefault(_shape(es), []).append(r)
    if len(kinds) < 2:
        return None
    # The largest side is taken as intended; on a tie, the side holding the lowest rank.
    ordered = sorted(kinds.values(), key=lambda rs: (-len(rs), rs[0]))
    agreeing = ordered[0]
    odd = sorted(r for side in ordered[1:] for r in side)
    return tuple(odd), tuple(agreeing)


def stack_of(p: Position | None) -> tuple[Frame, ...]:
    """The frames of a rank's newest recorded collective, innermost first."""
    return p.last_entry.frames if p is not None and p.last_entry is not None else ()
