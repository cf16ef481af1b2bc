"""Bursts of one process (signatures/bursts.py), levels learned per log (signatures/levels.py) and
a scheduler's stop after a stated failure (signatures/stops.py), on made-up lines in shapes the
corpus does not use, with a library that knows none of them."""

from __future__ import annotations

import pytest

from signatures import Source, Status, diagnose
from signatures.diagnosis import Diagnosis
from signatures.levels import learn
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc("kernel-fault"),
            signature_doc(
                "job-stopped",
                category="scheduler",
                fingerprints=[{"regex": r"CANCELLED AT \S+(?: DUE TO TIME LIMIT)? \*\*\*"}],
            ),
            signature_doc(
                "fabric-stall",
                fingerprints=[{"regex": r"fabric stall (?:suspected|confirmed)"}],
            ),
        ],
    )


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.log", text)], library=library)


# --- one burst of one process: the restatement states it --------------------------------------


@pytest.mark.parametrize(
    ("upper", "lower"),
    [
        # the same subject, then the cause
        (
            "CRITICAL|trainer| Shard prefetcher worker stopped unexpectedly",
            "CRITICAL|trainer| Shard prefetcher worker stopped: object store returned 503 for shard-0007",
        ),
        # the same facts under a narrower lead
        (
            "** FATAL ** [grp 4 member 2] Problem (fault or stall) at op 88, queued 88, done 87, pending 1.",
            "** FATAL ** [grp 4 member 2] Stall timeout on op 88, queued 88, done 87, pending 1.",
        ),
    ],
    ids=["subject-then-cause", "facts-under-narrower-lead"],
)
def test_a_restatement_in_the_same_burst_states_the_failure(library: Library, upper: str, lower: str) -> None:
    log = f"step 10 loss 2.1\n{upper}\n{lower}\n"
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 3, d.initiating


@pytest.mark.parametrize(
    "lower",
    [
        "CRITICAL|trainer| Shard prefetcher worker stopped unexpectedly",  # a repeat
        "CRITICAL|trainer| re-raised: Shard prefetcher worker stopped unexpectedly",  # a quotation
        "CRITICAL|trainer| ShardError: Shard prefetcher worker stopped unexpectedly",  # the same, named
        "CRITICAL|trainer| Gradient bucket 3 was never reduced",  # another failure
    ],
    ids=["repeat", "quotation", "named", "other-failure"],
)
def test_a_repeat_a_quotation_or_another_failure_is_no_restatement(library: Library, lower: str) -> None:
    log = f"step 10 loss 2.1\nCRITICAL|trainer| Shard prefetcher worker stopped unexpectedly\n{lower}\n"
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 2


