"""Per-line process tags, learned from the log itself.

Launchers prefix every line with a tag that carries the process's index: `[rank3]:`,
`[default3]:`, `name/0 [default3]:[rank3]:`, `[1,3]<stderr>:`, srun's `3: `, `[3]`, Ray's
`(RayTrainWorker pid=123, ip=10.0.0.7, rank=3)`, `worker-3:`. Rather than a list of forms, the
tag's position and shape are learned from the log: the head of a line is the run of tag-like
tokens before its message (bracketed or parenthesised groups, colon-terminated words, NCCL's
`host:pid:tid`), and a token with an integer in it becomes a shape (`[rank#]:`, `#:`,
`[*,#]<stderr>:`). A shape is a process tag when

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

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from signatures.lines import binds_pid, unwrap

_SKIP = re.compile(
    r"\s*(?:\[?\d{4}-\d\d-\d\d[ T-]\d\d:\d\d:\d\d(?:[.,:]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?:?"
    r"|\[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?:?"
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}"  # ctime(), glued to a tag
    r"|\[?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\]?:?|<std(?:out|err)>:?|\|"
    r"|(?:stdout|stderr) [FP])(?=\s|\[|\(|$)"
)
_TOKEN = re.compile(
    r"\s*(?:(?P<nccl>[A-Za-z0-9][\w.-]{0,60}:\d+:\d+)(?=\s)"
    r"|(?P<ray>\([^()\n]{0,160}\b(?:pid|rank|ip)=[^()\n]{0,160}\)"
    r"|\((?i:pid)\s*[=:]\s*\d+(?:,\s*\w+\s*[=:]\s*[\w.:-]+)+\)):?"
    r"|(?P<bracket>\[[^\[\]\s]{1,48}\](?:<std(?:out|err)>)?:?|\[[A-Za-z_]+[ :=]{1,2}\d{1,6}\]:?)"
    r"|(?P<replica>[A-Za-z][\w.-]{0,60}/\d+)(?=\s)"
    r"|(?P<word>(?=[\w.-]*\d)[\w.-]{1,40}:)(?=\s|\[|$)"
    r"|(?P<groups>(?:(?:TP|DP|PP|EP|CP)\d{1,4}[ _]?)+\]?:?)(?=\s|$))"
)
# A process named by its parallel groups: vLLM's "Worker_TP4_EP4", SGLang's "[time DP1 TP3]".
_GROUP = re.compile(r"(?<![A-Za-z0-9])(?P<kind>TP|DP|PP|EP|CP)(?P<n>\d{1,4})(?![A-Za-z0-9])")
# Groups that split the world beside tensor parallelism: with any of them shown, a TP index is
# only a rank within its group. Expert parallelism spans the same ranks as TP in these names.
_OTHER_GROUPS = frozenset({"dp", "pp", "cp"})
_NUMBER = re.compile(r"\d+")
_LETTER = re.compile(r"[A-Za-z]")
_STREAM = re.compile(r"<std(?:out|err)>")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z_]*)[ :=_-]{0,2}#")
_KEY_VALUE = re.compile(r"\b(?P<key>[A-Za-z_]+)\s*[=:]\s*(?P<value>[\w.-]+(?::\d+)?)")
# A head's field naming the process id: Ray's "(Worker pid=7, ...)", HCCL's "(PID:2969, ...)",
# a log head's "[PID: 2969]". The same pid in two heads of one host is one process.
_PID_FIELD = re.compile(r"^\[?(?i:pid)\s*[=:]\s*(?P<pid>\d+)\]?:?$")
_ID_SUFFIX = re.compile(r"_?(?:id|index|idx)$")
_HOSTISH = re.compile(r"^(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z][\w.-]*$")

GLOBAL_WORDS = frozenset(
    {"rank", "global_rank", "globalrank", "grank", "world_rank", "process", "proc", "task", "worker"}
)
LOCAL_WORDS = frozenset(
    {"default", "local", "local_rank", "localrank", "lrank", "gpu", "dev", "device", "cudadev"}
)
_WORD_ORDER = {
    "rank": 0,
    "global_rank": 0,
    "globalrank": 0,
    "grank": 0,
    "world_rank": 0,
    "process": 1,
    "proc": 1,
    "task": 2,
}
MAX_HEAD_TOKENS = 8
MAX_INDEX = 1 << 16
MIN_BARE_LINES = 3  # a tag with no word must recur on this many lines, with two values or more
SAMPLE_LINES = 5000  # distinct lines one text lends to learning its tags (tags recur on most)


@dataclass(frozen=True)
class Token:
    """One integer of a line's head: the shape it sits in, its value, the word before it."""

    shape: str
    value: int
    word: str | None  # lower case; None for a bare number
    qualified: bool = False  # a name qualifies it (a host's, a role's): an index within that name


