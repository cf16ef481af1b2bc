"""Which line of a several-line report states it (signatures/reports.py), on made-up reports."""

from __future__ import annotations

import pytest

from signatures import Source, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    # a library that knows none of these lines: the rules must hold on shape alone
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc("kernel-fault"),
            signature_doc(
                "abort-reported", fingerprints=[{"regex": r"worker \d+ exited on signal 6 \(Aborted\)"}]
            ),
            signature_doc("exit-reported", fingerprints=[{"regex": r"worker \d+ failed \(exitcode: -\d+\)"}]),
            signature_doc(
                "agent-rereport", role="wrapper", fingerprints=[{"literal": "agent: the job failed"}]
            ),
            signature_doc(
                "peer-stalled", role="downstream", fingerprints=[{"regex": r"peer-stalled at step \d+"}]
            ),
        ],
    )


def first(library: Library, text: str):
    d = diagnose([Source.from_text("job.log", text)], library=library)
    assert d.initiating is not None
    return d.initiating


@pytest.mark.parametrize(
    "prefix",
    ["[gpu3:771] ", "rank5 | [node-b:42] ", ""],
    ids=["host-pid", "launcher-and-host-pid", "bare"],
)
def test_a_signal_banner_gives_way_to_the_field_that_names_the_signal(library: Library, prefix: str) -> None:
    log = (
        "loading shards\n"
        f"{prefix}*** Caught SIGSEGV in worker ***\n"
        f"{prefix}Signal: Segmentation fault (11)\n"
        f"{prefix}Fault address: 0x18\n"
        f"{prefix}[ 0] /usr/lib/libc.so.6(+0x42520)[0x7f0c]\n"
        f"{prefix}*** End of report ***\n"
    )
    place = first(library, log)
    assert place.line == 3 and "Signal: Segmentation fault (11)" in place.text


def test_a_banner_with_no_failure_field_below_it_states_the_failure_itself(library: Library) -> None:
    log = (
        "step 40 loss 1.2\n"
        "*** SIGBUS received by PID 812 (TID 813); stack trace: ***\n"
        "PC: @ 0x7f00aa (unknown) memcpy\n"
        "    @ 0x7f00bb (unknown) load_batch\n"
    )
    place = first(library, log)
    assert place.line == 2


def test_a_field_of_another_process_is_not_the_banners(library: Library) -> None:
    log = "[n1:10] *** Caught SIGSEGV in worker ***\n[n2:77] Signal: Segmentation fault (11)\n"
    assert first(library, log).line == 1  # n2's line is its own report, and later


def test_the_banner_still_beats_later_failures_of_other_processes(library: Library) -> None:
    log = (
        "[a:1] *** Caught SIGSEGV in worker ***\n"
        "[a:1] Signal: Segmentation fault (11)\n"
        "[a:1] *** End of report ***\n"
        "launcher: process 1 exited on signal 11 (Segmentation fault)\n"
    )
    assert first(library, log).line == 2


@pytest.mark.parametrize(
    "head",
    [
        "ERROR:trainer.worker:",
        "E0102 10:00:00.123 99 worker.py:88] ",
        "(Actor_3 pid=51) ERROR 01-02 10:00:00 [w.py:7] ",
    ],
    ids=["logging", "glog", "actor-record"],
)
def test_a_traceback_logged_one_record_per_line_is_stated_by_its_exception(
    library: Library, head: str
) -> None:
    log = (
        f"{head}Traceback (most recent call last):\n"
        f'{head}  File "/opt/app/step.py", line 31, in step\n'
        f"{head}    batch = self.lookup(key)\n"
        f"{head}            ^^^^^^^^^^^^^^^^\n"
        f"{head}KeyError: 'shard-17'\n"
    )
    place = first(library, log)
    assert place.line == 5 and "KeyError: 'shard-17'" in place.text


def test_a_paste_that_starts_inside_a_logged_traceback_skips_its_code_line(library: Library) -> None:
    head = "ERROR:trainer.worker:"
    log = f"{head}    raise KeyError(\n{head}KeyError: 'shard-17'\n{head}worker 2 failed to start.\n"
    assert first(library, log).line == 2


