"""Rank forms learned from batch 8, each a mechanism rather than a launcher's wording: a tag behind
a glued timestamp, a launcher's verdict naming one failed process, a speaker's bracketed label
(signatures/lines.py, rankwords.py, processtags.py, attribution.py). The lines are made up, in
other shapes than the corpus's, with the negatives beside the positives."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.introduced import introduced_rank
from signatures.kernelasserts import is_kernel_assert, reporting_rank
from signatures.library import Library
from signatures.lines import time_key, unwrap
from signatures.processtags import learn
from tests.sigfactory import build_library, signature_doc

BOOM = "RuntimeError: kernel-fault happened"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.out", text)], library=library)


def rank_of(library: Library, text: str) -> int | None:
    d = run(library, text)
    assert d.initiating is not None
    return d.initiating.rank


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (f"Thu Mar  7 09:01:02 2024[1,5]<stdout>:{BOOM}", 5),  # glued, one-digit day padded
        (f"Fri Nov 15 23:59:59 2019 [1,12]<stderr>: {BOOM}", 12),  # spaced
        (f"Thu Mar  7 09:01:02 2024 [rank6]: {BOOM}", 6),
        (f"2024-03-07T09:01:02.125[1,5]<stderr>:{BOOM}", 5),  # an ISO time glued to the tag
        (f"Thu Mar  7 09:01:02 2024 {BOOM}", None),  # a time is no tag
        (f"{BOOM} at Thu Mar  7 09:01:02 2024[1,5]", None),  # inside the message: not a head
    ],
)
def test_a_tag_behind_a_ctime_timestamp_is_read(library: Library, line: str, rank: int | None) -> None:
    assert unwrap(line).rank == rank
    assert rank_of(library, line + "\n") == rank


def test_a_ctime_timestamp_orders_lines_and_hides_no_tag_from_learning() -> None:
    early, late = unwrap("Thu Mar  7 09:01:02 2024 x"), unwrap("Thu Mar  7 09:01:09 2024 x")
    assert time_key(early.time) < time_key(late.time)  # type: ignore[operator]
    model = learn(f"Sat Jun  1 10:00:0{v} 2024[{v}]<stderr>: step" for v in range(4))
    assert model.read("Sat Jun  1 10:00:09 2024[3]<stderr>: boom").rank == 3


@pytest.mark.parametrize(
    ("message", "rank"),
    [
        ("FATAL: of 8 workers, the worker process with rank=[6] was aborted.", 6),
        ("launcher: the trainer with rank 6 exited with code 1", 6),
        ("error: job stopped: task with rank: [6] died", 6),
        ("the process with rank 6 failed", 6),
        ("launcher: waiting for the worker process with rank 6", None),  # a peer it waits for
        ("launcher: killing the trainer process with rank 6", None),  # what the launcher does to it
        ("launcher: sent SIGTERM to the process with rank 6", None),
        ("launcher: lost the connection with rank 6", None),  # a preposition, no process named
        ("launcher: processes with ranks=[2, 6] were aborted", None),  # a list names no one
        ("launcher: the worker with rank=[2, 6] was aborted", None),
        # a rank named as a peer stays one when the message names it again
        ("RuntimeError: mismatch between rank0 and rank6: rank0: [1, 2] rank6: [1, 3]", None),
        ("RuntimeError: rank3: my buffer differs", 3),
    ],
)
def test_a_launchers_verdict_naming_one_failed_process_gives_its_rank(message: str, rank: int | None) -> None:
    assert unwrap(message).rank == rank


@pytest.mark.parametrize(
    ("message", "rank"),
    [
        ("ValueError: [5]: buffer 3 of this replica differs from replica 0", 5),
        ("[5]: Stopping the comms loop", 5),
        ("step failed. [5]: retry budget exhausted", 5),
        ("  [1]:", None),  # a list entry (a failure table's)
        ("[5]: 0.25 0.50 0.75", None),  # a row of numbers
        ("tensor[5]: nan found", None),  # an index of something named
        ("[ 5] /usr/lib/libc.so.6(+0x1234)", None),  # a frame of a C stack
    ],
)
def test_a_bracketed_label_opening_a_message_names_its_speaker(message: str, rank: int | None) -> None:
    assert unwrap(message).rank == rank


@pytest.mark.parametrize(
    ("head", "verdict", "rank"),
    [
        ("[gpu-a:48213]", "process rank 5 with PID 48213 on node gpu-a exited on signal 6", 5),
        ("[gpu-a:4242]", "process rank 5 with PID 4242 on node gpu-a exited on signal 6", 5),  # 4 digits
        ("[gpu-a:4242:4250]", "launcher: rank 5 (pid=4242) on node gpu-a died", 5),
        ("[gpu-a:4242]", "process rank 5 with PID 4242 on node gpu-b exited on signal 6", None),  # other host
        ("[gpu-a:4242]", "process rank 5 with PID 4243 on node gpu-a exited on signal 6", None),  # other pid
        ("[gpu-a:4242]", "rank 5 on node gpu-a: killing worker with PID 4242", None),  # a pid it acts on
    ],
)
def test_a_pid_in_a_head_is_the_rank_a_launcher_binds_to_it(
    library: Library, head: str, verdict: str, rank: int | None
) -> None:
    log = f"{head} {BOOM}\n{head} *** End of error message ***\n{verdict}\n"
    assert rank_of(library, log) == rank


def test_a_pid_in_a_head_is_never_a_local_rank(library: Library) -> None:
    log = f"nnodes=1\n[gpu-a:4242] {BOOM}\n[gpu-a:4242] *** End of error message ***\n"
    assert rank_of(library, log) is None  # one node, but 4242 is a pid, not local rank 4242
    assert unwrap("[gpu-a:3] x").local_rank == 3  # torchrun's host role and local rank


def engine(name: str, pid: int, message: str = "loading weights") -> str:
    return f"(Engine_{name} pid={pid}) INFO 01-02 03:04:05 [loader.py:12] {message}\n"


@pytest.mark.parametrize(
    ("names", "rank"),
    [
        (["TP0_EP0", "TP1_EP1", "TP2_EP2"], 2),  # tensor (and expert) parallel only: TP is the rank
        (["TP0", "TP1", "TP2"], 2),
        (["DP0_TP0", "DP0_TP1", "DP1_TP2"], None),  # data parallel beside it: TP is within a group
        (["PP0_TP0", "PP1_TP1", "PP1_TP2"], None),
    ],
)
def test_a_tensor_parallel_index_is_the_rank_only_when_no_other_group_shows(
    library: Library, names: list[str], rank: int | None
) -> None:
    log = "".join(engine(n, 700 + i) for i, n in enumerate(names)) + engine(names[-1], 702, BOOM)
    d = run(library, log)
    assert d.initiating is not None and d.initiating.rank == rank
    if rank is not None:  # an inference, and the answer says what it rests on
        assert any("tensor-parallel" in w for w in d.why)


def test_two_engines_tensor_parallel_indices_name_no_rank(library: Library) -> None:
    # The same TP index in two processes (two engines, each TP0..1): neither is a global rank.
    log = "".join(engine(f"TP{v}", 700 + v) + engine(f"TP{v}", 800 + v) for v in range(2))
    assert rank_of(library, log + engine("TP1", 801, BOOM)) is None


@pytest.mark.parametrize(
    ("head", "rank"),
    [
        ("[2024-03-01 10:00:00 TP3] ", 3),  # a server's scheduler named by its TP index
        ("[2024-03-01 10:00:00 DP1 TP3] ", None),
        ("[2024-03-01 10:00:00 TPU3] ", None),  # a device, not a group
        ("[2024-03-01 10:00:00 STEP3] ", None),
    ],
)
def test_a_tensor_parallel_index_in_a_bracketed_head(library: Library, head: str, rank: int | None) -> None:
    log = "".join(f"{head.replace('3', str(v))}step done\n" for v in range(3))
    assert rank_of(library, log + f"{head}{BOOM}\n") == rank


@pytest.mark.parametrize(
    ("fields", "rank"),
    [
        (["Exit status: 3", "Process name: 4"], 4),
        (["Host: gpu-a", "Rank: 4", "Signal: 9"], 4),
        (["Rank: 2", "Rank: 4"], None),  # a list of processes names no one
        (["Waiting for rank: 4"], None),  # a peer
        (["Local rank: 4"], None),  # a local rank
        (["Exit status: 3"], None),  # no process named
    ],
)
def test_the_fields_a_report_introduces_name_its_rank(
    library: Library, fields: list[str], rank: int | None
) -> None:
    head = "pod-7 | 12:00:01 | "
    log = f"{head}{BOOM}; the first process to fail was:\n" + "".join(f"{head}{f}\n" for f in fields)
    assert rank_of(library, log) == rank


def test_a_field_of_a_report_and_its_siblings_share_the_rank() -> None:
    head = "<>   [12:00:01] c0ffee || "
    opener, siblings = f"{head}Job failed; the first process to exit was:", [f"{head}Exit code: 1"]
    assert introduced_rank(siblings[0], [opener], [f"{head}Process name: 4"]) == 4
    assert introduced_rank(siblings[0], [f"{head}Job failed."], [f"{head}Process name: 4"]) is None
    other = "<>   [12:00:01] beef00 || Process name: 4"  # another container's line
    assert introduced_rank(f"{head}Job failed; the first was:", [], [other]) is None
    blank_first = ["", "Process name: 4"]  # a blank line ends the report
    assert introduced_rank("Job failed; the first was:", [], blank_first) is None


def kernel_asserts(n: int) -> str:
    src = "/src/ops/Gather.cu:71: gather_kernel: block: [9,0,0], thread: "
    return "".join(f"{src}[{t},0,0] Assertion `idx < size` failed.\n" for t in range(n))


def report(rank: int) -> str:
    return f"[E12 watchdog.cpp:40] [Rank {rank}] comm worker died: CUDA error: device-side assert triggered\n"


@pytest.mark.parametrize(
    ("log", "rank"),
    [
        (kernel_asserts(40) + report(3), 3),  # past the lines a hit keeps around it
        (kernel_asserts(3) + report(3) + report(3), 3),
        (kernel_asserts(3) + report(3) + report(5), None),  # two processes report one: unknown
        (kernel_asserts(3) + report(3).replace("[Rank 3] ", ""), None),  # the report names no rank
    ],
)
def test_a_kernels_assertion_is_the_rank_that_reports_the_device_side_assert(
    library: Library, log: str, rank: int | None
) -> None:
    d = run(library, log)
    assert d.initiating is not None and "Assertion" in d.initiating.text
    assert d.initiating.rank == rank


def test_a_host_assertion_is_not_a_kernels_and_a_report_above_is_none_of_its() -> None:
    assert reporting_rank([(10, 3)], 20) is None  # a report above says nothing of the lines below
    assert reporting_rank([(30, 3)], 20) == 3
    assert is_kernel_assert(kernel_asserts(1))
    assert not is_kernel_assert("python: src/alloc.c:88: grow: Assertion `n > 0' failed.")


def record(level: str, second: str, source: str, message: str) -> str:
    return f"2023-04-05 06:07:{second}: {level} lib/comm/{source}:77] {message}\n"


@pytest.mark.parametrize(
    ("after", "before", "rank"),
    [
        (record("D", "08.120", "loop.cc", "[2]: Stopping the comms loop"), "", 2),
        (record("I", "08.120", "loop.cc", "rank 2 is stopping its comms loop"), "epoch 1\n", 2),
        (record("D", "08.120", "other.cc", "[2]: Stopping the comms loop"), "", None),  # another logger
        (record("D", "11.500", "loop.cc", "[2]: Stopping the comms loop"), "", None),  # seconds later
        (record("D", "08.120", "loop.cc", "waiting for rank 2 to stop"), "", None),  # a peer
        (record("D", "08.120", "loop.cc", "[2]: Stopping the comms loop"), "[rank5]: step 9\n", None),
    ],
)
def test_an_untagged_record_is_the_rank_its_loggers_next_record_names_at_once(
    library: Library, after: str, before: str, rank: int | None
) -> None:
    log = before + record("E", "08.110", "loop.cc", BOOM) + after
    d = run(library, log)
    assert d.initiating is not None and BOOM in d.initiating.text
    assert d.initiating.rank == rank
    if rank is not None:
        assert any("a guess" in w for w in d.why)


@pytest.mark.parametrize(
    ("after", "rank"),
    [
        ("launcher: process rank 3 with PID 77 on node n2 exited on signal 6\n", 3),
        ("ERROR:runner: Rank 3 crashed with exit code 1.\n", 3),
        ("srun: error: n2: task 3: Exited with exit code 1\n", None),  # one entry of srun's list
        ("srun: error: n2: tasks 0-2: Exited with exit code 1\nsrun: error: n2: task 3: Exited\n", None),
        ("ERROR:runner: Rank 3 crashed with exit code 1.\nERROR:runner: Rank 5 crashed.\n", None),
        ("[E1 w.cpp:9] [Rank 3] watchdog thread terminated with exception: CUDA error\n", None),  # a thread
        ("launcher: waiting for rank 3, which exited\n", None),  # a peer
    ],
)
def test_a_launchers_verdict_naming_one_failed_rank_is_an_untagged_failures(
    library: Library, after: str, rank: int | None
) -> None:
    tb = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
    d = run(library, f"step 3\n{tb}{BOOM}\n{after}")
    assert d.initiating is not None and BOOM in d.initiating.text
    assert d.initiating.rank == rank


def test_a_verdict_names_no_untagged_line_of_a_tagged_log_nor_a_local_index(library: Library) -> None:
    verdict = "ERROR:runner: Rank 3 crashed with exit code 1.\n"
    tagged = "".join(f"[rank{v}]: step 3\n" for v in range(4))
    assert rank_of(library, f"{tagged}{BOOM}\n{verdict}") is None  # not a rank's own line
    assert rank_of(library, f"[local1]: {BOOM}\n{verdict}") is None  # local 1 may be another rank


def test_a_verdict_above_the_failure_is_about_an_earlier_death(library: Library) -> None:
    log = f"ERROR:runner: Rank 3 crashed with exit code 1.\nrestarting\n{BOOM}\n"
    d = run(library, log)
    assert d.initiating is not None and BOOM in d.initiating.text and d.initiating.rank is None


@pytest.mark.parametrize(
    ("message", "rank"),
    [
        ("node rank: 1 lost its store", None),  # a node's index
        ("data parallel rank 3 failed to load", None),
        ("tensor model parallel rank 0: shape mismatch", None),
        ("pipeline-parallel rank=2 raised", None),
        ("DP rank 2 crashed", None),
        ("group rank 1 timed out", None),
        ("on node 3 rank 5 failed", 5),  # the node is named, the rank is the world's
        ("global rank 5 failed", 5),
        ("[Rank 5] watchdog caught collective operation timeout", 5),
    ],
)
def test_a_rank_within_a_group_or_node_is_no_world_rank(message: str, rank: int | None) -> None:
    assert unwrap(message).rank == rank


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (f"[3,6]<stderr>: {BOOM}", 6),  # Open MPI's tag of a job other than the first: [job,rank]
        (f"[1,6]<stddiag>: {BOOM}", 6),
        (f"{BOOM} in process 6 of 8", 6),  # a pid is never counted out of N
        (f"{BOOM}: Process 6/8 stopped", 6),
        (f"{BOOM}: DataLoader worker process 6 of 8 exited", None),
        (f"{BOOM}: waiting for process 6 of 8", None),
        (f"{BOOM}: Process 20398 has 14.5 GiB memory in use", None),
    ],
)
def test_more_launchers_forms_of_the_rank(line: str, rank: int | None) -> None:
    assert unwrap(line).rank == rank


@pytest.mark.parametrize(("pid", "rank"), [(4242, 6), (4243, None)])
def test_nccls_prefix_with_its_host_hidden_still_names_the_pid(
    library: Library, pid: int, rank: int | None
) -> None:
    comm = "NCCL INFO comm 0x1b83 rank 6 nranks 8 cudaDev 0 - Init COMPLETE"
    log = f"-:4242:4250 [0] {BOOM}\n-:{pid}:{pid} [0] {comm}\n"
    d = run(library, log)
    assert d.initiating is not None and BOOM in d.initiating.text
    assert (d.initiating.rank, d.initiating.host) == (rank, None)  # "-" is no host