@dataclass(frozen=True)
class Head:
    """What a line's head holds: its numbered tokens and the host it names."""

    tokens: tuple[Token, ...]
    host: str | None
    process: str | None = None  # who printed it, when the head names a pid (Ray's, NCCL's)


def read_head(line: str) -> Head:
    """The tag-like tokens at the start of ``line``, up to its message."""
    pos, tokens, host, qualified, process = 0, [], None, False, None
    for _ in range(MAX_HEAD_TOKENS):
        if (s := _SKIP.match(line, pos)) is not None and s.end() > pos:
            pos = s.end()
            continue
        m = _TOKEN.match(line, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        if m.group("nccl"):
            host = host or m.group("nccl").split(":", 1)[0]
            process = process or ":".join(m.group("nccl").split(":")[:2])
            qualified = True
            continue
        if (groups := m.group("groups")) is not None:
            tokens.extend(_group_tokens(groups))
            continue
        if (ray := m.group("ray")) is not None:
            tokens.extend(_group_tokens(ray.split(" ", 1)[0]))
            for kv in _KEY_VALUE.finditer(ray):
                key, value = kv.group("key").lower(), kv.group("value")
                if key == "ip":
                    host = host or value
                elif key == "pid":
                    process = process or f"pid {value}"
                elif value.isdigit():
                    # "RankID:101", "rank_index=3": the word is what is counted
                    word = _ID_SUFFIX.sub("", key) or key
                    tokens.append(Token(f"(…{kv.group('key')}=#)", int(value), word))
            continue
        token = m.group("bracket") or m.group("word")
        if token is not None and (pid := _PID_FIELD.match(token)) is not None:
            process = process or f"pid {pid.group('pid')}"
            continue
        if token is None:
            qualified = True  # a replica's name/0: what follows is an index within the replica
            continue
        tokens.extend(_numbered(token, qualified))
        qualified = False
        # An upper-case code ("EI0002: ", "EE9999: ") is an error's code, not a host's name.
        hostish = m.group("word") and _HOSTISH.match(token[:-1]) and not token.isupper()
        if hostish and not _process_word(token):
            host = host or token[:-1]  # pdsh's "node003: ", a pod's "worker-node-3: "
            qualified = True  # what follows is an index within that node
    return Head(tuple(tokens), host, process and f"{host}/{process}")


def _group_tokens(name: str) -> list[Token]:
    return [Token(f"<{g['kind']}#>", int(g["n"]), g["kind"].lower()) for g in _GROUP.finditer(name)]


def _process_word(token: str) -> bool:
    return any(t.word in GLOBAL_WORDS | LOCAL_WORDS for t in _numbered(token, False))


def _numbered(token: str, qualified: bool) -> list[Token]:
    if "/" in token or "." in token:  # frame ids ([0/8]), versions, file names: no process index
        return []
    runs = list(_NUMBER.finditer(token))
    out = []
    for run in runs:
        parts, last = [], 0
        for r in runs:
            parts.append(token[last : r.start()])
            parts.append("#" if r is run else "*")
            last = r.end()
        parts.append(token[last:])
        shape = "".join(parts)
        word = _WORD_BEFORE.search(shape[: shape.index("#") + 1])
        name = word.group(1).lower() if word and shape.index("#") - word.end(1) <= 2 else None
        if name is None and "<std" in shape and len(runs) == 1:
            name = "rank"  # a launcher's per-process stream tag, Horovod's "[3]<stderr>:"
        value = int(run.group())
        if value < MAX_INDEX:
            # A bare index qualified by a name in its own token ("[node7:3]") is within that node.
            named = name is None and _LETTER.search(_STREAM.sub("", shape)) is not None
            # An index after a name (NCCL's "host:pid:tid [0]", "node3: [0]") is another token
            # than the same shape at a line's start ("[3] host:pid:tid [0]"): its own shape.
            out.append(Token(f"…{shape}" if qualified else shape, value, name, qualified or named))
    return out


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

    def read(self, line: str) -> Reading:
        """The rank, local rank and host the tag of ``line`` gives."""
        head = read_head(line)
        rank = self.rank_in(head)
        if rank is None and head.process is not None:
            rank = self.rank_of_process.get(head.process)
        local = next((t.value for t in head.tokens if self._is(t, self.local_shapes, LOCAL_WORDS)), None)
        note = None
        if rank is not None and any(t.shape in self.parallel_shapes for t in head.tokens):
            note = f"its tensor-parallel index TP{rank}, taken as the rank"
            note += ": the log shows no other parallel group"
        return Reading(rank, local, head.host, note)

    def rank_in(self, head: Head) -> int | None:
        """The global rank of a head's tags; a tag that says `rank` beats one that says `worker`."""
        tags = [t for t in head.tokens if self._is(t, self.global_shapes, GLOBAL_WORDS)]
        return min(tags, key=lambda t: _WORD_ORDER.get(t.word or "", 9)).value if tags else None

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
        elif word is None and shape in leads and _bare_tag(counts):
            # A bare number only ever after a tag that names its process is the message's
            # ("[default0]:1: [allreduce.691943]", a list's entry), not a tag of its own.
            per_node = shape in nccl or any(len(hosts[(shape, v)]) > 1 for v in counts)
            (model.local_shapes if per_node else model.global_shapes).add(shape)
    model.parallel_shapes = _tp_as_rank(heads)
    model.global_shapes |= model.parallel_shapes
    model.coarse_shapes = _coarser(heads, model)
    model.global_shapes -= model.coarse_shapes
    model.local_values = {v for shape in model.local_shapes for v in values[shape]}
    named: dict[str, set[int]] = defaultdict(set)
    for line, head in heads:
        rank = model.rank_in(head)
        if rank is not None and head.host:
            model.host_of.setdefault(rank, head.host)
        if head.process is not None and (said := rank if rank is not None else unwrap(line).rank) is not None:
            named[head.process].add(said)
        if binds_pid(line):  # "process rank 0 with PID 19474 on node n7"
            facts = unwrap(line)
            if facts.rank is not None and facts.pid is not None:
                model.rank_of_pid.setdefault((facts.host, facts.pid), facts.rank)
    # A process whose lines name one rank (Ray's "(Worker pid=7) ... rank=3") is that rank.
    model.rank_of_process = {p: next(iter(r)) for p, r in named.items() if len(r) == 1}
    return model


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
            if _WORD_ORDER.get(a.word or "", 9) > 0 and any(
                b.shape in model.local_shapes and not b.shape.startswith("…") for b in mine[i + 1 :]
            ):
                outer.add(a.shape)
            for b in mine:
                # A bare number after a tag that says `rank` is the message's (a list's entry:
                # "[rank0]: 1: [allreduce.691943]"), not a process the rank tag counts.
                if b.shape != a.shape and not (_WORD_ORDER.get(a.word or "", 9) == 0 and b.word is None):
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
