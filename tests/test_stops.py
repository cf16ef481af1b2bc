"""A Slurm step's cancellation and what stands beside it (signatures/stops.py), on the real library."""

from __future__ import annotations

from signatures import Diagnosis, Source, diagnose

STEP = "slurmstepd: error: *** STEP 1342.0 ON node04 CANCELLED AT 2023-07-31T10:09:23 ***\n"
JOB = "slurmstepd: error: *** JOB 1342 ON node04 CANCELLED AT 2023-07-31T10:09:23 ***\n"
ABORTED = "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
TRAINING = "epoch 1 step 78 loss 8.07\n"


def run(text: str) -> Diagnosis:
    return diagnose([Source.from_text("slurm-1342.out", text)])


def test_a_step_cancelled_with_nothing_else_said_was_cancelled() -> None:
    d = run(TRAINING + ABORTED + STEP)
    assert d.signature and d.signature.id == "slurm-cancelled"
    assert d.initiating and d.initiating.line == 3


def test_the_job_line_of_the_same_second_states_the_cancellation() -> None:
    d = run(TRAINING + ABORTED + STEP + JOB)
    assert d.signature and d.signature.id == "slurm-cancelled"
    assert d.initiating and d.initiating.line == 4


def test_a_step_srun_cancelled_after_a_task_exited_badly_gives_way_to_that_exit() -> None:
    task = "srun: error: node04: task 5: Exited with exit code 1\n"
    d = run(TRAINING + task + STEP)
    assert d.initiating and d.initiating.line == 2
    # a task that ended well is no reason for the cancellation
    fine = "srun: error: node04: task 5: Exited with exit code 0\n"
    assert run(TRAINING + fine + STEP).initiating.line == 3  # type: ignore[union-attr]


OOM_VERDICT = (
    "slurmstepd-gpu016: error: Detected 1 oom_kill event in StepId=25022916.batch. "
    "Some of the step tasks have been OOM Killed.\n"
)
KILLED = (
    "E0922 01:43:22.256000 140462450071360 torch/distributed/elastic/multiprocessing/api.py:833] "
    "failed (exitcode: -9) local_rank: 2 (pid: 3617183) of binary: /usr/bin/python\n"
)


def _filler(n: int) -> str:
    return "".join(
        f'  File "/usr/lib/python3.10/site-packages/torch/run.py", line {k}, in main\n' for k in range(n)
    )


TABLE = (
    "Root Cause (first observed failure):\n[0]:\n  time      : 2025-09-22_01:43:22\n  host      : gpu016\n"
    "  rank      : 2 (local_rank: 2)\n  exitcode  : -9 (pid: 3617183)\n  error_file: <N/A>\n"
    "  traceback : Signal 9 (SIGKILL) received by PID 3617183\n" + "=" * 54 + "\n"
)


def test_a_process_killed_just_above_an_oom_kill_verdict_was_killed_by_it() -> None:
    d = run(TRAINING + KILLED + _filler(20) + TABLE + OOM_VERDICT)
    assert d.signature and d.signature.id == "slurm-cgroup-oom"
    assert d.initiating and d.initiating.line == 32
    assert d.initiating.rank == 2  # the killed process's rank, from the table's entry
    # far above it (the verdict is printed once the step has ended, not a run later)
    far = run(TRAINING + KILLED + _filler(20) + TABLE + _filler(60) + OOM_VERDICT)
    assert far.initiating and far.initiating.line != 92
    assert far.signature and far.signature.id != "slurm-cgroup-oom"


def test_an_exception_above_a_kill_verdict_and_the_runs_wrap_up_is_how_it_met_the_kill() -> None:
    died = (
        'Traceback (most recent call last):\n  File "x.py", line 5, in <module>\n'
        "ConnectionRefusedError: [Errno 111] Connection refused\n"
    )
    summary = "".join(f"wandb:   train_metric_{k} 0.5\n" for k in range(90))
    d = run(TRAINING + died + summary + OOM_VERDICT)
    assert d.signature and d.signature.id == "slurm-cgroup-oom"
    summary = "".join(f"wandb:   train_metric_{k} 0.5\n" for k in range(130))
    assert run(TRAINING + died + summary + OOM_VERDICT).initiating.line == 4  # type: ignore[union-attr]