def test_an_indented_error_record_outside_a_traceback_still_states_a_failure(library: Library) -> None:
    log = "ERROR:trainer.worker:    disk quota exceeded on /scratch\nstep 1 loss 2.0\n"
    assert first(library, log).line == 1


def test_a_carrier_gives_way_to_the_carried_exceptions_own_line(library: Library) -> None:
    log = (
        'Traceback (most recent call last):\n  File "/srv/driver.py", line 4, in main\n'
        "    results = gather(futures)\n"
        "rpc.RemoteCallError(PermissionError): Saver.write() on worker 2\n"
        '  File "/srv/saver.py", line 30, in write\n'
        "    open(path, 'wb')\n"
        "PermissionError: [Errno 13] Permission denied: '/ckpt/step_900'\n"
    )
    place = first(library, log)
    assert place.line == 7 and "Permission denied" in place.text


def test_an_exception_is_stated_by_its_first_coded_record_that_says_something(library: Library) -> None:
    log = (
        "RuntimeError: [ERROR] XCCL error in: xccl/ProcessGroupX.cpp:88\n"
        "[ERROR] 2026-01-02-10:00:00 (PID:77, Device:3) ERR01100 call xccl api failed.\n"
        "EK0042: Inner Error!\n"
        "EK0042: [PID: 77] 2026-01-02-10:00:00.123 device 3 is held by another process (pid 12)\n"
        "        TraceBack (most recent call last):\n"
    )
    place = first(library, log)
    assert place.line == 4 and "held by another process" in place.text


def test_an_exception_with_only_a_coded_heading_below_it_keeps_its_line(library: Library) -> None:
    log = "RuntimeError: XCCL error in: xccl/ProcessGroupX.cpp:88\nEK0042: Inner Error!\n\nstep 3\n"
    assert first(library, log).line == 1


@pytest.mark.parametrize(("hint_file", "expected"), [("Comm.cpp", 2), ("Loader.cpp", 1)])
def test_an_unknown_record_of_the_same_instant_and_source_joins_the_known_report(
    library: Library, hint_file: str, expected: int
) -> None:
    log = (
        f"[rank1]:[E0102 10:00:00.123400 11 {hint_file}:70] hint: tracing is off, set TRACE=1 for stacks\n"
        "[rank5]:[E0102 10:00:00.123100 15 Comm.cpp:90] peer-stalled at step 7\n"
        "[rank3]:[E0102 10:00:00.123500 13 Comm.cpp:90] peer-stalled at step 7\n"
    )
    # from the same file in the same instant the hint is part of the watchdog's report; from
    # another file it is a failure of its own, and it leads
    assert first(library, log).line == expected


def test_an_abort_is_explained_by_the_error_its_process_printed_before_it(library: Library) -> None:
    log = (
        "step 10 loss 2.1\n"
        "terminate called after throwing an instance of 'zz::QueueClosed'\n"
        "  what():  queue was closed while a batch was pending\n"
        "supervisor: worker 3 exited on signal 6 (Aborted)\n"
    )
    d = diagnose([Source.from_text("job.log", log)], library=library)
    assert d.signature is None and d.initiating and d.initiating.line in (2, 3)
    # with nothing printed before it, the abort's report is the statement
    alone = "step 10 loss 2.1\nsupervisor: worker 3 exited on signal 6 (Aborted)\n"
    assert first(library, alone).line == 2
    # a wrapper's re-report above it explains nothing
    wrapped = "agent: the job failed\nsupervisor: worker 3 exited on signal 6 (Aborted)\n"
    assert first(library, wrapped).line == 2


def test_a_launchers_exit_code_below_the_process_own_crash_report_gives_way_to_it(library: Library) -> None:
    crash = "Fatal Python error: Segmentation fault\n\nThread 0x01 (most recent call first):\n"
    crash += '  File "/t.py", line 4 in f\n'
    exit_line = "supervisor: worker 3 failed (exitcode: -11)\n"
    assert first(library, "step 10 loss 2.1\n" + crash + exit_line).line == 2
    assert first(library, "step 10 loss 2.1\n" + exit_line).line == 2  # alone, the exit code states it
    # a failure table's own field naming the signal is the launcher's, not the process's report
    field = "  traceback : Signal 11 (SIGSEGV) received by PID 7\n"
    assert first(library, "step 10 loss 2.1\n" + field + exit_line).line == 3


