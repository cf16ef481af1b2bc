"""The rank a message names in its words, and whether it names the speaker or a peer.

A line says which process it is in many words: `rank 3`, `Rank 3`, `[Rank 3]`, `rank=3`, `rank=[3]`,
`global rank 3`, `world_rank=3`, `task 3`, `task:3`, `worker 3`, `process_index=3`, or a
bracketed index as its subject (`[3] is setting up NCCL communicator`). A bare `process N` is
left out (it is a pid as often: "Process 20398 has 14.5 GiB memory in use", "Sending process 29
closing signal"), as are `worker-1` and `Task-8` (host and asyncio task names), a task of a
device path (`/task:0/device:GPU:0`, where an op was placed) and a task id (`taskID[38]` of a
device stream, `task_id=3` of a Slurm array). Two guards keep a mention from
being taken for the speaker:

- a local rank (`local rank 0`, `local_rank=0`, `LOCAL_RANK`) is a per-node index, never a rank;
- a rank the speaker talks *about* is a peer: one after a preposition (`from rank 3`, `to rank
  3`, `with rank 3`), after a verb of waiting or expecting (`waiting for rank 3`, `expected rank
  3`), or the subject of a sentence about its absence (`Rank 3 is not responding`). The subject
  of any other sentence is the speaker. A rank naming the process of a noun phrase ("the trainer
  process with rank=[3] was aborted") is that process; the phrase itself may be a peer
  ("waiting for the process with rank 3") or acted on ("killing the worker with rank 3");
- a rank within a group or a node (`node rank 1`, `data parallel rank 3`, `DP rank 2`) is no
  rank of the world.
"""

from __future__ import annotations

import re

# A mention: an optional "local"/"global", the word, a separator, the number; never inside a
# path ("/ckpt/rank3/"), except a JAX task name ("/job:jax_worker/replica:0/task:3").
_MENTION = re.compile(
    r"(?:(?<![\w/-])|(?<=/)(?=task:))(?P<local>local[ _-]?)?(?P<glob>(?:global|world)[ _-]?)?"
    r"(?P<word>rank|process_index|process_id|task|worker)"
    r"(?:[ _#]?(?:id|index)?[ =:#]{0,2})(?P<br>\[)?(?P<n>\d{1,6})(?(br)\])(?![\w.-]|/device)",
    re.IGNORECASE,
)
# A bracketed index as the subject of a sentence ("[3] is setting up NCCL communicator"), or as
# the speaker's own label opening the message or an exception's text ("[3]: params[4] in this
# process ...", "XError: [3]: ..."): a label has words after it, a list entry ("[1]:") has none.
_BRACKET_SUBJECT = re.compile(
    r"(?:^|[:.;] )\[(?P<n>\d{1,6})\](?: (?=(?:is|has|was|did|failed|got|could|cannot)\b)|: (?=[A-Za-z]{2}))"
)
# What comes just before a mention of a peer: a preposition, or a verb of waiting or expecting.
_PEER_BEFORE = re.compile(
    r"(?:\b(?:from|to|with|by|between|and|or|around|near|peer|peers|than|other|remote|of)"
    r"|\b(?:wait(?:s|ed|ing)?|await(?:s|ed|ing)?|expect(?:s|ed|ing)?)(?: (?:for|on|from))?)"
    r"\s*[\[(]?\s*$",
    re.IGNORECASE,
)
# A sentence about a peer's absence: its subject is not the one speaking.
_ABSENT_AFTER = re.compile(
    r"^\]?:? (?:is|has|was|seems|appears)? ?(?:not (?:responding|reachable|joined|ready)"
    r"|unresponsive|unreachable|missing|gone|down|dead|lost)"
    r"|^\]? (?:has not|did not|never|didn't|hasn't) "
    r"(?:joined|responded|respond|join|arrived|reported|entered)"
    r"|^\]? (?:went away|disconnected|left)",
    re.IGNORECASE,
)
# Words before a mention that make it some other kind of worker or task.
_OTHER_KIND = re.compile(
    r"(?:dataloader|data loader|loader|pool|celery|spark|thread)(?: worker)?\s*$", re.IGNORECASE
)
_LOCAL_ONLY = re.compile(r"local", re.IGNORECASE)
# A rank within a group or a node, not in the world: "node rank 1", "data parallel rank 3",
# "tensor model parallel rank 0", "DP rank 2", "pipeline rank 1", "group rank 1".
_WITHIN_GROUP = re.compile(
    r"(?:\b(?:node|group|dp|tp|pp|ep|cp|sp|mp|etp|(?:(?:data|tensor|pipeline|model|expert|context|sequence)"
    r"[ _-]?)+(?:parallel)?)[ _-]?)$",
    re.IGNORECASE,
)


