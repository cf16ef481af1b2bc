"""One log line, unwrapped: the prefixes launchers and loggers add, and what they tell us.

Real training logs wrap every message in layers: a launcher's rank tag (`[rank3]:`,
`[default3]:`, srun's `3: `, mpirun's `[1,3]<stderr>:`), a logger head (glog, Python logging,
DeepSpeed, vLLM), timestamps and ANSI colours. Fingerprints are written against the message
inside, so the same signature matches whatever launched the job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from signatures.rankwords import in_subgroup, is_peer, other_kind, speaker_rank, within_group

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")

# Each prefix rule: a regex anchored at the start of what is left of the line. Named groups
# rank / local / host / pid / ts / glogts carry facts; the rules are tried repeatedly until none
# applies. `rank` is always a global rank; a launcher's per-node index is `local`.
_PREFIXES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"^> ",  # quoted paste
        r"^[ \t]*\*\*(?=[^*\s])",  # markdown's bold around a pasted line: "  **what():  Error: ...**"
        # a bar refreshed with "\r" many times: the terminal shows its last refresh
        r"^[^\n]*\d%\|[^\n]*\r(?=[^\r\n]*\d%\|)",
        # a progress bar a record was printed onto without a newline (tqdm's "\r" refresh):
        # "Epoch 0:  2%|▏   | 13/591 [15:07<11:12, 69.84s/it, loss=1.87]2022-08-19 19:12:17: E ..."
        # (a bar of unknown length has no percentage: "Epoch 0: |     | 4540/? [07:57<00:00, 9.51it/s]")
        r"^[^|\n]{0,120}(?:\d+%)?\|[^|\n]{0,120}\| *\d+/(?:\d+|\?) \[[^\]\n]{0,200}\] *"
        r"(?=\[?\d{4}-\d\d-\d\d[ T]|[IWEF]\d{4} |\[?(?:INFO|WARNING|ERROR|CRITICAL|FATAL)\b"
        r"|\[(?:rank|RANK)(?:: ?| )?\d+\]"  # or a rank tag: "...it/s, loss=3.4][rank: 2] Received ..."
        # or a crash: "...9.51it/s]Fatal Python error: Segmentation fault"
        r"|Fatal Python error: |Traceback \(most recent call last\)|[A-Z]\w*(?:Error|Exception): "
        # or a shell's report ("?it/s]zsh: bus error  yolo ...", ".../jac-crun: line 6:  3305 Killed")
        # or a source location's ("?it/s]/AppleInternal/.../MPSNDArrayGatherND.mm:256: failed ...")
        r"|(?:ba|z|k|da)?sh: |/[^\s:|]+: line \d+: |/[^\s:|]+\.\w{1,4}:\d+: )",
        r"^`(?=[^`])",  # a line pasted as inline code
        r"^[A-Za-z][\w.-]* +\| ",  # docker compose: "vllm-1  | "
        r"^[0-9a-f]{8} \|\| ",  # Determined's trial logs: the container's short id, "8de2ca81 || "
        r"^\[(?:rank|RANK)(?P<rank>\d+)\]: ?",  # torchrun --local-ranks-filter / PyTorch 2.2+
        r"^\[default(?P<local>\d+)\]: ?",  # torchrun --tee: [{role}{local_rank}]:
        # torchrun --tee with the host as role (--role "$(hostname -s):"): [node7:3] or [node7:3]:
        # (a source file and line, "[hccl_runner.cpp:132]", is a logger's head, not a host)
        r"^\[(?![\w.-]*\.(?:cpp|cc|cu|c|h|hpp|py|go|rs|java)\b)"
        r"(?P<host>[A-Za-z][\w.-]*):(?P<local>\d{1,3})\]:? ?",
        r"^[\w-]+/\d+ \[(?P<local>\d+)\]: ?",  # TorchX: {role}/{replica} [{local_rank}]:
        # Lightning [rank: 1], accelerate [RANK 1], and loggers' (rank 1) / <rank=1> alike
        # (NCCL's own "[Rank 0] Watchdog ..." stays in the message: signatures are written on it)
        r"^(?:\[(?:rank: ?|RANK )|[(<](?:rank|RANK|Rank)(?:: ?| |=))(?P<rank>\d+)[\])>]:? ",
        r"^\[pod/(?P<host>[\w.-]+)/[\w.-]+\] ",  # kubectl logs --prefix
        r"^\[\d{1,5},(?P<rank>\d+)\]<std(?:out|err|diag)>: ?",  # mpirun --tag-output: [job,rank]
        r"^\[(?P<rank>\d{1,6})\]<std(?:out|err|diag)>: ?",  # horovodrun's (Gloo) stream tag: [rank]
        r"^\[(?P<pid>\d{3,})\] ",  # a bare pid tag
        r"^ {0,4}(?P<task>\d{1,5}): ",  # srun --label (right-aligned to the widest task id): its task
        # NCCL: host:pid:tid [cudaDev]
        r"^(?P<host>[A-Za-z0-9][\w.-]*|-):(?P<pid>\d+):\d+ \[\d+\] ",  # "-" when the host is hidden
        # glog: [E321 02:07:08.408 ProcessGroupNCCL.cpp:607] or W0823 18:56:31.554000 40177 f.py:12]
        r"^\[?(?P<level>[IWEF])(?P<glogts>\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?)(?: +\d+)? +[\w./<>-]+:\d+\] ",
        r"^\[(?P<level>[IWEF]) [\w./<>-]+:\d+\] ",  # old glog: [E ProcessGroupNCCL.cpp:475]
        # abseil's glog with an unset clock (E0000 00:00:1738697930.202924 7665 f.cc:522]) and
        # TensorFlow's short head (E tensorflow/core/kernels/x.cc:157]): the level, no usable time
        r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d+(?:\.\d+)? +\d+ +[\w./<>-]+:\d+\] ",
        r"^(?P<level>[IWEFDT]) [\w./<>-]+:\d+\] ",  # TensorFlow's and Horovod's D and T too
        # timestamps: [2024-09-11 17:52:18,030] or 2024-09-11T17:52:18.030Z
        r"^\[?(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?"
        r"(?::? |(?=\[(?:\d{1,5},)?\d+\]<std))",  # a space after it, or Open MPI's tag glued to it
        # C's ctime(), Open MPI's --timestamp-output, often glued to the tag after it:
        # "Mon Sep  4 14:28:29 2023[1,0]<stderr>:"
        r"^(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}) ?(?=\S)",
        # espnet style [host] date; a level word in brackets before the date is the level (Ascend's
        # "[ERROR] 2025-10-11-15:09:34 (PID:2969, ...)"), never a host
        r"^\[(?!(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\])(?P<host>[\w.-]+)\] (?=\d{4}-\d\d-\d\d)",
        # a component's name and the level before the date: Paddle's "LAUNCH ERROR 2022-10-25 ..."
        r"^[A-Z][A-Z0-9_]{1,30} (?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL) (?=\d{4}-\d\d-\d\d)",
        # a level in lower case, bracketed, at the head: "[error] [36815] [hccl_runner.cpp:132] ..."
        r"^\[(?P<level>error|warning|warn|info|debug|critical|fatal)\] ",
        r"^(?:stdout|stderr) [FP] ",  # a container runtime's log file: "<time> stdout F <line>"
        r"^(?:stdout|stderr): ",  # a parent relaying its child's streams (accelerate test, test runners)
        r"^\[(?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)(?:\|[\w.]+:\d+)?\] (?:>> )?",
        r"^(?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL):[\w.]*:",  # logging's default
        # vLLM: "ERROR 02-28 17:42:17 [core.py:1006] "
        r"^(?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
        r"\[?[\w.]+:\d+\] ",
        # logger.name: [LEVEL] (a dotted logger name, never an exception's "XError: [ERROR] ...")
        r"^(?![\w.]*(?:Error|Exception|Warning):)\w+(?:\.\w+)+: "
        r"\[(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL)\] ",
        r"^\[[\w.-]+\.py:\d+:\w+\] ",  # DeepSpeed [file.py:183:fn]
        # loguru, its time peeled: "| WARNING  | pkg.mod:func:208 - msg"
        r"^\| (?P<level>TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) *\| (?:[\w.<>]+:[\w.<>]+:\d+ - )?",
        r"^\([\w:. -]+\) (?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL): ",  # (trainer:275) INFO:
        # vLLM / Ray actor tag; an actor named by its rank: "(PolicyWorker[rank=8] pid=3, ip=h) ",
        # and any more fields after the ip ("(RayTrainWorker pid=3, ip=h, rank=2) "; processtags
        # reads a field that names the rank)
        r"^\([\w:.-]+(?:\[(?:rank=(?P<rank>\d+)|[^\]\s]*)\])? pid=\d+(?:, ip=(?P<host>[\w.:-]+))?"
        r"(?:, [a-z_]+=[\w.:-]+)*\) ",
        # UCX's log head: "[1579244748.83] [host:pid:thread]  file.c:62  UCX  ERROR "
        r"^\[\d+\.\d+\] +\[(?P<host>[\w.-]+):(?P<pid>\d+):\d+\] +[\w./-]+:\d+ +UCX +"
        r"(?:(?P<level>ERROR|WARN|INFO|DEBUG|FATAL)|[A-Z]+) +",
        r"^\[(?P<host>[\w.-]+):(?P<pid>\d+) *:\d+:\d+\] ",  # UCX's signal handler: [host:pid:tid:tid]
        # syslog / journald: "Jan 12 10:00:00 node7 kernel: "
        r"^[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d (?P<host>[\w.-]+) [\w./-]+(?:\[\d+\])?: ",
        r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\] ",  # dmesg -T
        # pdsh / clush: "node003: ", and DeepSpeed's pdsh runner with a hostfile of "localhost" or
        # addresses: "localhost: ", "192.168.205.202: " (a word with no digit is too often a label;
        # "localhost" names no host: NCCL's own prefix after it does)
        r"^(?:(?P<host>[a-z][a-z0-9-]*[0-9][a-z0-9-]*|\d{1,3}(?:\.\d{1,3}){3})|localhost): ",
        r"^\[\d+/\d+\](?:_\d+)? ",  # dynamo frame id [0/8]
        r"^\[__\w+\] ",  # TORCH_LOGS artifact tag
        r"^\[ *\d+\.\d+\] ",  # dmesg
        r"^>> ",
    )
)

# A rank the message itself names: NCCL's "[PG 1 Rank 3]", mpirun's "process rank 3 with PID",
# mp.spawn's "process 1 terminated with", horovodrun's "Process 1 exit with status code 137",
# srun's "task 3: Killed", "AssertionError: Rank 3: ...".
_RANK_IN_MESSAGE = re.compile(
    r"\[(?:PG (?:ID )?\d+ (?:PG GUID \S+ )?(?:\([^)\n]*\) )?)?[Rr]ank (?P<rank>\d+)\]"
    r"|\bprocess rank (?P<mpi>\d+) with PID\b"
    r"|\b[Pp]rocess (?P<spawn>\d+) (?:terminated with|exit with status)\b"  # horovodrun: "exit with status"
    r"|\b[Pp]rocess (?P<of>\d+) ?(?:of|/) ?\d+\b"  # "process 3 of 8": a pid is never counted out of N
    r"|^srun: error: [\w.-]+: task (?P<task>\d+): "
    r"|(?:^|: )[Rr]ank (?P<lead>\d+): "
    r"|\brank[:=] {0,2}(?P<kv>\d+)\b"  # "... at line: 86 rank: 0"
    # a rank as the subject of a sentence: "... on ranks. Rank 1 is running collective: ..."
    r"|(?:^|[.:;] )[Rr]ank (?P<subj>\d+) (?:is|has|was|did|failed|timed out|received|hit|got)\b"
    r"|\bfor rank (?P<own>\d+):"  # DDP: "Parameter indices which did not receive grad for rank 0: 1"
    r"|\bProcess name: \[\[\d+,1\],(?P<vpid>\d+)\]"  # Open MPI's [[job,1],vpid]: the vpid is the MPI rank
    r"|^Process name: (?P<pname>\d+)\s*$"  # Horovod's report of the first process to exit: its rank
    # loggers that write the rank into their head: k2/icefall's "[train.py:1057] (2/4) ..." (rank
    # of world size), HugeCTR's "[HCTR][06:36:45.719][ERROR][RK0][main]: ..."
    r"|\[[\w.-]+\.py:\d+\] \((?P<k2>\d+)/\d+\) "
    r"|\]\[RK(?P<rk>\d+)\]\["
)
_RANK_GROUPS = (
    "rank",
    "mpi",
    "spawn",
    "of",
    "task",
    "lead",
    "kv",
    "subj",
    "own",
    "vpid",
    "pname",
    "k2",
    "rk",
)
# A local rank the message names: torchrun's "failed (exitcode: 1) local_rank: 3 (pid: 812917)".
# A launcher's command line for its child names it too: DeepSpeed's "'--local_rank=0'".
_LOCAL_IN_MESSAGE = re.compile(
    r"\blocal_rank: (?P<local>\d+)(?: \(pid: (?P<pid>\d+)\))?|--local[_-]rank=(?P<arg>\d+)\b"
)
# A pid bound to the rank the message names, in one phrase: mpirun's "process rank 0 with PID
# 19474", a launcher's "rank 3 (pid=812)" / "rank: 3, pid: 812". A pid elsewhere in the line
# ("killing worker with PID 9") may be another process's, so it is not read.
_PID_OF_RANK = re.compile(
    r"\b[Rr]ank[ =:]{0,2}\[?\d{1,6}\]?(?: with PID |,? \(?pid[:=] ?| \(pid )(?P<pid>\d+)\b"
)


def binds_pid(line: str) -> bool:
    """Whether ``line`` may bind a pid to a rank (a cheap test before unwrapping it)."""
    return ("id" in line or "ID" in line) and _PID_OF_RANK.search(line) is not None


# A host the message names: mpirun's "on node gpu-17", srun's "srun: error: gpu-17: task 3".
_HOST_IN_MESSAGE = re.compile(
    r"\bon node (?P<host>[A-Za-z0-9][\w.-]*)\b|^srun: error: (?P<srun>[A-Za-z0-9][\w.-]*): tasks? "
)
# Heads whose level is read but which stay in the message (signatures' excludes are written
# against them): logging with the time first, as JAX prints it ("INFO:2026-01-05 05:12:08,452:
# jax._src.xla_bridge:925: "), and a clock with a level letter ("05:12:08.452 [I] ").
_LEVEL_ONLY = re.compile(
    r"^(?P<word>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL):"
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?:[\w.]+:\d+: "
    r"|^\d\d:\d\d:\d\d(?:\.\d+)? \[(?P<letter>[IWEFD])\] "
)
_MAX_PREFIX_ROUNDS = 8


@dataclass(frozen=True)
class LineFacts:
    """The message inside a line and what its prefixes said about it."""

    message: str
    rank: int | None
    host: str | None
    time: str | None
    level: str | None = None  # the logger's level letter (I, W, E, F, D, C) when a head gave one
    local_rank: int | None = None  # a launcher's per-node index: never a global rank by itself
    pid: int | None = None  # the process id a prefix gave (NCCL's host:pid:tid)
    tagged: bool = False  # the rank came from a launcher's tag on the line, not from its words


def numbers_aside(text: str) -> str:
    """``text`` with every run of digits as ``#``: the same words, whatever values they carry."""
    return _NUMBERS.sub("#", text)


