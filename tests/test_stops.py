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
