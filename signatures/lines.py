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

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")

# Each prefix rule: a regex anchored at the start of what is left of the line. Named groups
# rank / host / ts / glogts carry facts; the rules are tried repeatedly until none applies.
_PREFIXES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"^> ",  # quoted paste
        r"^`(?=[^`])",  # a line pasted as inline code
        r"^[A-Za-z][\w.-]* +\| ",  # docker compose: "vllm-1  | "
        r"^\[(?:rank|RANK)(?P<rank>\d+)\]: ?",  # torchrun --local-ranks-filter / PyTorch 2.2+
        r"^\[default(?P<rank>\d+)\]: ?",  # torchrun --tee
        r"^\[(?:rank: ?|RANK )(?P<rank>\d+)\] ",  # Lightning [rank: 1], accelerate [RANK 1]
        r"^\[pod/(?P<host>[\w.-]+)/[\w.-]+\] ",  # kubectl logs --prefix
        r"^\[1,(?P<rank>\d+)\]<std(?:out|err)>: ?",  # mpirun --tag-output
        r"^\[(?P<pid>\d{3,})\] ",  # a bare pid tag
        r"^(?P<rank>\d{1,5}): ",  # srun --label
        # NCCL: host:pid:tid [cudaDev]
        r"^(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] ",
        # glog: [E321 02:07:08.408 ProcessGroupNCCL.cpp:607] or W0823 18:56:31.554000 40177 f.py:12]
        r"^\[?(?P<level>[IWEF])(?P<glogts>\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?)(?: +\d+)? +[\w./<>-]+:\d+\] ",
        r"^\[(?P<level>[IWEF]) [\w./<>-]+:\d+\] ",  # old glog: [E ProcessGroupNCCL.cpp:475]
        # abseil's glog with an unset clock (E0000 00:00:1738697930.202924 7665 f.cc:522]) and
        # TensorFlow's short head (E tensorflow/core/kernels/x.cc:157]): the level, no usable time
        r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d+(?:\.\d+)? +\d+ +[\w./<>-]+:\d+\] ",
        r"^(?P<level>[IWEF]) [\w./<>-]+:\d+\] ",
        # timestamps: [2024-09-11 17:52:18,030] or 2024-09-11T17:52:18.030Z
        r"^\[?(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?:? ",
        r"^\[(?P<host>[\w.-]+)\] (?=\d{4}-\d\d-\d\d)",  # espnet style [host] date
        r"^\[(?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)(?:\|[\w.]+:\d+)?\] (?:>> )?",
        r"^(?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL):[\w.]*:",  # logging's default
        # vLLM: "ERROR 02-28 17:42:17 [core.py:1006] "
        r"^(?P<level>INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
        r"\[[\w.]+:\d+\] ",
        # logger.name: [LEVEL] (a dotted logger name, never an exception's "XError: [ERROR] ...")
        r"^(?![\w.]*(?:Error|Exception|Warning):)\w+(?:\.\w+)+: "
        r"\[(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL)\] ",
        r"^\[[\w.-]+\.py:\d+:\w+\] ",  # DeepSpeed [file.py:183:fn]
        r"^\([\w:. -]+\) (?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL): ",  # (trainer:275) INFO:
        r"^\([\w:-]+ pid=\d+(?:, ip=(?P<host>[\w.:-]+))?\) ",  # vLLM / Ray actor tag
        # syslog / journald: "Jan 12 10:00:00 node7 kernel: "
        r"^[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d (?P<host>[\w.-]+) [\w./-]+(?:\[\d+\])?: ",
        r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\] ",  # dmesg -T
        r"^(?P<host>[a-z][a-z0-9-]*[0-9][a-z0-9-]*): ",  # pdsh / clush: "node003: "
        r"^\[\d+/\d+\](?:_\d+)? ",  # dynamo frame id [0/8]
        r"^\[__\w+\] ",  # TORCH_LOGS artifact tag
        r"^\[ *\d+\.\d+\] ",  # dmesg
        r"^>> ",
    )
)

# A rank the message itself names: NCCL's "[PG 1 Rank 3]", mpirun's "process rank 3 with PID".
_RANK_IN_MESSAGE = re.compile(
    r"\[(?:PG (?:ID )?\d+ (?:PG GUID \S+ )?)?Rank (?P<rank>\d+)\]|\bprocess rank (?P<mpi>\d+) with PID\b"
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


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def unwrap(line: str) -> LineFacts:
    """Peel launcher and logger prefixes off ``line``; keep rank, host and time."""
    text = strip_ansi(line).rstrip("\r\n")
    rank: int | None = None
    host: str | None = None
    time: str | None = None
    level: str | None = None
    for _ in range(_MAX_PREFIX_ROUNDS):
        for rule in _PREFIXES:
            m = rule.match(text)
            if m is None or m.end() == 0:
                continue
            groups = m.groupdict()
            if groups.get("rank") is not None and rank is None:
                rank = int(groups["rank"])
            if groups.get("host") and host is None:
                host = groups["host"]
            if groups.get("ts") and time is None:
                time = _iso(groups["ts"])
            if groups.get("glogts") and time is None:
                time = _glog_time(groups["glogts"])
            if groups.get("level") and level is None:
                level = groups["level"][0]
            text = text[m.end() :]
            break
        else:
            break
    if rank is None:
        m = _RANK_IN_MESSAGE.search(text)
        if m:
            rank = int(m.group("rank") or m.group("mpi"))
    return LineFacts(message=text, rank=rank, host=host, time=time, level=level)


def _iso(ts: str) -> str:
    return ts.replace(",", ".").replace(" ", "T", 1)


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


_RANK_IN_NAME = re.compile(r"(?:rank|RANK|Rank)[_.-]?(\d+)|(?:^|[_.-])r(\d+)(?:[_.-]|$)")


def rank_from_name(name: str) -> int | None:
    """A per-rank log's rank from its file name (`rank12.log`, `train_rank_3.err`)."""
    base = name.rsplit("/", 1)[-1]
    m = _RANK_IN_NAME.search(base)
    if not m:
        return None
    return int(m.group(1) or m.group(2))
