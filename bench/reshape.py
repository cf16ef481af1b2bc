"""Rank-finding on launcher tag forms the corpus does not contain.

Every graded corpus case whose label names a rank and whose log carries per-line rank tags
(torchrun's `[rankN]:`, Open MPI's `[1,N]<stderr>:`, Horovod's `[N]<stderr>:`, Ray's
`(Worker[rank=N] pid=P, ip=I)`) is re-rendered in other real launcher forms: each tagged
line gets the same rank in the new form, and every other byte stays as it was (the label's line
keeps its text after the tag). Run from the repository root::

    .venv/bin/python bench/reshape.py          # the table: form x (cases, right, wrong, none)
    .venv/bin/python bench/reshape.py --misses # and every case whose rank was not right

A wrong rank is worse than none: it sends an on-call engineer to the wrong machine. A form is
applied only where it is honest: a per-node index (`[defaultN]:`) only when the job's ranks fit
on one node, and never a local index rendered as a global one (logs tagged by local index only
are left out).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from signatures import Source, diagnose
from tests.corpus.cases import Case, load_cases

# A global rank tag at the head of a line (after an optional timestamp glued to it), with what
# the launcher put between the tag and the process's own text.
_SOURCE = re.compile(
    r"^(?P<pre>(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4})?)"
    r"(?:(?:[\w-]+/\d+ )?\[default\d+\]:)?"
    r"(?:\[rank(?P<torch>\d+)\]: ?"
    r"|\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>:"
    r"|\[(?P<hvd>\d+)\]<std(?:out|err)>:"
    r"|\(\w+\[rank=(?P<ray>\d+)\] pid=\d+(?:, ip=[\w.:-]+)?\) ?)"
)
GPUS_PER_NODE = 8
NODE_NAMES = ("gpu-a100-{:02d}", "nid{:06d}", "ip-10-0-{}-17", "trn1-node{}")


@dataclass(frozen=True)
class Tagged:
    """One line of a log and the global rank its tag gives (None: untagged)."""

    pre: str
    rank: int | None
    body: str  # the process's own text, after the launcher's tag
    head: str = ""  # the launcher's tag itself


def split_tag(line: str) -> Tagged:
    """The rank tag of ``line`` and the text it wraps."""
    m = _SOURCE.match(line)
    if m is None:
        return Tagged("", None, line)
    rank = next(int(v) for k in ("torch", "mpi", "hvd", "ray") if (v := m.group(k)) is not None)
    pre = m.group("pre")
    return Tagged(pre, rank, line[m.end() :], line[len(pre) : m.end()])


@dataclass(frozen=True)
class World:
    """What a form needs to know about the job to render a tag honestly."""

    ranks: frozenset[int]
    case_no: int  # varies host names from case to case

    @property
    def width(self) -> int:
        return len(str(max(self.ranks)))

    @property
    def size(self) -> int:
        # the world the ranks shown fit in: a whole number of 8-GPU nodes, or fewer GPUs on one
        top = max(self.ranks) + 1
        return top if top <= GPUS_PER_NODE else -(-top // GPUS_PER_NODE) * GPUS_PER_NODE

    @property
    def one_node(self) -> bool:
        return max(self.ranks) < GPUS_PER_NODE

    def host(self, rank: int) -> str:
        pattern = NODE_NAMES[self.case_no % len(NODE_NAMES)]
        return pattern.format(rank // GPUS_PER_NODE + 1)

    def ip(self, rank: int) -> str:
        return f"10.{self.case_no % 200}.{rank // GPUS_PER_NODE}.{11 + rank // GPUS_PER_NODE}"

    def pid(self, rank: int) -> int:
        return 180_000 + (self.case_no * 977 + rank * 7919) % 90_000


def _stamp(n: int) -> str:
    return f"2026-11-30 21:{n // 60 % 60:02d}:{n % 60:02d},{n * 37 % 1000:03d}"


_ERRORISH = re.compile(
    r"error\b|exception|fail|abort|killed|fatal|traceback|signal|fault|SIG[A-Z]+|\*\*\*", re.I
)


def _absl(n: int, w: World, rank: int, body: str) -> str:
    # absl's head on a record that a JAX program logs with its process index; a record's own
    # continuation lines (indented frames, blank lines) carry no head, as absl prints them, and
    # a line that reports a failure is logged at ERROR (absl's head says the level).
    if not body.strip() or body[:1].isspace():
        return body
    level = "E" if _ERRORISH.search(body) else "I"
    stamp = f"{level}1130 21:{n // 60 % 60:02d}:{n % 60:02d}.{n * 37 % 10**6:06d} {w.pid(rank)}"
    return f"{stamp} train.py:212] process_index={rank}: {body}"


Render = Callable[[int, World, int, str], str]  # line number, world, rank, body -> the new line
FORMS: dict[str, tuple[Render, Callable[[World], bool]]] = {
    "torchrun [rankN]:": (lambda n, w, r, b: f"[rank{r}]: {b}", lambda w: True),
    "torchrun --tee [defaultN]: (one node)": (lambda n, w, r, b: f"[default{r}]:{b}", lambda w: w.one_node),
    "srun --label N:": (lambda n, w, r, b: f"{r:>{w.width}}: {b}", lambda w: True),
    "Open MPI [1,N]<stderr>:": (lambda n, w, r, b: f"[1,{r}]<stderr>:{b}", lambda w: True),
    "Open MPI [1,N]<stdout>:": (lambda n, w, r, b: f"[1,{r}]<stdout>:{b}", lambda w: True),
    "Horovod [N]<stderr>:": (lambda n, w, r, b: f"[{r}]<stderr>:{b}", lambda w: True),
    "pdsh host: [rankN]:": (lambda n, w, r, b: f"{w.host(r)}: [rank{r}]: {b}", lambda w: True),
    "pdsh host: [1,N]<stderr>:": (lambda n, w, r, b: f"{w.host(r)}: [1,{r}]<stderr>:{b}", lambda w: True),
    "Ray (RayTrainWorker pid, ip, rank)": (
        lambda n, w, r, b: f"(RayTrainWorker pid={w.pid(r)}, ip={w.ip(r)}, rank={r}) {b}",
        lambda w: True,
    ),
    "absl head, process_index=N:": (lambda n, w, r, b: _absl(n, w, r, b), lambda w: True),
    "bare [N] (a form no list names)": (lambda n, w, r, b: f"[{r}] {b}", lambda w: True),
    "[N/W] rank of world (a custom logger)": (lambda n, w, r, b: f"[{r}/{w.size}] {b}", lambda w: True),
    "(rank N) (a custom logger)": (lambda n, w, r, b: f"(rank {r}) {b}", lambda w: True),
    "host|N| (a custom logger)": (lambda n, w, r, b: f"{w.host(r)}|{r}| {b}", lambda w: True),
    "timestamp [rankN]:": (lambda n, w, r, b: f"{_stamp(n)} [rank{r}]: {b}", lambda w: True),
    "[rankN]: timestamp": (lambda n, w, r, b: f"[rank{r}]: {_stamp(n)} {b}", lambda w: True),
    "timestamp srun N:": (lambda n, w, r, b: f"{_stamp(n)} {r:>{w.width}}: {b}", lambda w: True),
}


@dataclass(frozen=True)
class Reshaped:
    """A corpus case with its tags re-rendered, and where its labelled line now is."""

    case: Case
    data: bytes
    line_no: int  # 1-based


def tagged_cases() -> list[tuple[Case, list[Tagged]]]:
    """The graded cases with a labelled rank whose logs carry per-line rank tags."""
    out = []
    for case in load_cases():
        if case.initiating_rank is None or case.initiating_line is None:
            continue
        lines = [split_tag(t) for t in case.data.decode("utf-8", "surrogateescape").split("\n")]
        if sum(1 for t in lines if t.rank is not None) >= 2:
            out.append((case, lines))
    return out


def reshape(case: Case, lines: list[Tagged], form: str, case_no: int) -> Reshaped | None:
    """``case`` with its tags in ``form``; None when the form would not be honest for it, or
    its labelled line can no longer be told apart."""
    render, honest = FORMS[form]
    world = World(frozenset(t.rank for t in lines if t.rank is not None), case_no)
    if not honest(world):
        return None
    new = [
        t.body if t.rank is None else t.pre + render(n, world, t.rank, t.body) for n, t in enumerate(lines)
    ]
    label = case.initiating_line or ""
    old_no = case.line_no or 0
    at = lines[old_no - 1]
    if at.rank is not None and label not in new[old_no - 1]:
        label = _label_after_tag(case, at)
    first = next((n for n, text in enumerate(new, start=1) if label and label in text), None)
    if first != old_no:
        return None
    return Reshaped(case, "\n".join(new).encode("utf-8", "surrogateescape"), old_no)


def _label_after_tag(case: Case, at: Tagged) -> str:
    # A label that includes the old tag keeps its part in the process's own text.
    label = case.initiating_line or ""
    return (
        label
        if label in at.body
        else next((label[i:] for i in range(len(label)) if at.body.startswith(label[i:])), "")
    )


@dataclass
class Row:
    cases: int = 0
    right: int = 0
    wrong: int = 0
    none: int = 0


def score(form: str, misses: list[str]) -> Row:
    """Diagnose every case in ``form`` and count its ranks."""
    row = Row()
    for case_no, (case, lines) in enumerate(tagged_cases()):
        shaped = reshape(case, lines, form, case_no)
        if shaped is None:
            continue
        init = diagnose([Source.from_bytes(case.path.name, shaped.data)]).initiating
        rank = init.rank if init else None
        row.cases += 1
        if rank == case.initiating_rank:
            row.right += 1
            continue
        if rank is None:
            row.none += 1
        else:
            row.wrong += 1
        where = f"line {init.line}" if init else "no line"
        misses.append(
            f"{form:38} {case.id:14} expected {case.initiating_rank}, got {rank} ({where}, labelled {shaped.line_no})"
        )
    return row


def main() -> int:
    """Print the table of forms, and the misses when asked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list every case whose rank was not right")
    parser.add_argument("--form", action="append", help="only this form (repeatable)")
    args = parser.parse_args()
    misses: list[str] = []
    print(f"| {'form':38} | cases | rank right | rank wrong | rank none |")
    print(f"| {'-' * 38} | ----- | ---------- | ---------- | --------- |")
    total = Row()
    for form in args.form or FORMS:
        row = score(form, misses)
        for k in ("cases", "right", "wrong", "none"):
            setattr(total, k, getattr(total, k) + getattr(row, k))
        print(f"| {form:38} | {row.cases:5} | {row.right:10} | {row.wrong:10} | {row.none:9} |")
    print(f"| {'all forms':38} | {total.cases:5} | {total.right:10} | {total.wrong:10} | {total.none:9} |")
    if args.misses:
        print("\n".join(["", "misses:", *misses]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