_NUMBERS = re.compile(r"\d+")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def unwrap(line: str) -> LineFacts:
    """Peel launcher and logger prefixes off ``line``; keep rank, host, time and level."""
    text = strip_ansi(line).rstrip("\r\n")
    found: dict[str, str] = {}
    for _ in range(_MAX_PREFIX_ROUNDS):
        for rule in _PREFIXES:
            m = rule.match(text)
            if m is None or m.end() == 0:
                continue
            for key, value in m.groupdict().items():
                if value is not None and value != "":
                    found.setdefault(key, value)
            text = text[m.end() :]
            break
        else:
            break
    rank = int(found["rank"]) if "rank" in found else int(found["task"]) if "task" in found else None
    tagged = rank is not None
    local = int(found["local"]) if "local" in found else None
    pid = int(found["pid"]) if "pid" in found else None
    host = found.get("host") if found.get("host") != "-" else None  # NCCL's hidden host
    if rank is None:
        rank = _message_rank(text)
        bound = rank is not None and pid is None and ("id" in text or "ID" in text)
        if bound and (m := _PID_OF_RANK.search(text)):
            pid = int(m.group("pid"))
    named = "local_rank" in text or "local-rank" in text
    if local is None and named and (m := _LOCAL_IN_MESSAGE.search(text)):
        local = int(m.group("local") or m.group("arg"))
        pid = pid if pid is not None or m.group("pid") is None else int(m.group("pid"))
    if host is None and (m := _HOST_IN_MESSAGE.search(text)):
        host = m.group("host") or m.group("srun")
    time = _iso(found["ts"]) if "ts" in found else _glog_time(found["glogts"]) if "glogts" in found else None
    if time is None and "ctime" in found:
        time = _ctime(found["ctime"])
    level = found["level"][0].upper() if "level" in found else None
    if level is None and (m := _LEVEL_ONLY.match(text)):
        level = (m.group("word") or m.group("letter"))[0]
    return LineFacts(text, rank, host, time, level, local, pid, tagged)


