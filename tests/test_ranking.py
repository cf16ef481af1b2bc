"""The rules that pick the initiating line (signatures/ranking.py), each on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import Source, Status, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    root = tmp_path_factory.mktemp("lib")
    return build_library(
        root,
        [
            signature_doc("kernel-fault"),
            signature_doc("disk-broke", category="storage", priority=5),
            signature_doc(
                "peer-timeout",
                role="downstream",
                fingerprints=[{"regex": r"\[Rank (?P<rank>\d+)\] peer-timeout happened"}],
            ),
            signature_doc(
                "launcher-wrap",
                role="wrapper",
                fingerprints=[{"regex": r"launcher-wrap happened: rank (?P<rank>\d+)"}],
            ),
            signature_doc("noisy-warning", role="benign"),
            signature_doc(
                "wrapped-raise",
                category="torch-compile",
                role="wrapper",
                fingerprints=[{"literal": "BackendCompilerFailed: backend='inductor' raised:"}],
            ),
            signature_doc(
                "inductor-bug",
                category="torch-compile",
                fingerprints=[{"literal": "LoweringException:"}],
                traceback_frames=[r"torch/_inductor/"],
            ),
        ],
    )


def run(library: Library, *texts: str, names: list[str] | None = None):
    names = names or [f"rank{i}.log" for i in range(len(texts))]
    return diagnose([Source.from_text(n, t) for n, t in zip(names, texts, strict=True)], library=library)


def test_initiating_beats_downstream_that_came_first(library: Library) -> None:
    log = "[Rank 3] peer-timeout happened\n[Rank 5] peer-timeout happened\n[rank12]: kernel-fault happened\n"
    d = run(library, log)
    assert d.signature and d.signature.id == "kernel-fault"
    assert d.initiating and d.initiating.line == 3 and d.initiating.rank == 12
    group = next(g for g in d.downstream if g.signature and g.signature.id == "peer-timeout")
    assert group.count == 2 and group.ranks == (3, 5)
    assert any("peer-timeout" in w and "downstream" in w for w in d.why)


def test_earliest_initiating_wins_in_file_order(library: Library) -> None:
    d = run(library, "ok\ndisk-broke happened\nkernel-fault happened\n")
    assert d.signature and d.signature.id == "disk-broke"


def test_timestamps_order_lines_across_files(library: Library) -> None:
    a = "[2026-01-01 10:00:05,000] kernel-fault happened\n"
    b = "[2026-01-01 10:00:01,000] disk-broke happened\n"
    d = run(library, a, b)
    assert d.signature and d.signature.id == "disk-broke"
    assert d.initiating and d.initiating.file == "rank1.log"


def test_file_order_decides_without_timestamps(library: Library) -> None:
    d = run(library, "kernel-fault happened\n", "disk-broke happened\n")
    assert d.signature and d.signature.id == "kernel-fault"


def test_rank_comes_from_the_file_name_when_lines_carry_none(library: Library) -> None:
    d = run(library, "fine\n", "kernel-fault happened\n", names=["node0_rank0.log", "node1_rank12.log"])
    assert d.initiating and d.initiating.rank == 12


def test_downstream_only_says_so_and_asks_for_other_ranks(library: Library) -> None:
    d = run(library, "world_size=4\n[Rank 0] peer-timeout happened\n[Rank 1] peer-timeout happened\n")
    assert d.status is Status.FAILURE and d.signature and d.signature.role == "downstream"
    assert d.confidence < 0.6
    assert any("Ranks 2, 3" in m for m in d.missing_facts)


def test_wrapper_names_the_rank_to_ask_for(library: Library) -> None:
    d = run(library, "launcher-wrap happened: rank 12\n")
    assert d.signature and d.signature.role == "wrapper"
    assert any("rank 12" in m for m in d.missing_facts)


def test_benign_only_is_clean_but_names_the_warning(library: Library) -> None:
    d = run(library, "step 1\nnoisy-warning happened\nstep 2\n")
    assert d.status is Status.CLEAN
    assert d.signature and d.signature.id == "noisy-warning"


def test_healthy_log_is_clean(library: Library) -> None:
    d = run(library, "".join(f"step {i} loss 0.{i}\n" for i in range(100)))
    assert d.status is Status.CLEAN and d.signature is None and d.initiating is None


def test_unknown_exception_is_unrecognized_with_its_line_not_the_header(library: Library) -> None:
    log = (
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        "    main()\nValueError: bad shape\n"
    )
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and d.signature is None
    assert d.initiating and d.initiating.line == 4 and d.initiating.text == "ValueError: bad shape"


def test_a_logged_header_states_the_failure_when_its_traceback_is_cut_before_the_end(
    library: Library,
) -> None:
    header = "2031-02-17 19:56:58.843 | ERROR    | pkg.launch:worker:147 - An error was caught in 'worker':\n"
    frames = 'Traceback (most recent call last):\n\nFile "/opt/pkg/run.py", line 197, in main\n    run(x)\n'
    d = run(library, header + frames)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 1
    # with its exception line, the traceback's end states it
    d = run(library, header + frames + "ValueError: bad shape\n")
    assert d.initiating and d.initiating.text == "ValueError: bad shape"


def test_code_echo_inside_a_traceback_is_never_the_cause(library: Library) -> None:
    log = (
        'Traceback (most recent call last):\n  File "x.py", line 9, in f\n'
        '    raise RuntimeError("kernel-fault happened")\nValueError: the real one\n'
    )
    d = run(library, log)
    assert d.initiating and d.initiating.text == "ValueError: the real one"


def test_advice_lines_are_never_the_cause(library: Library) -> None:
    log = "For debugging consider passing CUDA_LAUNCH_BLOCKING=1 kernel-fault happened\n"
    d = run(library, log)
    assert d.status is Status.CLEAN


def test_wrapper_points_at_inner_cause_and_assert_echo(library: Library) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/site/torch/_inductor/lowering.py", line 12, in bmm\n'
        "    assert isinstance(x, Buffer), x\n"
        "BackendCompilerFailed: backend='inductor' raised:\n"
        "AssertionError: \n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == "inductor-bug"  # named by its frames
    assert d.initiating and d.initiating.line == 3 and "assert isinstance" in d.initiating.text


def test_frames_name_an_exception_only_where_it_was_raised(library: Library) -> None:
    # The compiler's frame only passed the call through (its wrapper around user code): the
    # exception was raised in another installed package, so the compiler's rule does not name it.
    through = (
        "Traceback (most recent call last):\n"
        '  File "/env/lib/python3.12/site-packages/torch/_inductor/wrap.py", line 40, in _fn\n'
        "    return fn(*args)\n"
        '  File "/home/me/train.py", line 9, in step\n'
        "    gather(t)\n"
        '  File "/env/lib/python3.12/site-packages/torch/distributed/c10d.py", line 80, in gather\n'
        "    work = group.gather(t)\n"
        "RuntimeError: peers 2, 5 never reached the gather\n"
    )
    d = run(library, through)
    assert d.signature is None and d.initiating and d.initiating.line == 8
    # raised in user code that the compiler's frame called: the compiler's frame is the nearest
    # installed package, so the rule holds (as before)
    inside = (
        "Traceback (most recent call last):\n"
        '  File "/env/lib/python3.12/dist-packages/torch/_inductor/graph.py", line 40, in run\n'
        "    return self.lower(node)\n"
        '  File "/home/me/custom_op.py", line 9, in lower\n'
        "    raise ValueError(node)\n"
        "ValueError: cannot lower node 7\n"
    )
    d = run(library, inside)
    assert d.signature and d.signature.id == "inductor-bug"


@pytest.mark.parametrize(
    ("ending", "expected"),
    [("[Rank 2] peer-timeout happened", "peer-timeout"), ("kernel-fault happened", "kernel-fault")],
)
def test_a_statement_introducing_a_known_exceptions_traceback_gives_way_to_it(
    library: Library, ending: str, expected: str
) -> None:
    log = (
        "2026-01-02 10:00:00,100 ERROR sweep.py:80 -- job 7 of the sweep failed\n"
        'Traceback (most recent call last):\n  File "/srv/sweep.py", line 80, in run\n'
        "    result = wait(job)\n"
        f"RuntimeError: {ending}\n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == expected
    assert d.initiating and d.initiating.line == 5


def test_unknown_error_after_a_downstream_symptom_loses_to_it(library: Library) -> None:
    log = (
        "[Rank 1] peer-timeout happened\n"
        'Traceback (most recent call last):\n  File "launch.py", line 3, in main\n'
        "subprocess.CalledProcessError: Command died\n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == "peer-timeout"


def test_one_line_many_signatures_takes_the_best_role(library: Library, tmp_path: Path) -> None:
    lib = build_library(
        tmp_path,
        [
            signature_doc("exit-nine", fingerprints=[{"literal": "failed (exitcode: -9)"}]),
            signature_doc(
                "child-failed", role="wrapper", fingerprints=[{"regex": r"failed \(exitcode: -?[0-9]+\)"}]
            ),
        ],
    )
    d = run(lib, "ERROR: failed (exitcode: -9) local_rank: 0\n")
    assert d.signature and d.signature.id == "exit-nine"


def test_priority_breaks_ties_on_one_line(tmp_path: Path) -> None:
    lib = build_library(
        tmp_path,
        [
            signature_doc("general-oom", fingerprints=[{"literal": "out of memory"}]),
            signature_doc("specific-oom", priority=10, fingerprints=[{"literal": "CUDA out of memory"}]),
        ],
    )
    d = run(lib, "RuntimeError: CUDA out of memory\n")
    assert d.signature and d.signature.id == "specific-oom"


def test_launcher_named_rank_is_asked_for_when_only_timeouts_are_given(library: Library) -> None:
    log = "[Rank 0] peer-timeout happened\n[Rank 1] peer-timeout happened\nlauncher-wrap happened: rank 12\n"
    d = run(library, log)
    assert d.signature and d.signature.id == "peer-timeout"
    assert d.missing_facts[0].startswith("The launcher says rank 12 failed first")


def test_an_exception_that_was_retried_is_not_a_failure(library: Library) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "hub.py", line 10, in get\n'
        "ConnectionResetError: [Errno 104] Connection reset by peer\n"
        "Retrying in 2 seconds (attempt 1 of 5)\n"
        "step 100 loss 0.3\n"
    )
    d = run(library, log)
    assert d.status is Status.CLEAN and d.initiating is None


def test_exception_ignored_at_shutdown_is_not_a_failure(library: Library) -> None:
    log = (
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f>\n"
        "Traceback (most recent call last):\n"
        '  File "dataloader.py", line 1479, in __del__\n'
        "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_shutdown'\n"
    )
    assert run(library, log).status is Status.CLEAN


def test_the_same_exception_without_recovery_is_unrecognized(library: Library) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "hub.py", line 10, in get\n'
        "ConnectionResetError: [Errno 104] Connection reset by peer\n"
    )
    assert run(library, log).status is Status.UNRECOGNIZED


def test_find_all_reports_a_line_once_per_signature(tmp_path: Path) -> None:
    from signatures.engine import find_all

    lib = build_library(
        tmp_path, [signature_doc("oom", fingerprints=[{"literal": "out of memory"}, {"literal": "CUDA out"}])]
    )
    found = find_all([Source.from_text("x.log", "RuntimeError: CUDA out of memory\n")], lib)
    assert [(f.signature_id, f.line) for f in found] == [("oom", 1)]


def test_within_a_file_a_clearly_earlier_timestamp_wins_over_line_order(library: Library) -> None:
    log = (
        "[2026-01-01 10:10:00,000] [rank3]: disk-broke happened\n"
        "[2026-01-01 10:00:00,000] [rank5]: kernel-fault happened\n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == "kernel-fault"


def test_within_a_file_near_simultaneous_lines_keep_file_order(library: Library) -> None:
    log = (
        "[2026-01-01 10:00:01,500] [rank3]: disk-broke happened\n"
        "[2026-01-01 10:00:00,700] [rank5]: kernel-fault happened\n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == "disk-broke"


def test_an_untagged_line_takes_no_rank_from_the_lines_above_alone(library: Library) -> None:
    log = "[rank0]: step 1 loss 2.0\n[rank0]: step 2 loss 1.9\nkernel-fault happened\nall done\n"
    d = run(library, log, names=["job.log"])
    assert d.initiating and d.initiating.rank is None


def test_an_error_logged_as_a_warning_and_worked_around_is_not_a_failure(library: Library) -> None:
    head = "W1210 08:01:33.059000 3495860 torch/_higher_order_ops/triton_kernel_wrap.py:987] [0/0] "
    log = (
        f"{head}kernel-fault happened\n"
        f"{head}IndexError('Function argument index out of range')\n"
        f"{head}Encountered an exception in identify_mutated_tensors, assuming every input is mutated\n"
    )
    d = run(library, log)
    assert d.status is Status.CLEAN and d.signature and d.signature.id == "kernel-fault"


def test_the_same_error_at_error_level_is_a_failure(library: Library) -> None:
    head = "E1210 08:01:33.059000 3495860 torch/_higher_order_ops/triton_kernel_wrap.py:987] [0/0] "
    log = f"{head}kernel-fault happened\n{head}assuming every input is mutated\n"
    assert run(library, log).status is Status.FAILURE


def test_a_known_failure_logged_at_info_level_is_not_the_failure(library: Library) -> None:
    log = "INFO:2026-01-05 05:12:08,452:jax.bridge:925: disk-broke happened\nValueError: stats missing\n"
    d = run(library, log)
    assert d.initiating and d.initiating.line == 2 and d.status is Status.UNRECOGNIZED
    reported = "INFO:tf:Error reported to Coordinator: <class 'InvalidArgumentError'>, disk-broke happened\n"
    assert run(library, reported).signature is not None  # an exception reported at INFO still counts


def test_a_known_failure_logged_as_a_warning_and_carried_on_from_was_survived(library: Library) -> None:
    ordinary = "".join(f"(Worker pid=7) loading shard {i}\n" for i in range(6))
    log = f"(Worker pid=7) Warning: disk-broke happened\n{ordinary}ValueError: stats missing\n"
    d = run(library, log)
    assert d.initiating and d.initiating.line == 8
    stopped = "(Worker pid=7) Warning: disk-broke happened\nValueError: stats missing\n"
    assert run(library, stopped).initiating.line == 1  # type: ignore[union-attr]


def test_a_warning_the_warnings_module_printed_and_returned_from_was_survived(library: Library) -> None:
    warning = "/usr/lib/python3.5/importlib/_bootstrap.py:222: RuntimeWarning: disk-broke happened\n"
    went_on = "  return f(*args, **kwds)\nUsing numpy backend\nINFO:root:start\n"
    d = run(library, warning + went_on + "ValueError: stats missing\n")
    assert d.initiating and d.initiating.line == 5 and d.status is Status.UNRECOGNIZED
    # the same words logged as an error record: no warning, it states the failure
    logged = warning.replace("RuntimeWarning: ", "")
    assert run(library, logged + went_on + "ValueError: stats missing\n").initiating.line == 1  # type: ignore[union-attr]
    # a warning the process printed last, then died: nothing after it shows it went on
    assert run(library, warning + "ValueError: stats missing\n").initiating.line == 1  # type: ignore[union-attr]
    # nothing fails later: the warning is all the log says
    assert run(library, warning + went_on).initiating.line == 1  # type: ignore[union-attr]
    # what fails later says the warning's words again: the warning stated it first
    repeated = "RuntimeError: Unexpected error: disk-broke happened\n"
    warning = warning.replace("happened", "happened on the shard index")
    repeated = repeated.replace("happened", "happened on the shard index")
    assert run(library, warning + went_on + repeated).initiating.line == 1  # type: ignore[union-attr]


def test_an_nccl_warning_the_process_went_on_from_is_not_the_failure(library: Library) -> None:
    warn = "hostq:311:311 [2] ibwrap.cc:90 NCCL WARN kernel-fault happened\n"
    went_on = "hostq:311:311 [2] NCCL INFO NET/Socket : Using [0]eth0\n"
    d = run(library, warn + "hostq:311:311 [2] net_ib.cc:12 NCCL WARN NET/IB : no device\n" + went_on)
    assert d.status is Status.CLEAN
    unwound = "hostq:311:311 [2] NCCL INFO transport.cc:44 -> 2\n"
    assert run(library, warn + unwound).status is Status.FAILURE
    other = "hostq:999:999 [3] NCCL INFO NET/Socket : Using [0]eth0\n"
    assert run(library, warn + other).status is Status.FAILURE  # another process went on


def test_a_cpp_stack_under_an_info_record_is_part_of_it(library: Library) -> None:
    stack = "Exception raised from kernel-fault happened at c.cpp:43 (most recent call first):\nframe #0: f\n"
    info = "[I628 20:15:42.000370615 ProcessGroupNCCL.cpp:1501] watchdog stops at exit: CUDA error\nmore\n\n"
    assert run(library, info + stack).status is Status.CLEAN
    error = info.replace("[I628", "[E628")
    assert run(library, error + stack).status is Status.FAILURE


def test_a_cause_stated_in_the_errors_own_detail_is_the_initiating_line(library: Library) -> None:
    chained = "RuntimeError: kernel-fault happened in comm.cc:12\nlibxInternal: check failed.\nLast error:\n"
    d = run(library, chained + "Socket to peer 7 dropped during handshake\n")
    assert d.initiating and d.initiating.line == 4 and d.signature and d.signature.id == "kernel-fault"
    known = run(library, "RuntimeError: kernel-fault happened\nCaused by:\ndisk-broke happened on /data\n")
    assert known.initiating and known.initiating.line == 3
    assert known.signature and known.signature.id == "disk-broke"
    other = run(library, "RuntimeError: kernel-fault happened\nwandb:\nwandb: synced 3 files\n")
    assert other.initiating and other.initiating.line == 1  # a program's own prefix introduces no cause
    # an empty detail, then the same error again: another process's report, interleaved
    twice = "RuntimeError: kernel-fault happened in comm.cc:12\nlibxInternal: check failed.\nLast error:\n"
    again = run(library, twice + "kernel-fault happened in comm.cc:12\nlibxInternal: check failed.\n")
    assert again.initiating and again.initiating.line == 1


def test_records_that_announce_a_report_yield_to_its_stated_detail(library: Library) -> None:
    head = "[rank5]:[E207 19:37:09.{} comm.cpp:681] [Rank 5] peer-timeout happened\n"
    report = (
        "libxRemoteError: [Rank 5] peer-timeout happened, the remote closed\nLast error:\n"
        "Socket to 10.0.0.7 dropped: Broken pipe\n"
    )
    d = run(library, head.format("983540") + head.format("983555") + report)
    assert d.initiating and d.initiating.line == 5 and d.initiating.rank == 5  # the detail, and whose it is
    earlier = run(library, head.format("500000") + head.format("983555") + report)
    assert earlier.initiating and earlier.initiating.line == 1  # printed before: not this report's head
    other = run(library, head.format("983540").replace("5", "3") + report)
    assert other.initiating and other.initiating.line == 1  # another rank's record is no head of it


def test_a_launchers_report_that_another_process_died_first_is_no_consequence(library: Library) -> None:
    rule = "-" * 60
    box = (
        f"{rule}\nmpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[9,1],{}]\n  Exit code:    1\n" + rule + "\n"
    )
    d = run(library, "[Rank 1] peer-timeout happened\n" + box.format(0))
    assert d.initiating and d.initiating.line == 3 and d.initiating.rank == 0
    same = run(library, "[Rank 1] peer-timeout happened\n" + box.format(1))
    assert same.initiating and same.initiating.line == 1  # the same process: its death followed it
