"""Ends that are no failure of their own: tear-down after a requested stop, warnings after a
run said it finished, a Slurm step's line beside its job's, a scheduler's stop of a job that a
stated failure had already hung. All only lower candidates (ranking.py applies them last). And
whom a line of Slurm's step daemon concerns (attribution.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from signatures.candidate import (
    TIER_BENIGN,
    TIER_DEATH,
    TIER_DOWNSTREAM,
    TIER_UNKNOWN,
    TIER_WRAPPER,
    Candidate,
)
from signatures.lines import numbers_aside, unwrap
from signatures.tracebacks import exception_name

TEARDOWN_REACH = 200  # lines after a stop request that are the process's shutting down


def demote_teardown(cands: list[Candidate], stops: list[tuple[int, int]]) -> None:
    """What a process prints after it said it was asked to stop (SIGTERM or SIGINT received) is
    its tear-down: workers it kills, an engine it finds dead, an exit code -15. No failure of its
    own, unless something failed before the request (that earlier line leads anyway)."""
    for c in cands:
        if "scheduler-verdict" in c.shapes:
            continue  # the scheduler saying why it stopped the job is the cause, not the tear-down
        if any(f == c.hit.file_index and 0 < c.hit.line - line <= TEARDOWN_REACH for f, line in stops):
            c.tier = TIER_BENIGN


def read_finishes(cands: list[Candidate], finishes: Sequence[tuple[int, int]]) -> None:
    """What a run said before it finished as meant it survived; what it warns of after, tear-down."""
    demote_survived_before_finish(cands, finishes)
    demote_warnings_after_finish(cands, finishes)


def demote_survived_before_finish(cands: list[Candidate], finishes: Sequence[tuple[int, int]]) -> None:
    """A failure printed before the run said, in the same file, that it finished as meant was
    survived: a callback's logged traceback, a probe's error (Lightning's "`Trainer.fit` stopped:
    `max_epochs=1` reached." below them). The run's own word that it finished outweighs them. The
    same failure printed again after the finish, numbers aside, is survived the same way (the
    callback failing at each checkpoint)."""
    said = {id(c): (c.hit.file_index, numbers_aside(c.hit.facts.message.strip())) for c in cands}
    survived: set[tuple[int, str]] = set()
    for c in cands:
        if c.tier < TIER_BENIGN and any(f == c.hit.file_index and c.line < line for f, line in finishes):
            c.tier = TIER_BENIGN
            survived.add(said[id(c)])
    for c in cands:
        if said[id(c)] in survived:
            c.tier = max(c.tier, TIER_BENIGN)


def demote_warnings_after_finish(cands: list[Candidate], finishes: Sequence[tuple[int, int]]) -> None:
    """What a run warns of after it said it finished as meant (MLPerf's run_stop with status
    success, "Training completed.") is its tear-down: NCCL's proxy thread losing its peers, c10d's
    store closing under the other node. Warnings only: an error record, an exception or a death
    after it still states a failure. A C++ stack printed under such a warning is part of it."""
    for c in cands:
        if not any(f == c.hit.file_index and c.hit.line > line for f, line in finishes):
            continue
        own = c.hit.facts.level == "W" or "NCCL WARN " in c.hit.text  # (facts read the whole line)
        # A C++ stack belongs to the record above it: an error record stands on its own, so the
        # stack says nothing more unless that record is known to be no warning.
        above = _record_above(c.hit.before)
        under = _STACK.match(c.hit.facts.message) is not None and (not above or _warned(above))
        if own or under:
            c.tier = TIER_BENIGN


_STACK = re.compile(r"^(?:Exception raised from |frame #\d+: )")


def _record_above(before: Sequence[str]) -> str:
    # The line a C++ stack hangs from: the nearest line above it that is none of its frames.
    return next((t for t in reversed(before) if not _STACK.match(unwrap(t).message)), "")


def _warned(text: str) -> bool:
    return unwrap(text).level == "W" or "NCCL WARN " in text


_SLURM_CANCEL = re.compile(
    r"\*\*\* (?P<what>JOB|STEP) (?P<job>\d+)(?:\.\S+)? ON \S+ CANCELLED AT (?P<at>\S+)"
)


def demote_step_beside_job(cands: list[Candidate]) -> None:
    """Slurm prints the job's cancellation and each step's at the same second: the JOB line states
    the cause (the job was cancelled, or ran out of time), a STEP line what that did to one step.
    A STEP cancelled just after srun reported one of its tasks exiting badly was cancelled for that."""
    jobs = {
        (m.group("job"), m.group("at"))
        for c in cands
        if (m := _SLURM_CANCEL.search(c.text)) is not None and m.group("what") == "JOB"
    }
    for c in cands:
        m = _SLURM_CANCEL.search(c.text)
        if m is None or m.group("what") != "STEP":
            continue
        if (m.group("job"), m.group("at")) in jobs:
            c.tier = max(c.tier, TIER_DOWNSTREAM)
        elif _after_a_task_exit(c):
            c.tier = max(c.tier, TIER_WRAPPER)  # srun's tear-down of the step, as its other notices


# srun's report of a task that ended badly: srun then cancels the step (--kill-on-bad-exit).
_TASK_EXIT = re.compile(
    r"srun: error: \S+: tasks? [0-9,-]+: "
    r"(?:Exited with exit code [1-9]|Killed|Terminated|Aborted|Segmentation)"
)


def _after_a_task_exit(step: Candidate) -> bool:
    # A step cancelled right after one of its tasks exited badly was cancelled by srun for that
    # exit: the task's report says why.
    return any(_TASK_EXIT.search(text) for text in step.hit.before)


# A verdict that stops a job for running too long or on request: it says when the job was
# stopped, never why it stopped making progress.
_STOP_VERDICT = re.compile(
    r"CANCELLED AT \S+(?: DUE TO TIME LIMIT)? \*\*\*|\b(?:DeadlineExceeded|BackoffLimitExceeded)\b"
)


def yield_stops_to_stated_failures(
    cands: list[Candidate], time_order: Callable[[Candidate, Candidate], int]
) -> None:
    """A scheduler's stop (time limit, cancellation) gives way to a failure a process stated
    before it and did not carry on from: that failure is why the job hung until it was stopped.
    ``time_order`` is ranking.py's (-1 when the first was printed before the second)."""
    stated = [
        c
        for c in cands
        if c.tier <= TIER_UNKNOWN and not c.yields and not c.death and "scheduler-verdict" not in c.shapes
    ]
    for v in cands:
        if "scheduler-verdict" not in v.shapes or v.tier >= TIER_DEATH or not _STOP_VERDICT.search(v.text):
            continue
        before = [c.tier for c in stated if time_order(c, v) < 0]
        if before:
            v.tier, v.yields = max(v.tier, min(before)), True


# A verdict that the scheduler killed the job's processes, for memory or a lost node: it is printed
# once the step has ended, after what the processes said as they died.
_KILL_VERDICT = re.compile(
    r"oom[-_]kill event|\bOUT_OF_MEMORY\b|\bNODE_FAIL\b|DUE TO (?:PREEMPTION|NODE FAIL)|\bOOMKill|\bEvicted\b"
)
_KILLED = re.compile(r"exitcode *: -9\b|exit(?:ed)? (?:code|status) (?:-9|137)\b|\bSIGKILL\b|Signal 9\b")
KILL_REACH = 120  # lines above a kill verdict where its processes' last errors stand
KILLED_REACH = 60  # lines above it where a process's report of its own kill stands


def yield_reactions_to_kills(cands: list[Candidate]) -> None:
    """An exception no signature knows, printed just above a scheduler's verdict that it killed the
    job's processes (an OOM kill, a lost node, a preemption, an eviction), is how a process met
    that kill (Ray Tune's "Trials did not complete", then slurmstepd's "Detected 8 oom-kill
    event(s)"): the verdict states the failure."""
    for v in cands:
        if "scheduler-verdict" not in v.shapes or v.tier >= TIER_DEATH or not _KILL_VERDICT.search(v.text):
            continue
        for c in cands:
            near = c.hit.file_index == v.hit.file_index and 0 < v.line - c.line <= KILL_REACH
            raised = exception_name(c.hit.facts.message.strip()) is not None  # a process's, not srun's
            if near and raised and c.signature is None and c.tier <= TIER_UNKNOWN:
                c.tier, c.yields = max(c.tier, TIER_DOWNSTREAM), True
            # a process killed (-9, SIGKILL) just above: the verdict says what killed it
            killed = c.death and _KILLED.search(c.text) is not None
            if killed and c.hit.file_index == v.hit.file_index and 0 < v.line - c.line <= KILLED_REACH:
                c.tier, c.yields = max(c.tier, TIER_DOWNSTREAM), True
                v.head = v.head or c.hit  # the verdict is about that process: its rank and host


_STEP_DAEMON = re.compile(r"(?:^|[\s:])slurmstepd(?:-[\w.-]+)?: ")  # after any label
_SRUN_TASK = re.compile(r"^srun: error: [\w.-]+: task (?P<task>\d+): ")
STEP_REPORT_REACH = 4  # lines below slurmstepd's line where srun names the task it concerns


def step_daemon_task(text: str, after: Sequence[str]) -> tuple[bool, int | None]:
    """Whether ``text`` is Slurm's step daemon speaking, and the task it concerns.

    slurmstepd speaks for the whole step: srun forwards its line under one task's label (task 0's,
    usually), which says nothing about whom it concerns. srun's own report just below names the
    task (`srun: error: node7: task 5: Out Of Memory`): that task, when it names exactly one."""
    if not _STEP_DAEMON.search(text[:120]):
        return False, None
    tasks = {int(m.group("task")) for t in after[:STEP_REPORT_REACH] if (m := _SRUN_TASK.match(t.strip()))}
    return True, (tasks.pop() if len(tasks) == 1 else None)