def _message_rank(text: str) -> int | None:
    # The launchers' and libraries' own forms first, then any mention of the speaker's rank;
    # a rank the message names as a peer ("waiting for rank 3") is not the speaker's.
    subgroup = in_subgroup(text)  # its "[Rank N]" are ranks within that group
    for m in _RANK_IN_MESSAGE.finditer(text):
        group = next(g for g in _RANK_GROUPS if m.group(g) is not None)
        if group == "rank" and subgroup:
            continue
        if text[max(0, m.start() - 6) : m.start()].lower().rstrip(" _-").endswith("local"):
            continue  # "Local rank: 4", "local_rank=4": a per-node index
        if group == "of" and other_kind(text, m.start()):
            continue  # "DataLoader worker process 3 of 8"
        word = text.lower().rfind("rank", m.start(), m.start(group))
        if word >= 0 and within_group(text, word):
            continue  # "node rank 1", "data parallel rank 3": a rank within a group
        if not is_peer(text, m.start(), m.end(group)):
            return int(m.group(group))
    return None if subgroup else speaker_rank(text)


def _iso(ts: str) -> str:
    return ts.replace(",", ".").replace(" ", "T", 1)


def _ctime(ts: str) -> str | None:
    try:
        return datetime.strptime(" ".join(ts.split()), "%a %b %d %H:%M:%S %Y").isoformat()
    except ValueError:
        return None