def test_a_cause_quoted_after_a_colon_is_no_restatement(library: Library) -> None:
    log = (
        "step 10 loss 2.1\n"
        "CRITICAL|ring| Tearing down due to peer error: peer 7 closed the stream or its host left\n"
        "CRITICAL|ring| UNAVAILABLE: ring.cc:40: op failed: peer 7 closed the stream or its host left\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 2


def test_statements_of_two_processes_are_no_burst(library: Library) -> None:
    log = (
        "[rank1]: ERROR: Shard prefetcher worker stopped unexpectedly\n"
        "[rank3]: ERROR: Shard prefetcher worker stopped: object store returned 503\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 1


def test_a_known_statement_moves_to_its_restatement_and_keeps_its_name(library: Library) -> None:
    log = (
        "epoch 2 step 40\n"
        "FATAL: fabric stall suspected on link 5, retries 3 of 3 used, port 17 down.\n"
        "FATAL: Link flap on link 5, retries 3 of 3 used, port 17 down.\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 3
    assert d.signature is not None and d.signature.id == "fabric-stall"


def test_an_announcement_gives_way_to_the_exception_its_traceback_ends_in(library: Library) -> None:
    log = (
        "CRITICAL:svc:Shard 4 crashed.\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/loop.py", line 10, in run\n'
        "    step()\n"
        "StorageTimeoutError: object store gave no answer for shard-0007 within 30 s\n"
    )
    d = run(library, log)
    assert d.initiating is not None and "StorageTimeoutError" in d.initiating.text


def test_a_statement_with_its_cause_still_leads_its_traceback(library: Library) -> None:
    log = (
        "CRITICAL:svc:Shard 4 crashed: object store gave no answer\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/loop.py", line 10, in run\n'
        "    step()\n"
        "StorageTimeoutError: 30 s\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 1


# --- levels: where the log writes them -----------------------------------------------------------


def test_the_level_column_is_learned_from_quiet_records() -> None:
    lines = [
        "07:00:01 <I> loader | opened 12 shards",
        "07:00:02 <W> loader | shard 3 is slow",
        "07:00:03 <E> loader | shard 4 unreadable",
    ]
    model = learn(lines)
    assert [model.level(x) for x in lines] == ["I", "W", "E"]


def test_a_letter_the_log_never_uses_as_a_quiet_level_is_no_level() -> None:
    lines = ["07:00:01 <E> loader | opened", "07:00:02 <E> loader | opened again"]
    assert learn(lines).level(lines[0]) is None


@pytest.mark.parametrize(
    "line",
    ['ts=2031-02-03 level=error msg="shard 4 unreadable"', '{"level": "error", "msg": "shard 4 unreadable"}'],
    ids=["logfmt", "json"],
)
def test_a_named_level_is_read_without_learning(line: str) -> None:
    assert learn([]).level(line) == "E"


def test_error_records_in_a_lower_case_column_are_no_ordinary_output(library: Library) -> None:
    # The first record is found by its upper-case head; the records after it, in a column the
    # scan has no word for, still say the process goes on failing: it did not carry on.
    log = "[FATAL] comm(12,svc):2031-02-03-04:05:06 [ring.cc:88] ring setup failed, code 5\n" + "".join(
        f"[2031-02-03 04:05:06.{k}] [error] [4242] [p.cc:{k}] member {k} gone\n" for k in range(6)
    )
    d = run(library, log)
    assert d.status is not Status.CLEAN and d.initiating is not None and d.initiating.line == 1


def test_info_records_in_that_column_are_ordinary_output(library: Library) -> None:
    log = "[FATAL] comm(12,svc):2031-02-03-04:05:06 [ring.cc:88] ring setup failed, code 5\n" + "".join(
        f"[2031-02-03 04:05:06.{k}] [info] [4242] [pool.cc:{k}] member {k} up\n" for k in range(6)
    )
    assert run(library, log).status is Status.CLEAN


def test_a_bracketed_level_before_the_date_is_no_host() -> None:
    from signatures.lines import unwrap

    facts = unwrap("[FATAL] 2031-02-03-04:05:06 (PID:7, Dev:1) E10001 accelerator call failed.")
    assert facts.level == "F" and facts.host is None


def test_an_error_record_moves_to_the_coded_record_that_details_it(library: Library) -> None:
    log = (
        "[ERROR] 2031-02-03-04:05:06 (PID:7, Dev:1) XQ12345 accelerator call failed.\n"
        "ZZ0042: [PID: 7] 2031-02-03-04:05:06.123 The ring peer 9 sent no token within 600 s.\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 2
    # an error no signature knows, in no logger's head, moves to the coded record below it too
    bare = "[Error]: the tasks of stream 3 failed to complete in time.\n    See the device log.\n"
    d = run(library, bare + log.splitlines(keepends=True)[1])
    assert d.initiating is not None and d.initiating.line == 3


# --- a scheduler's stop after a stated failure ---------------------------------------------------


def test_a_time_limit_gives_way_to_the_failure_that_hung_the_job(library: Library) -> None:
    log = (
        "step 7 loss 1.9\n"
        "node3:881:902 [2] NCCL WARN NET/Fabric: completion failed with status 12\n"
        "node3:881:902 [2] NCCL INFO net.cc:533 -> 2\n"
        "slurmstepd: error: *** JOB 77 ON node3 CANCELLED AT 2031-02-03T04:05:06 DUE TO TIME LIMIT ***\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 2


def test_a_time_limit_after_a_survived_error_states_the_failure(library: Library) -> None:
    log = (
        "ERROR: could not reach the metrics host, going on without it\n"
        + "".join(f"step {k} loss {2 - k / 100:.2f}\n" for k in range(1, 9))
        + "slurmstepd: error: *** JOB 77 ON node3 CANCELLED AT 2031-02-03T04:05:06 DUE TO TIME LIMIT ***\n"
    )
    d = run(library, log)
    assert d.signature is not None and d.signature.id == "job-stopped"


def test_a_death_before_the_time_limit_does_not_take_its_place(library: Library) -> None:
    log = (
        "step 7 loss 1.9\n"
        "worker exited with exit code 1\n"
        "slurmstepd: error: *** JOB 77 ON node3 CANCELLED AT 2031-02-03T04:05:06 DUE TO TIME LIMIT ***\n"
    )
    d = run(library, log)
    assert d.signature is not None and d.signature.id == "job-stopped"


@pytest.mark.parametrize(
    ("detail", "moved"),
    [
        ("Shard reader pid 4411 status failed, exit code 3, log shard.4411.log", True),
        ("2031-02-03 04:05:07 SUP INFO Shard reader restarted", False),  # a record of its own
        ("Uploading the partial checkpoint to the store", False),  # another subject
    ],
    ids=["detail-below", "next-record", "other-subject"],
)
def test_an_announcement_moves_to_the_detail_line_below_it(
    library: Library, detail: str, moved: bool
) -> None:
    log = f"step 3 loss 1.1\nSUP FATAL 2031-02-03 04:05:06 Shard failed !!!\n{detail}\n"
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == (3 if moved else 2)


@pytest.mark.parametrize(
    ("below", "moved"),
    [
        ('KeyError("[E900] Could not run the full pipeline for evaluation. If you', True),  # a repr
        ("ValueError: [E030] Sentence boundaries unset.", True),
        ("component to the pipeline with: nlp.add_pipe('sentencizer').", False),  # no exception
    ],
)
def test_a_statement_introducing_an_exception_gives_way_to_it(
    library: Library, below: str, moved: bool
) -> None:
    log = f"---  ------  -----\nAborting and saving the final best model. Encountered exception:\n{below}\n"
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == (3 if moved else 2)


def test_the_same_statement_from_other_threads_is_a_repeat(library: Library) -> None:
    log = (
        "ep 1 42%|## | 420/1000 [01:02<01:30] kern.cu:88: lane [3,0,0] Check `idx < n` failed on device 0.\n"
        "kern.cu:88: lane [4,0,0] Check `idx < n` failed on device 0.\n"
        "kern.cu:88: lane [5,0,0] Check `idx < n` failed on device 0.\n"
    )
    d = run(library, log.replace("Check `", "Assertion `"))
    assert d.initiating is not None and d.initiating.line == 1


@pytest.mark.parametrize(
    "record",
    [
        'ts=2031-02-03T04:05:07Z level=error msg="shard 3 lost its lease, stopping" shard=3',
        '{"ts": "2031-02-03T04:05:07Z", "level": "fatal", "msg": "shard 3 lost its lease, stopping"}',
        "[2031-02-03 04:05:07.118] [critical] [pool.cc:12] shard 3 lost its lease, stopping",
    ],
    ids=["logfmt", "json", "bracketed"],
)
def test_a_failing_level_named_in_lower_case_states_a_failure(library: Library, record: str) -> None:
    d = run(library, f"step 1 loss 2.0\n{record}\n")
    assert d.status is Status.UNRECOGNIZED and d.initiating is not None and d.initiating.line == 2


@pytest.mark.parametrize(
    "record",
    [
        'ts=2031-02-03T04:05:07Z level=info msg="error budget at 3%" shard=3',
        '{"ts": "2031-02-03T04:05:07Z", "level": "warning", "msg": "shard 3 slow, error rate 0.1"}',
        "2031-02-03 04:05:07 set log_level=error for the store client",
        "+ python serve.py --level=error --shards 8",
    ],
    ids=["logfmt-info", "json-warning", "a-setting", "an-option"],
)
def test_quiet_records_naming_errors_stay_clean(library: Library, record: str) -> None:
    assert run(library, f"step 1 loss 2.0\n{record}\n").status is Status.CLEAN


# --- the rank of a traceback whose announcement names it -----------------------------------------


def test_a_traceback_takes_the_rank_its_opening_record_names(library: Library) -> None:
    log = (
        "2031-02-03 04:05:06,007 | svc | CRITICAL | loop.py:12 | worker rank: 5 crashed.\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/loop.py", line 10, in run\n'
        "    step()\n"
        "StorageTimeoutError: object store gave no answer for shard-0007 within 30 s\n"
    )
    d = run(library, log)
    assert d.initiating is not None and "StorageTimeoutError" in d.initiating.text
    assert d.initiating.rank == 5


def test_a_traceback_after_a_line_naming_no_rank_has_none(library: Library) -> None:
    log = (
        "2031-02-03 04:05:06,007 | svc | CRITICAL | loop.py:12 | worker crashed.\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/loop.py", line 10, in run\n'
        "    step()\n"
        "StorageTimeoutError: object store gave no answer for shard-0007 within 30 s\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.rank is None


# --- what a run said before and after it said it finished ------------------------------------------


def test_warnings_after_the_run_said_it_finished_are_its_tear_down(library: Library) -> None:
    done = ':::MLLOG {"key": "run_stop", "value": 0.92, "metadata": {"lineno": 3, "status": "success"}}\n'
    warn = "[rank9]:[W1025 12:14:05.569 store.cpp:125] [c10d] recv failed on socket: Failed to recv\n"
    stack = "Exception raised from recvBytes at utils.hpp:682 (most recent call first):\nframe #0: f + 0x88\n"
    nccl = "gpu-b:3087588:3089801 [0] proxy.cc:1458 NCCL WARN [Service thread] Accept failed\n"
    assert run(library, "step 100/100 loss 2.1\n" + done + warn + stack + nccl).status is Status.CLEAN
    # the same lines with no word that it finished, or an error record after it, fail the run
    assert run(library, "step 100/100 loss 2.1\n" + warn + stack + nccl).status is not Status.CLEAN
    error = "[rank9]:[E1025 12:14:05.569 store.cpp:125] [c10d] recv failed on socket: Failed to recv\n"
    assert run(library, done + error + stack).status is not Status.CLEAN
    # a run that never finished: the run_stop says it failed
    failed = done.replace('"success"', '"aborted"')
    assert run(library, failed + warn + stack + nccl).status is not Status.CLEAN


def test_what_failed_before_the_run_said_it_finished_was_survived(library: Library) -> None:
    logged = (
        "[2026-01-15 03:54:38,114][metadata_callback][ERROR] - Failed to write metadata for best.ckpt\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/callbacks.py", line 193, in on_save\n'
        "    from ocr.utils.checkpoints import save_metadata\n"
        "ModuleNotFoundError: No module named 'ocr.utils.checkpoints'\n"
    )
    done = "INFO: `Trainer.fit` stopped: `max_epochs=1` reached.\n"
    bar = "Epoch 0/0  50/50 0:00:05 10.32it/s\n"
    assert run(library, bar + logged + bar + done + "Testing DataLoader 0: 100%\n").status is Status.CLEAN
    # the same failure again after the finish (the callback at the last checkpoint) is survived too
    again = logged.replace("best.ckpt", "last.ckpt").replace("193", "194")
    assert run(library, bar + logged + done + again + "Run tagged as completed.\n").status is Status.CLEAN
    # without the run's word that it finished, the failure stands; another failure after it does too
    assert run(library, bar + logged + bar).status is not Status.CLEAN
    other = "Traceback (most recent call last):\n  File \"t.py\", line 9, in <module>\nOSError: disk full\n"
    d = run(library, bar + logged + done + other)
    assert d.status is not Status.CLEAN and d.initiating and d.initiating.text == "OSError: disk full"


def test_a_warning_that_the_failing_record_below_it_quotes_stated_it_first(library: Library) -> None:
    warned = "W0925 18:05:47.2264 29387 op.cc:187] add raised thrust::err, parallel_for failed: bad config\n"
    fatal = "F0925 18:05:47.2265 29387 holder.h:37] std::exception caught, parallel_for failed: bad config\n"
    d = run(library, "step 3 loss 2.1\n" + warned + fatal)
    assert d.initiating is not None and d.initiating.line == 2
    # a warning about something else above the failing record states nothing
    other = "W0925 18:05:47.2264 29387 op.cc:187] slow kernel chosen for add, fused kernels off\n"
    d = run(library, "step 3 loss 2.1\n" + other + fatal)
    assert d.initiating is not None and d.initiating.line == 3
