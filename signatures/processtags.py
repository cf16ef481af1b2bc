"""Per-line process tags, learned from the log itself.

Launchers prefix every line with a tag that carries the process's index: `[rank3]:`,
`[default3]:`, `name/0 [default3]:[rank3]:`, `[1,3]<stderr>:`, srun's `3: `, `[3]`, Ray's
`(RayTrainWorker pid=123, ip=10.0.0.7, rank=3)`, `worker-3:`. Rather than a list of forms, the
tag's position and shape are learned from the log: the head of a line is the run of tag-like
tokens before its message (bracketed or parenthesised groups, colon-terminated words, pipe-separated
fields, NCCL's `host:pid:tid`; read in tagheads.py), and a token with an integer in it becomes a
shape (`[rank#]:`, `#:`, `[*,#]<stderr>:`, `[#/16]`). A shape is a process tag when

- the word before its number says so: `rank`, `global_rank`, `process`, `task`, `worker` name a
  global rank; `local`, `default`, `gpu`, `dev` a per-node index (a local rank);
- or it has no word and it recurs on several lines with several small values (0..N-1). Such a
  bare tag is a local rank when one value shows on several hosts, or when a name qualifies it: it
  stands after NCCL's `host:pid:tid` (the CUDA device), a host's `node3:` or a role's `name/0`, or
  a name shares its token (`[node7:3]`); it is a global rank otherwise.

A tag one value of which goes with several values of another process tag, or that stands before
a local index (`worker-1: [default3]:`, srun's `1: [default3]:`), counts nodes and names no rank.
When a line carries several, a `rank` tag wins over a `worker` one and any global tag over a local
one (`[default1]:[rank1]:`). A process whose head names its pid (Ray's `(Worker pid=7, ...)`,
NCCL's `host:pid:tid`) and whose lines name one rank in their words is that rank.

A process named by its parallel groups (vLLM's `Worker_TP4_EP4`, SGLang's `[time TP3]`) is its
tensor-parallel index only when no other split of the world (DP, PP, CP) shows in the log and
each index is one process; the reading says it is that inference. A line binding a pid to a rank
(`process rank 0 with PID 19474`) is kept, for a head that names the pid alone (`[host:19474]`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from signatures.lines import binds_pid, unwrap
from signatures.tagheads import GLOBAL_WORDS, LOCAL_WORDS, WORD_ORDER, Head, Token, read_head

# Groups that split the world beside tensor parallelism: with any of them shown, a TP index is
# only a rank within its group. Expert parallelism spans the same ranks as TP in these names.
_OTHER_GROUPS = frozenset({"dp", "pp", "cp"})
MIN_BARE_LINES = 3  # a tag with no word must recur on this many lines, with two values or more
SAMPLE_LINES = 5000  # distinct lines one text lends to learning its tags (tags recur on most)


@dataclass(frozen=True)
class Reading:
    """What a line's tag says: its global rank, its local rank, its host."""

    rank: int | None = None
    local: int | None = None
    host: str | None = None
    note: str | None = None  # when the rank is an inference, what it rests on


@dataclass
class TagModel:
    """The process tags one text uses, learned from its lines."""

    global_shapes: set[str] = field(default_factory=set)
    local_shapes: set[str] = field(default_factory=set)
    host_of: dict[int, str] = field(default_factory=dict)
    rank_of_process: dict[str, int] = field(default_factory=dict)
    local_values: set[int] = field(default_factory=set)  # every local index a tag showed
    coarse_shapes: set[str] = field(default_factory=set)  # tags that count nodes, not processes
    parallel_shapes: set[str] = field(default_factory=set)  # a TP index taken as the rank
    rank_of_pid: dict[tuple[str | None, int], int] = field(default_factory=dict)  # a line binds them
    rank_of_local: dict[tuple[str | None, int], int] = field(default_factory=dict)  # its lines name it

    def read(self, line: str) -> Reading:
        """The rank, local rank and host the tag of ``line`` gives."""
        head = read_head(line)
        rank = self.rank_in(head)
        if rank is None and head.process is not None:
            rank = self.rank_of_process.get(head.process)
        local = next((t.value for t in head.tokens if self._is(t, self.local_shapes, LOCAL_WORDS)), None)
        note = None
        if rank is None and local is not None:
            rank = self.rank_of_local.get((head.host and head.host.lower(), local))
            if rank is not None:
                note = f"the other lines of local rank {local} name rank {rank} as their speaker"
        if rank is not None and any(t.shape in self.parallel_shapes for t in head.tokens):
            note = f"its tensor-parallel index TP{rank}, taken as the rank"
            note += ": the log shows no other parallel group"
        return Reading(rank, local, head.host, note)

    def rank_in(self, head: Head) -> int | None:
        """The global rank of a head's tags; a tag that says `rank` beats one that says `worker`."""
        tags = [t for t in head.tokens if self._is(t, self.global_shapes, GLOBAL_WORDS)]
        return min(tags, key=lambda t: WORD_ORDER.get(t.word or "", 9)).value if tags else None

    def _is(self, t: Token, shapes: set[str], words: frozenset[str]) -> bool:
        # A tag whose word says what it is needs no learning (a line past the sample has it too).
        return t.shape in shapes or (t.word in words and t.shape not in self.coarse_shapes)

    def counts_nodes(self, line: str, value: int) -> bool:
        """Whether ``value`` on ``line`` is a tag that counts nodes (srun's task of a per-node
        launcher, "1: [default3]:"), not processes."""
        return any(t.shape in self.coarse_shapes and t.value == value for t in read_head(line).tokens)

    @property
    def names_one_process(self) -> bool:
        """Whether the tags name no process but one (no rank tag, local index 0 at most, and no
        process whose lines name a rank other than 0)."""
        ranks = set(self.rank_of_process.values())
        return not self.global_shapes and ranks <= {0} and self.local_values <= {0}

    @property
    def tagged(self) -> bool:
        return bool(self.global_shapes or self.local_shapes)