def _glog_time(ts: str) -> str:
    # glog has no year: keep month-day and time, which still orders lines within a run.
    month_day, clock = ts.split(" ", 1)
    return f"{int(month_day[:-2]):02d}-{month_day[-2:]}T{clock}"


def time_key(time: str | None) -> tuple[int, float] | None:
    """A sortable key for a line's time; None when it has none. Kinds never mix."""
    if time is None:
        return None
    try:
        if len(time) >= 10 and time[4] == "-":
            stamp = datetime.fromisoformat(time.replace("Z", "+00:00"))
            return (1, stamp.replace(tzinfo=None).timestamp())
        month_day, clock = time.split("T", 1)
        month, day = month_day.split("-")
        h, m, s = clock.split(":")
        return (0, ((int(month) * 31 + int(day)) * 24 + int(h)) * 3600 + int(m) * 60 + float(s))
    except ValueError:
        return None


# Only an explicit "rank" names a rank; `job_r2.log` or `node2.log` are too ambiguous to read.
_RANK_IN_NAME = re.compile(r"(?:^|[^A-Za-z])(?:rank|RANK|Rank)[_.-]?(\d+)(?!\d)")


def rank_from_name(name: str) -> int | None:
    """A per-rank log's rank from its file name (`rank12.log`, `rank-03.out`), when unambiguous."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    found = {int(m.group(1)) for m in _RANK_IN_NAME.finditer(base)}
    return found.pop() if len(found) == 1 else None
