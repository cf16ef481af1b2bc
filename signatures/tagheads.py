"""The head of a log line: the tag-like tokens before its message, each integer in them a shape.

A line's head is the run of bracketed or parenthesised groups, colon- or pipe-ended words and
NCCL's `host:pid:tid` before its message; each integer in a token becomes a shape with the word
before it (`[rank#]:`, `#:`, `[*,#]<stderr>:`, `(…rank=#)`). Which shapes are process tags is
learned per log in processtags.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    r"|(?P<pipe>(?=[\w.-]*\d)[\w.-]{1,40}\|)(?=\S)"  # pipe-separated fields: "node7|3| ..."
    r"|(?P<groups>(?:(?:TP|DP|PP|EP|CP)\d{1,4}[ _]?)+\]?:?)(?=\s|$))"
)
# A process named by its parallel groups: vLLM's "Worker_TP4_EP4", SGLang's "[time DP1 TP3]".
_GROUP = re.compile(r"(?<![A-Za-z0-9])(?P<kind>TP|DP|PP|EP|CP)(?P<n>\d{1,4})(?![A-Za-z0-9])")
_NUMBER = re.compile(r"\d+")
_LETTER = re.compile(r"[A-Za-z]")
_STREAM = re.compile(r"<std(?:out|err)>")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z_]*)[ :=_-]{0,2}#")
_KEY_VALUE = re.compile(r"\b(?P<key>[A-Za-z_]+)\s*[=:]\s*(?P<value>[\w.-]+(?::\d+)?)")
# A head's field naming the process id: Ray's "(Worker pid=7, ...)", HCCL's "(PID:2969, ...)",
# a log head's "[PID: 2969]". The same pid in two heads of one host is one process.
_PID_FIELD = re.compile(r"^\[?(?i:pid)\s*[=:]\s*(?P<pid>\d+)\]?:?$")
_PIPE_LAST = re.compile(r"\d{1,6}\|(?=\s)")  # a number closing a run of pipe-separated fields
_OF_WORLD = re.compile(r"\[(?P<n>\d{1,5})/(?P<w>\d{1,5})\]:?")
_ID_SUFFIX = re.compile(r"_?(?:id|index|idx)$")
_HOSTISH = re.compile(r"^(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z][\w.-]*$")

GLOBAL_WORDS = frozenset(
    {"rank", "global_rank", "globalrank", "grank", "world_rank", "process", "proc", "task", "worker"}
)
LOCAL_WORDS = frozenset(
    {"default", "local", "local_rank", "localrank", "lrank", "gpu", "dev", "device", "cudadev"}
)
WORD_ORDER = {
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
    pos, tokens, host, qualified, process, piped = 0, [], None, "", None, False
    for _ in range(MAX_HEAD_TOKENS):
        if (s := _SKIP.match(line, pos)) is not None and s.end() > pos:
            pos = s.end()
            continue
        if piped and (field := _PIPE_LAST.match(line, pos)) is not None:
            pos, piped = field.end(), False  # the last field of "node7|3| ..."
            tokens.extend(_numbered(field.group(), qualified))
            qualified = ""
            continue
        m = _TOKEN.match(line, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        if m.group("nccl"):
            host = host or m.group("nccl").split(":", 1)[0]
            process = process or ":".join(m.group("nccl").split(":")[:2])
            qualified = "…"
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
        token = m.group("bracket") or m.group("word") or m.group("pipe")
        if token is not None and (pid := _PID_FIELD.match(token)) is not None:
            process = process or f"pid {pid.group('pid')}"
            continue
        if token is None:
            qualified = "…"  # a replica's name/0: what follows is an index within the replica
            continue
        tokens.extend(_numbered(token, qualified))
        qualified, piped = "", m.group("pipe") is not None
        # An upper-case code ("EI0002: ", "EE9999: ") is an error's code, not a host's name.
        hostish = (m.group("word") or m.group("pipe")) and _HOSTISH.match(token[:-1]) and not token.isupper()
        if hostish and not _process_word(token):
            host = host or token[:-1]  # pdsh's "node003: ", a pod's "worker-node-3: "
            qualified = "@"  # what follows is an index within that node, or a rank it runs
    return Head(tuple(tokens), host, process and f"{host}/{process}")


def _group_tokens(name: str) -> list[Token]:
    return [Token(f"<{g['kind']}#>", int(g["n"]), g["kind"].lower()) for g in _GROUP.finditer(name)]


def _process_word(token: str) -> bool:
    return any(t.word in GLOBAL_WORDS | LOCAL_WORDS for t in _numbered(token, ""))


def _numbered(token: str, qualified: str) -> list[Token]:
    # ``qualified``: "…" after NCCL's host:pid:tid or a replica's name/0, "@" after a host's name
    if (of := _OF_WORLD.fullmatch(token)) is not None and int(of["n"]) < int(of["w"]):
        # "[3/16]": a process of a world, when the world stays one number on every line (the
        # shape keeps it) and exceeds each index; dynamo's frame ids ("[0/0]", "[1/0]") do not.
        return [Token(f"{qualified}[#/{of['w']}]", int(of["n"]), None, bool(qualified))]
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
            out.append(Token(qualified + shape, value, name, bool(qualified) or named))
    return out