def learn(lines: Iterable[str]) -> TagModel:
    """Which shapes of these lines' heads are process tags, global or local."""
    values: dict[str, Counter[int]] = defaultdict(Counter)
    hosts: dict[tuple[str, int], set[str]] = defaultdict(set)
    words: dict[str, str | None] = {}
    nccl: set[str] = set()
    leads: set[str] = set()  # shapes seen with no tag that says "rank" or "local" before them
    order: dict[str, list[int]] = defaultdict(list)  # each shape's values, line after line
    heads = []
    seen_lines: set[str] = set()
    for line in lines:
        if line in seen_lines:
            continue
        if len(seen_lines) >= SAMPLE_LINES:
            break
        seen_lines.add(line)
        head = read_head(line)
        heads.append((line, head))
        for i, t in enumerate(head.tokens):
            values[t.shape][t.value] += 1
            order[t.shape].append(t.value)
            words[t.shape] = t.word
            if not any(_says_process(b) for b in head.tokens[:i]):
                leads.add(t.shape)
            if t.qualified:
                nccl.add(t.shape)
            if head.host:
                hosts[(t.shape, t.value)].add(head.host.lower())
    model = TagModel()
    for shape, counts in values.items():
        word = words[shape]
        if word in GLOBAL_WORDS or (word and word.startswith(("global", "world"))):
            model.global_shapes.add(shape)
        elif word in LOCAL_WORDS or (word and "local" in word):
            model.local_shapes.add(shape)
        elif shape.startswith("[#/") and not _alternates(order[shape]):
            continue  # "[3/10]" counting epochs or steps: one value after another, never back
        elif word is None and shape in leads and _bare_tag(counts):
            # A bare number only ever after a tag that names its process is the message's
            # ("[default0]:1: [allreduce.691943]", a list's entry), not a tag of its own.
            on_several = any(len(hosts[(shape, v)]) > 1 for v in counts)
            if shape.startswith("@"):
                # After a host's name: a rank the host runs when the hosts split the values
                # (node1: 0-7, node2: 8-15), an index within the host when one value shows on
                # several hosts or a single host shows them all (0-7 of one node is either).
                per_node = on_several or len(set().union(*(hosts[(shape, v)] for v in counts))) < 2
            else:
                per_node = shape in nccl or on_several
            (model.local_shapes if per_node else model.global_shapes).add(shape)
    model.parallel_shapes = _tp_as_rank(heads)
    model.global_shapes |= model.parallel_shapes
    model.coarse_shapes = _coarser(heads, model)
    model.global_shapes -= model.coarse_shapes
    model.local_values = {v for shape in model.local_shapes for v in values[shape]}
    named: dict[str, set[int]] = defaultdict(set)
    by_local: dict[tuple[str | None, int], set[int]] = defaultdict(set)
    for line, head in heads:
        rank = model.rank_in(head)
        if rank is not None and head.host:
            model.host_of.setdefault(rank, head.host)
        if head.process is not None and (said := rank if rank is not None else unwrap(line).rank) is not None:
            named[head.process].add(said)
        local = next((t.value for t in head.tokens if t.shape in model.local_shapes), None)
        if rank is None and local is not None and (said := unwrap(line).rank) is not None:
            by_local[(head.host and head.host.lower(), local)].add(said)
        if binds_pid(line):  # "process rank 0 with PID 19474 on node n7"
            facts = unwrap(line)
            if facts.rank is not None and facts.pid is not None:
                model.rank_of_pid.setdefault((facts.host, facts.pid), facts.rank)
    # A process whose lines name one rank (Ray's "(Worker pid=7) ... rank=3") is that rank.
    model.rank_of_process = {p: next(iter(r)) for p, r in named.items() if len(r) == 1}
    model.rank_of_local = _node_block(by_local)
    return model


