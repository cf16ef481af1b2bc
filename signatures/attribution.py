"""Which rank and host printed the initiating line, read from the log's own structure.

In order, the first that answers wins (a rank in the content always beats the file's name):

1. the line itself: its process tag as learned from the log (processtags.py), a launcher's tag
   (`[rank3]:`, `[1,3]<stderr>:`, srun's `3: ` unless it counts nodes) or a rank its words name
   as the speaker (rankwords.py); then the rest of its statement: the line above when the line is
   the wrapped second half of it, and the message's own continuation lines below (no head of
   their own, up to a blank line; one rank named, not a list of peers); a job of world size 1
   (and no line naming another rank) has only rank 0; a line of Slurm's step daemon
   (`slurmstepd: error: ...`) is no task's, whatever label srun forwarded it under: it concerns
   the one task srun's report below it names (`srun: error: node7: task 5: ...`);
2. the launcher's box it is reported in, when the box names one rank; the process: NCCL's
   `host:pid` mapped through the `comm 0x... rank N nranks M` line of the same pid (the largest
   communicator), or the failure table's `(pid: P)`;
3. the local rank (a learned local tag, `[default3]:`, `local_rank: 3`, `--local_rank=3`) mapped
   through the failure table of the same host, or taken as the rank when the job spans one node
   (or its world size fits in the local ranks one node showed); local rank 0 is rank 0 when the
   log names no other process at all; never a rank by itself;
4. a launcher's rule bounding one rank's output, or `tail`'s `==> rank3.log <==` header;
5. mp.spawn's `-- Process N terminated with the following error:` above the line;
6. the lines around it, when they all carry one and the same rank;
7. the launcher's `Root Cause (first observed failure)` row, for an untagged line in its text;
8. for an untagged traceback or continuation line, the nearest tagged line above in its block;
9. in a log of one process (no rank tag, one NCCL pid at most, no local index but 0, no line
   naming another rank), the rank its settings state (`self.dist_rank: 1`, `global_rank=3`);
10. the file's name (`rank3.log`, `rank-03.out`; never `job_r2.log`).

The host comes from the line, else from whatever names the host of that rank or process, else
from the log when every line read that names a host names the same one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from signatures.episodes import box_lines
from signatures.failtable import entry_rank
from signatures.hits import Hit, TextScan
from signatures.introduced import introduced_rank
from signatures.kernelasserts import is_assert_report, is_kernel_assert, reporting_rank
from signatures.lines import unwrap
from signatures.neighbours import header_rank, nearby_rank, statement_rank, tag_above
from signatures.pids import HOST_PID, head_pid_rank
from signatures.processtags import Reading, TagModel, learn
from signatures.samelogger import next_record_rank
from signatures.stops import step_daemon_task
from signatures.structure import Sighting
from signatures.verdicts import Verdict, child_exited, verdict_of, verdict_rank

SPAWN_REACH = 400  # lines below mp.spawn's header that can still be its process's traceback


@dataclass
class Roster:
    """Who is who across all texts: pids, local ranks and hosts of ranks."""

    by_pid: dict[tuple[str | None, int], tuple[int, int]] = field(default_factory=dict)  # -> (rank, size)
    by_local: dict[tuple[str | None, int], int] = field(default_factory=dict)
    host_of: dict[int, str] = field(default_factory=dict)
    first_failure: dict[int, Sighting] = field(default_factory=dict)  # file -> root-cause row
    spawns: list[Sighting] = field(default_factory=list)
    sections: list[Sighting] = field(default_factory=list)  # rules bounding one rank's output
    name_rank: dict[int, int | None] = field(default_factory=dict)
    single_node: bool = False
    one_process: bool = False  # the log names no process but one (see _one_process)
    world_of_one: bool = False  # the job says it has one rank, and no line names another
    declared: int | None = None  # the rank the one process of the log states in its settings
    hosts: set[str] = field(default_factory=set)  # every host a line read names
    tags: dict[int, TagModel] = field(default_factory=dict)  # file -> the process tags it uses
    assert_reports: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # file -> (line, rank)
    verdicts: dict[int, list[Verdict]] = field(default_factory=dict)  # a launcher's, on a death
    printed: Counter[tuple[int, str]] = field(default_factory=Counter)  # (file, message) -> lines

    def learn(self, s: Sighting) -> None:
        if s.spawn:
            self.spawns.append(s)
            return
        if s.section:
            self.sections.append(s)
            return
        if s.rank is None:
            return
        if s.pid is not None:
            size = s.nranks or 1 << 30  # the launcher's table counts the whole job
            known = self.by_pid.get((s.host, s.pid))
            if known is None or size > known[1]:
                self.by_pid[(s.host, s.pid)] = (s.rank, size)
        if s.local_rank is not None:
            self.by_local.setdefault((s.host, s.local_rank), s.rank)
        if s.host and (s.nranks is None or s.nranks >= max(self._sizes(), default=0)):
            self.host_of.setdefault(s.rank, s.host)
        if s.first_failure:
            self.first_failure.setdefault(s.file_index, s)

    def _sizes(self) -> list[int]:
        return [size for _, size in self.by_pid.values() if size < 1 << 30]

    def rank_of_pid(self, host: str | None, pid: int) -> int | None:
        found = self.by_pid.get((host, pid)) or next(
            (v for (h, p), v in self.by_pid.items() if p == pid and (host is None or h is None)), None
        )
        return found[0] if found else None

    def rank_of_local(self, host: str | None, local: int) -> int | None:
        if (host, local) in self.by_local:
            return self.by_local[(host, local)]
        hosts = {h for h, _ in self.by_local}
        if host is None and len(hosts) == 1:  # one node's table: its local ranks are unambiguous
            return self.by_local.get((next(iter(hosts)), local))
        if self.single_node:
            return local
        return 0 if local == 0 and self.one_process else None


def roster(scans: Sequence[TextScan], environment: dict[str, str]) -> Roster:
    """Everything the texts say about who is who."""
    r = Roster(
        single_node=environment.get("nnodes") in ("1", "standalone"),
        world_of_one=environment.get("world_size") == "1" and _ranks_named(scans) <= {0},
    )
    for scan in scans:
        r.name_rank[scan.file_index] = scan.name_rank
        r.tags[scan.file_index] = learn(_sample(scan))
    # A log whose tags name several processes is no one-process job's, whatever its lines say.
    r.one_process = _one_process(scans, environment) and all(t.names_one_process for t in r.tags.values())
    for scan in scans:
        for s in scan.sightings:
            r.learn(s)
        r.hosts |= {h for hit in scan.hits if (h := hit.host)} | {x.host for x in scan.sightings if x.host}
        for _, message in {(h.line, h.facts.message.strip()) for h in scan.hits}:
            r.printed[(scan.file_index, message)] += 1
        for hit in scan.hits:
            if hit.rank is not None and is_assert_report(hit.text):
                r.assert_reports.setdefault(scan.file_index, []).append((hit.line, hit.rank))
            if not hit.facts.tagged and (said := verdict_of(hit.facts.message, hit.rank)) is not None:
                r.verdicts.setdefault(scan.file_index, []).append((hit.line, said, hit.host, hit.facts.pid))
        for hit in scan.hits:  # a line with both a rank tag and an NCCL prefix names its pid's rank
            if hit.rank is not None and (hit.facts.pid is not None or hit.host):
                r.learn(Sighting(hit.file_index, hit.line, rank=hit.rank, host=hit.host, pid=hit.facts.pid))
    r.single_node = r.single_node or _fits_one_node(scans, environment, r.tags.values())
    r.declared = _declared_rank(scans, environment, r)
    for scan in scans:  # a launcher's verdict on a child it names by local index, on one node
        for hit in scan.hits:
            if hit.rank is not None or hit.local_rank is None or not child_exited(hit.facts.message):
                continue
            if (rank := r.rank_of_local(hit.host, hit.local_rank)) is not None:
                r.verdicts.setdefault(scan.file_index, []).append((hit.line, rank, hit.host, hit.facts.pid))
    return r


def _fits_one_node(scans: Sequence[TextScan], environment: dict[str, str], tags: Iterable[TagModel]) -> bool:
    # The job's world size is no larger than the local ranks one node showed (local ranks 0..7 of
    # a world of 8): every process is on that node, and a local rank is the rank.
    world = environment.get("world_size", "")
    locals_seen = {v for t in tags for v in t.local_values}
    locals_seen |= {h.local_rank for s in scans for h in s.hits if h.local_rank is not None}
    return world.isdigit() and 1 < int(world) <= max(locals_seen, default=-1) + 1


def _sample(scan: TextScan) -> Iterator[str]:
    # The lines a text lends to learning its tags: its hits with their context, newest first (a
    # run fails at its end), and its progress.
    for hit in reversed(scan.hits):
        yield from hit.before
        yield hit.text
        yield from hit.after
    for _, text in scan.progress:
        yield text


def _declared_rank(scans: Sequence[TextScan], environment: dict[str, str], r: Roster) -> int | None:
    # A process's own settings naming its rank ("self.dist_rank: 1") say whose output an untagged
    # line is only when the log is that one process's: no rank tag, at most one NCCL pid, no
    # local index but 0, and no line naming another rank (a file's name may: the content wins).
    value = environment.get("declared_rank", "")
    if not value.isdigit():
        return None
    rank = int(value)
    if any(t.global_shapes or not t.local_values <= {0} for t in r.tags.values()):
        return None
    pids = {h.facts.pid for s in scans for h in s.hits if h.facts.pid is not None}
    locals_ = {h.local_rank for s in scans for h in s.hits if h.local_rank is not None}
    named = {h.rank for s in scans for h in s.hits} | {x.rank for s in scans for x in s.sightings}
    return rank if len(pids) <= 1 and locals_ <= {0} and named <= {None, rank} else None


def _ranks_named(scans: Sequence[TextScan]) -> set[int]:
    named = {h.rank for s in scans for h in s.hits} | {x.rank for s in scans for x in s.sightings}
    return {r for r in named if r is not None} | {r for s in scans if (r := s.name_rank) is not None}


def _one_process(scans: Sequence[TextScan], environment: dict[str, str]) -> bool:
    # A log naming one process only (one local rank, 0; no global rank, no host, no world size
    # or node count above 1) comes from a one-process job, whose local rank 0 is its rank 0.
    if environment.get("world_size", "1") != "1" or environment.get("nnodes", "1") not in ("1", "standalone"):
        return False
    hits = [h for s in scans for h in s.hits]
    if any(h.rank is not None or h.host for h in hits) or any(s.name_rank is not None for s in scans):
        return False
    if any(x.rank is not None or x.host for s in scans for x in s.sightings):
        return False
    return {h.local_rank for h in hits} <= {None, 0}


@dataclass(frozen=True)
class Attribution:
    rank: int | None
    host: str | None
    how: str | None  # how the rank was found, when not from the line itself
    local_rank: int | None = None


def attribute(hit: Hit, line: int, r: Roster) -> Attribution:
    """The rank and host of the process that printed ``hit`` (moved to ``line``)."""
    tags = r.tags.get(hit.file_index, TagModel())
    reading = tags.read(hit.text)
    rank, how = _rank(hit, line, r, reading)
    host = hit.host or reading.host or (r.host_of.get(rank) if rank is not None else None)
    if host is None and rank is not None:
        host = tags.host_of.get(rank)
    first = r.first_failure.get(hit.file_index)
    if host is None and first is not None and first.rank == rank:
        host = first.host
    if host is None and len({h.lower() for h in r.hosts}) == 1:
        host = min(r.hosts)  # the only host the log names (host names ignore case)
    return Attribution(rank, host, how, hit.local_rank if hit.local_rank is not None else reading.local)


def _rank(hit: Hit, line: int, r: Roster, reading: Reading) -> tuple[int | None, str | None]:
    daemon, task = step_daemon_task(hit.text, hit.after)
    if daemon:  # the step's own line: srun's label on it names no process
        return (task, "srun's report below it names that task") if task is not None else (None, None)
    if reading.rank is not None and "rank" not in hit.groups:
        return reading.rank, reading.note  # the log's own process tag ("[rank13]" over srun's "5: ")
    tags = r.tags.get(hit.file_index)
    if hit.rank is not None and not (hit.facts.tagged and tags and tags.counts_nodes(hit.text, hit.rank)):
        return hit.rank, None
    if r.world_of_one:
        return 0, "the job has one rank (world size 1)"
    if (rank := statement_rank(hit)) is not None:
        return rank, "the rest of its message names that rank"
    if (rank := introduced_rank(hit.text, hit.before, hit.after)) is not None:
        return rank, "the fields of the report it belongs to name that rank"
    if (rank := entry_rank(hit.before, hit.text, hit.after)) is not None:
        return rank, "its entry of the launcher's failure table names that rank"
    if len(box := {n for t in box_lines(hit) if (n := unwrap(t).rank) is not None}) == 1:
        return box.pop(), "the launcher's box it is reported in names that process"
    if hit.facts.pid is not None and (rank := r.rank_of_pid(hit.host, hit.facts.pid)) is not None:
        return rank, f"NCCL's line for pid {hit.facts.pid} names its rank"
    if (found := head_pid_rank(hit, r.by_pid, r.tags.get(hit.file_index))) is not None:
        return found[0], f"its head's {found[1]} is the pid the launcher names with that rank"
    local = hit.local_rank if hit.local_rank is not None else reading.local
    if local is not None and (rank := r.rank_of_local(hit.host, local)) is not None:
        where = "the job runs on one node" if r.single_node and (hit.host, local) not in r.by_local else None
        return rank, f"local rank {local}" + (f": {where}" if where else " in the launcher's failure table")
    if (rank := section_rank(r.sections, hit.file_index, line)) is not None:
        return rank, "the launcher's rule around that output names that rank"
    spawn = max(
        (s for s in r.spawns if s.file_index == hit.file_index and 0 < line - s.line <= SPAWN_REACH),
        key=lambda s: s.line,
        default=None,
    )
    if spawn is not None:
        return spawn.rank, f"mp.spawn says the traceback below line {spawn.line} is process {spawn.rank}'s"
    if (rank := nearby_rank(hit.before[-2:], hit.after[:3], tags)) is not None:
        return rank, "the lines around it are that rank's"
    first = r.first_failure.get(hit.file_index)
    if first is not None and (local is None or first.local_rank == local):
        return first.rank, "the launcher's failure table names it the first failure"
    if is_kernel_assert(hit.text) and (
        (rank := reporting_rank(r.assert_reports.get(hit.file_index, ()), line)) is not None
    ):
        return rank, "the report of the device-side assert below it names that rank"
    if reading == Reading() and (above := tag_above(hit, r.tags.get(hit.file_index))) is not None:
        return above, "the nearest tagged line above it, in the same block, is that rank's"
    if reading == Reading() and (rank := header_rank(hit)) is not None:
        return rank, "the record that opens its traceback names that rank in its head"
    if reading == Reading() and (rank := next_record_rank(hit.text, hit.before, hit.after)) is not None:
        return rank, "a guess: the next record of the same logger, at the same moment, names that rank"
    if r.declared is not None and hit.rank is None:
        return r.declared, "the log is one process's, and its settings name its rank"
    name = r.name_rank.get(hit.file_index)
    if name is not None:
        return name, "the file's name"
    head = HOST_PID.match(hit.facts.message)
    host = hit.host or reading.host or (head.group("host") if head else None)
    pid = hit.facts.pid if hit.facts.pid is not None else int(head.group("pid")) if head else None
    verdicts = r.verdicts.get(hit.file_index, ())
    # Only in a log that does not tag its ranks, for a line with no local index of its own: an
    # untagged line among tagged ones is no rank's output, and a local index may be another's.
    untagged_log = not (tags and tags.global_shapes)
    # A launcher names the child it noticed, which need not be the first of several that printed
    # the same failure: only a failure printed once is the verdict's.
    once = r.printed.get((hit.file_index, hit.facts.message.strip()), 0) <= 1
    if not (untagged_log and local is None and once):
        return None, None
    if (rank := verdict_rank(verdicts, line, host, pid)) is not None:
        return rank, "the launcher's verdict below it names that rank as the one that failed"
    return None, None


def section_rank(sections: Sequence[Sighting], file_index: int, line: int) -> int | None:
    """The rank whose output the line is in, when a launcher's rules bound it: the nearest rule
    below it that closes a rank's output, or the nearest above that opens one."""
    mine = sorted((s for s in sections if s.file_index == file_index), key=lambda s: s.line)
    above = next((s for s in reversed(mine) if s.line < line), None)
    below = next((s for s in mine if s.line > line), None)
    if above is not None and above.section == "begin":
        return above.rank
    if below is not None and below.section == "end":
        return below.rank
    return None


def rank_for_grouping(hit: Hit, r: Roster) -> int | None:
    """A cheap rank for a downstream line: its own, its pid's, or its file's."""
    if hit.rank is not None:
        return hit.rank
    if hit.facts.pid is not None and (rank := r.rank_of_pid(hit.host, hit.facts.pid)) is not None:
        return rank
    if hit.local_rank is not None and (rank := r.rank_of_local(hit.host, hit.local_rank)) is not None:
        return rank
    return r.name_rank.get(hit.file_index)