def test_a_handled_exception_that_the_next_one_quotes_states_the_failure(library: Library) -> None:
    def log(second: str) -> str:
        return (
            'Traceback (most recent call last):\n  File "/srv/plugin.py", line 8, in open_device\n'
            "    return lib.open(0)\n"
            "plugin.DeviceError: NOT_FOUND: no accelerator is attached\n"
            "\nDuring handling of the above exception, another exception occurred:\n\n"
            'Traceback (most recent call last):\n  File "/srv/main.py", line 3, in <module>\n'
            "    devices()\n"
            f"{second}\n"
        )

    quoted = "RuntimeError: backend 'accel' unavailable: NOT_FOUND: no accelerator is attached"
    assert first(library, log(quoted)).line == 4  # re-raised in other words: the first states it
    unrelated = "KeyError: 'cache_dir' missing from the config"
    assert first(library, log(unrelated)).line == 11  # a new failure while handling the first


def test_a_known_report_of_an_nccl_code_is_stated_by_the_warn_whose_code_unwinds_to_it(
    library: Library,
) -> None:
    warn = "[1,3]<stdout>:gpu-b:75:95 [3] graph/xml.h:101 NCCL WARN Attribute arch of node cpu not found\n"
    head = "[1,3]<stdout>:gpu-b:75:95 [3] NCCL INFO"
    unwind = "".join(f"{head} graph/topo.cc:{n} -> 3\n" for n in (493, 623, 773))
    report = "[1,3]<stdout>: kernel-fault happened in common.cu:961 'internal error'\n"
    found = first(library, "launching\n" + warn + unwind + report)
    assert found.line == 2 and found.text == warn.rstrip("\n")
    # something else between the unwinding and the report: the report stands
    other = "[1,3]<stdout>:gpu-b:75:95 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via NET/IB/0\n"
    assert first(library, "launching\n" + warn + unwind + other + report).line == 7
    # another process's report under this one's unwinding: it stands too
    elsewhere = report.replace("[1,3]", "[1,4]")
    assert first(library, "launching\n" + warn + unwind + elsewhere).line == 6


def test_the_warn_an_unwinding_started_from_states_the_exception_of_the_traceback_below_it(
    library: Library,
) -> None:
    warn = "gpu-b:75:95 [0] include/socket.h:361 NCCL WARN Call to connect failed : Connection timed out\n"
    unwind = "".join(f"gpu-b:75:95 [0] NCCL INFO init.cu:{n} -> 2\n" for n in (290, 490, 557))
    frames = "".join(f'  File "/srv/session.py", line {n}, in call\n    return fn()\n' for n in range(1, 9))
    raised = "UnknownError: kernel-fault happened: ncclCommInitRank failed: unhandled system error\n"
    tb = "Traceback (most recent call last):\n" + frames + raised
    found = first(library, "launching\n" + warn + unwind + tb)
    assert found.line == 2 and found.text == warn.rstrip("\n")
    # the traceback opens below ordinary output: nothing ties the WARN to it
    plain = "launching\n" + warn + unwind + "session ready\n" + tb
    assert first(library, plain).text == raised.rstrip("\n")


def test_a_line_that_goes_on_into_a_count_of_root_errors_is_stated_by_the_first(
    library: Library,
) -> None:
    head = "E1001 16:19:34.235139 1398 loop.py:75] Error recorded from the loop: From /job:worker/task:0:\n"
    roots = "2 root error(s) found.\n  (0) Failed precondition: The card is not set up.\n"
    roots += "  (1) Failed precondition: The card is not set up.\n0 successful operations.\n"
    found = first(library, "step 7\n" + head + roots)
    assert found.line == 4 and "(0) Failed precondition" in found.text
    # no count of root errors: the record states it
    alone = "  (0) Failed precondition: The card is not set up.\n"
    assert first(library, "step 7\n" + head + alone).line == 2