def other_kind(message: str, start: int) -> bool:
    """Whether the process mentioned at ``start`` is another kind's (a data loader's, a pool's)."""
    return _OTHER_KIND.search(message[:start]) is not None


def within_group(message: str, start: int) -> bool:
    """Whether the rank mentioned at ``start`` is counted within a group or node (no world rank)."""
    return _WITHIN_GROUP.search(message[max(0, start - 40) : start]) is not None


# A process group's tag naming a group other than the default one: "[PG ID 6 PG GUID
# 90(PIPELINE_MODEL_PARALLEL_GROUP) Rank 1]". Every "[Rank N]" on its line counts within that group.
# Only the name tells: the default group's id is not always 0 ("[PG ID 1 PG GUID 1 Rank 2]" on the
# world's all-reduce), so a tag without a name is read as the world's.
_SUBGROUP = re.compile(r"\[PG (?:ID )?\d+ (?:PG GUID [^\s(]+ ?)?(?:\((?P<name>[^)\n]*)\) )?[Rr]ank \d+\]")


def in_subgroup(message: str) -> bool:
    """Whether the message is a process group's own, of a group other than the default (world) one."""
    if "[PG " not in message:
        return False
    m = _SUBGROUP.search(message)
    return m is not None and m.group("name") not in (None, "default_pg")


def speaker_rank(message: str) -> int | None:
    """The rank a message says is speaking, or None when it names none or only peers."""
    if (m := _BRACKET_SUBJECT.search(message)) is not None:
        return int(m.group("n"))
    peers: set[int] = set()  # a rank the message named as a peer stays one when named again
    for m in _MENTION.finditer(message):
        if m.group("local") or _LOCAL_ONLY.search(message[max(0, m.start() - 6) : m.start()]):
            continue
        if within_group(message, m.start()):
            continue
        if is_peer(message, m.start(), m.end()) or int(m.group("n")) in peers:
            peers.add(int(m.group("n")))  # ("disagreement between rank0 and rank6: rank0: [...]")
            continue
        if m.group("word").lower() != "rank" and other_kind(message, m.start()):
            continue
        if m.group("word").lower() == "task" and "id" in m.group(0)[4:].lower():
            continue  # a task id (a Slurm array's, a device stream's "taskID[38]") counts no process
        return int(m.group("n"))
    return None


# A rank that names the process a noun phrase is about ("the trainer process with rank=[3] was
# aborted", "worker with rank 2 exited"): "with" identifies, it is no preposition to a peer; whether
# the phrase is a peer is read before it ("waiting for the process with rank 3").
_NAMED_BY = re.compile(
    r"(?:\b(?:the|a|an|one)\s+)?(?:[\w-]+\s+)?(?:process|worker|trainer|task|actor|replica)\s+with\s*[\[(]?\s*$",
    re.IGNORECASE,
)

# A verb whose object the noun phrase is: the speaker acts on that process.
_ACTED_ON = re.compile(
    r"(?:\b\w+ing|\b(?:kill|terminat|stop|signal|send|sent|restart)\w*)\s*$", re.IGNORECASE
)


def is_peer(message: str, start: int, end: int) -> bool:
    """Whether the rank mentioned at ``message[start:end]`` is a peer the speaker talks about."""
    before = message[max(0, start - 40) : start]
    if (named := _NAMED_BY.search(before)) is not None:
        start -= len(before) - named.start()
        before = message[max(0, start - 40) : start]
        if _ACTED_ON.search(before):
            return True  # the object of what the speaker does ("Killing the process with rank 2")
    return bool(_PEER_BEFORE.search(before) or _ABSENT_AFTER.search(message[end:]))
