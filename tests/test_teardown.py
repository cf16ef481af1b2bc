"""A requested stop (signatures/ranking.py _demote_teardown): what follows it is tear-down."""

from __future__ import annotations

from signatures import Source, Status, diagnose

SERVING = '[2026-08-02 00:10:00] INFO: 127.0.0.1 - "POST /generate HTTP/1.1" 200 OK\n'
TEARDOWN = (
    "[2026-08-02 00:17:43] Subprocess detokenizer (pid=31379) crashed with exit code -15. "
    "Triggering SIGQUIT for cleanup...\n"
)


def _diagnose(text: str):
    return diagnose([Source.from_text("server.log", text)])


def test_errors_after_a_stop_signal_are_the_tear_down() -> None:
    for stop in (
        "[2026-08-02 00:17:43] SIGTERM received. signum=None frame=None. Draining requests...\n",
        "(EngineCore pid=23397) INFO 08-01 21:34:51 [core.py:1214] trigger received signal=SIGTERM\n",
    ):
        assert _diagnose(SERVING + stop + TEARDOWN).status is Status.CLEAN
    # the same error without the request is a failure
    assert _diagnose(SERVING + TEARDOWN).status is not Status.CLEAN


def test_a_failure_before_the_stop_still_leads() -> None:
    failed = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    stop = "[2026-08-02 00:17:43] SIGTERM received. Draining requests and shutting down...\n"
    d = _diagnose(SERVING + failed + stop + TEARDOWN)
    assert d.status is not Status.CLEAN and d.initiating and d.initiating.line == 2


def test_a_scheduler_verdict_after_the_stop_is_kept() -> None:
    log = (
        "Main process received SIGTERM, exiting\n"
        "slurmstepd: error: *** JOB 1809579 ON r8i3n1 CANCELLED AT 2021-05-23T08:45:57 ***\n"
    )
    d = _diagnose(SERVING + log)
    assert d.initiating and "CANCELLED" in d.initiating.text


def test_of_a_step_and_its_job_cancelled_at_one_second_the_job_line_states_it() -> None:
    # both lines name the time limit (one signature, same role): only the rule puts the JOB first
    at = "CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n"
    step = f"slurmstepd: error: *** STEP 1999616.0 ON r6 {at}"
    job = f"slurmstepd: error: *** JOB 1999616 ON r6 {at}"
    for log in (step + job, job + step):
        d = _diagnose(SERVING + log)
        assert d.initiating and "*** JOB 1999616" in d.initiating.text
    # the JOB line of another second is another statement: the STEP line printed first leads
    later = job.replace("21:42:11", "21:43:40")
    d = _diagnose(SERVING + step + later)
    assert d.initiating and "*** STEP" in d.initiating.text