def _node_block(named: dict[tuple[str | None, int], set[int]]) -> dict[tuple[str | None, int], int]:
    # The lines of a local index that name one rank as their speaker ("[default1]:... [PG 0 Rank
    # 9] ...") name its process's rank, when every local index of the node names one rank and all
    # of them lie one node's offset away (rank - local the same: local 1 is rank 9, local 2 rank 10).
    # With no host to tell nodes apart, two local indexes must agree on it: one alone could be
    # another node's index of the same number.
    out: dict[tuple[str | None, int], int] = {}
    for host in {h for h, _ in named}:
        mine = {local: ranks for (h, local), ranks in named.items() if h == host}
        if any(len(r) != 1 for r in mine.values()):
            continue
        offsets = {next(iter(r)) - local for local, r in mine.items()}
        if len(offsets) == 1 and offsets.pop() >= 0 and (host is not None or len(mine) >= 2):
            out |= {(host, local): next(iter(r)) for local, r in mine.items()}
    return out


def _alternates(values: list[int]) -> bool:
    # Two values that take turns, line after line (3, 5, 3, 5): processes printing side by side.
    # A counter's values follow one another: pieces of the log read out of order (7 8, 6 7, 5 6)
    # bring one back, but never in turns.
    runs = [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]
    return any(runs[i] == runs[i + 2] and runs[i + 1] == runs[i + 3] for i in range(len(runs) - 3))


def _says_process(t: Token) -> bool:
    return t.word in GLOBAL_WORDS or t.word in LOCAL_WORDS


def _coarser(heads: list[tuple[str, Head]], model: TagModel) -> set[str]:
    # A tag one value of which goes with several values of another process tag on its lines
    # ("worker-1: [default0]:", "worker-1: [default3]:") counts nodes, not processes.
    # So does a tag other than a rank's that stands before a local index: the local index is
    # counted within it ("worker-1: [default3]:", srun's "1: [default3]:").
    tags = model.global_shapes | model.local_shapes
    seen: dict[tuple[str, int, str], set[int]] = defaultdict(set)
    outer: set[str] = set()
    for _, head in heads:
        mine = [t for t in head.tokens if t.shape in tags]
        for i, a in enumerate(mine):
            if a.shape not in model.global_shapes:
                continue
            # An index qualified by a name after the tag ("[3] host:pid:tid [0]") is within
            # that name (NCCL's device of the host), not within the tag before it.
            if WORD_ORDER.get(a.word or "", 9) > 0 and any(
                b.shape in model.local_shapes and not b.shape.startswith("…") for b in mine[i + 1 :]
            ):
                outer.add(a.shape)
            for b in mine:
                # A bare number after a tag that says `rank` is the message's (a list's entry:
                # "[rank0]: 1: [allreduce.691943]"), not a process the rank tag counts.
                if b.shape != a.shape and not (WORD_ORDER.get(a.word or "", 9) == 0 and b.word is None):
                    seen[(a.shape, a.value, b.shape)].add(b.value)
    return outer | {shape for (shape, _, _), values in seen.items() if len(values) > 1}


def _tp_as_rank(heads: list[tuple[str, Head]]) -> set[str]:
    # A tensor-parallel index is the global rank only when it is the only split of the world the
    # log's names show (no DP, PP or CP group anywhere) and each index is one process (one pid
    # where heads name pids): two engines' TP0 in one log are two processes, neither rank 0.
    kinds: set[str] = set()
    pids: dict[int, set[str]] = defaultdict(set)
    shapes: set[str] = set()
    for _, head in heads:
        for t in head.tokens:
            if t.shape.startswith("<") and t.shape.endswith("#>"):
                kinds.add(t.word or "")
                if t.word == "tp":
                    shapes.add(t.shape)
                    if head.process is not None:
                        pids[t.value].add(head.process)
    if kinds & _OTHER_GROUPS or any(len(p) > 1 for p in pids.values()):
        return set()
    return shapes


def _bare_tag(counts: Counter[int]) -> bool:
    # Several lines, several values, and small ones (0..N-1, not pids or line numbers).
    distinct = len(counts)
    return sum(counts.values()) >= MIN_BARE_LINES and distinct >= 2 and max(counts) < 16 * distinct + 16
