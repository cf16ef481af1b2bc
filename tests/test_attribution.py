"""Which rank and host printed the initiating line, from the log's structure
(signatures/attribution.py, structure.py, lines.py). One test per rule."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc

BOOM = "RuntimeError: kernel-fault happened"

TABLE = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-05-01_10:00:09
  host      : gpu-node-02
  rank      : 13 (local_rank: 5)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:00:07
  host      : gpu-node-01
  rank      : 12 (local_rank: 4)
  exitcode  : 1 (pid: 4141)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def run(library: Library, *texts: str, names: list[str] | None = None) -> Diagnosis:
    names = names or [f"log{i}.txt" for i in range(len(texts))]
    return diagnose([Source.from_text(n, t) for n, t in zip(names, texts, strict=True)], library=library)


def where(d: Diagnosis) -> tuple[int | None, str | None]:
    assert d.initiating is not None
    return d.initiating.rank, d.initiating.host


def test_the_launchers_failure_table_names_the_rank_and_host_of_an_untagged_line(library: Library) -> None:
    d = run(library, f"{BOOM}\n{TABLE}")
    assert where(d) == (12, "gpu-node-01")  # the root cause, not the other failure
    assert any("failure table" in w for w in d.why)


def test_a_local_rank_is_never_reported_as_a_rank(library: Library) -> None:
    d = run(library, f"[default3]:{BOOM}\n")
    assert where(d) == (None, None)
    assert any("local rank 3" in w for w in d.why)


def test_a_local_rank_maps_through_the_failure_table_of_its_node(library: Library) -> None:
    assert where(run(library, f"[default4]:{BOOM}\n{TABLE}"))[0] == 12


def test_a_local_rank_is_the_rank_when_the_job_runs_on_one_node(library: Library) -> None:
    log = f"+ torchrun --nproc_per_node 8 train.py\n[default3]:{BOOM}\n"
    assert where(run(library, log))[0] == 3
    two_nodes = f"+ torchrun --nnodes 2 --nproc_per_node 8 train.py\n[default3]:{BOOM}\n"
    assert where(run(library, two_nodes))[0] is None


def test_nccls_pid_maps_to_a_rank_through_its_communicator_line(library: Library) -> None:
    log = (
        "node7:4567:4567 [1] NCCL INFO comm 0x55d4 rank 1 nranks 8 cudaDev 1 busId 1b000 - Init COMPLETE\n"
        "node7:4567:4567 [1] NCCL INFO comm 0x77aa rank 0 nranks 2 cudaDev 1 busId 1b000 - Init COMPLETE\n"
        f"node7:4567:4590 [1] NCCL WARN {BOOM}\n"
    )
    assert where(run(library, log)) == (1, "node7")  # the rank in the whole job, not in a subgroup


def test_nccls_pid_maps_to_a_rank_through_its_first_ring_line(library: Library) -> None:
    # "Ring 00 : 2[2] -> 3[3]": the rank before the arrow, with its device in brackets, is its own
    ring = "node7:4567:4590 [2] NCCL INFO Ring 00 : 2[2] -> 3[3] via direct shared memory\n"
    warn = f"node7:4567:4590 [2] NCCL WARN {BOOM}\n"
    assert where(run(library, ring + warn)) == (2, "node7")
    # a network line names a peer first: "Ring 00 : 7 -> 0 [receive]"
    net = "node7:4567:4590 [2] NCCL INFO Ring 00 : 7 -> 2 [receive] via NET/IB/0\n"
    assert where(run(library, net + warn))[0] != 7


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (f"[PG 0 (default_pg) Rank 5] {BOOM}", 5),
        (f"mpirun noticed that process rank 7 with PID 0 on node n3 exited: {BOOM}", 7),
        (f"torch.multiprocessing.spawn.ProcessRaisedException: process 2 terminated with {BOOM}", 2),
        (f"AssertionError: Rank 3: {BOOM}", 3),
        (f"what():  NCCL failure in all_reduce.cu at line: 86 rank: 6 {BOOM}", 6),
        (f"[1,9]<stderr>:{BOOM}", 9),
        (f"RuntimeError: mismatch between collectives. Rank 4 is running collective: {BOOM}", 4),
        (f"Unexpected result nan. Rank 8 has {BOOM}", 8),
    ],
)
def test_a_rank_inside_the_message_or_a_launcher_tag_names_it(library: Library, line: str, rank: int) -> None:
    assert where(run(library, line + "\n"))[0] == rank


def test_mp_spawn_says_whose_traceback_follows(library: Library) -> None:
    log = (
        "-- Process 3 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 10, in worker\n'
        f"{BOOM}\n"
    )
    assert where(run(library, log))[0] == 3


def test_a_host_named_in_the_message_is_the_host(library: Library) -> None:
    d = run(library, f"mpirun noticed that process rank 7 with PID 0 on node gpu-17 exited: {BOOM}\n")
    assert where(d) == (7, "gpu-17")


def test_a_neighbour_mentioning_a_task_in_its_words_gives_no_rank(library: Library) -> None:
    log = f"{BOOM}\nsrun: error: node-3: task 14: Exited with exit code 1\n"
    assert where(run(library, log))[0] is None


def test_the_file_name_gives_a_rank_only_when_unambiguous(library: Library) -> None:
    assert where(run(library, f"{BOOM}\n", names=["logs/rank-03.out"]))[0] == 3
    assert where(run(library, f"{BOOM}\n", names=["logs/job_r2.log"]))[0] is None


def test_a_rank_in_the_content_beats_the_file_name(library: Library) -> None:
    assert where(run(library, f"[rank5]: {BOOM}\n", names=["rank3.log"]))[0] == 5
    log = f"-- Process 6 terminated with the following error:\n{BOOM}\n"
    assert where(run(library, log, names=["rank3.log"]))[0] == 6


def test_the_wrapped_first_half_of_a_statement_names_its_rank(library: Library) -> None:
    log = "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 2] watchdog ended with exception: [Rank 2]\n"
    assert where(run(library, log + " kernel-fault happened after 1800 ms\n"))[0] == 2
    finished = "  what():  [Rank 2] watchdog ended.\n"  # a finished sentence: the next line is new
    assert where(run(library, finished + " kernel-fault happened after 1800 ms\n"))[0] is None


def test_horovodruns_report_of_a_process_exit_names_the_death_and_its_rank(library: Library) -> None:
    d = run(library, "Epoch 3 loss 0.41\nProcess 1 exit with status code 137.\n")
    assert d.initiating and d.initiating.line == 2 and d.initiating.rank == 1
    # a process that exited with status 0 did not die
    assert run(library, "Epoch 3 loss 0.41\nProcess 1 exit with status code 0.\n").initiating is None


def test_a_loggers_head_that_writes_the_rank_names_it(library: Library) -> None:
    k2 = "2024-01-14 01:03:00,826 ERROR [train.py:1057] (2/4) RuntimeError: kernel-fault happened\n"
    assert where(run(library, k2))[0] == 2
    hugectr = "[HCTR][06:36:45.719][ERROR][RK3][main]: RuntimeError: kernel-fault happened\n"
    assert where(run(library, hugectr))[0] == 3
    # a count in parentheses that opens a message, or stands after no logger's file head, is none
    assert where(run(library, f"(2/4) {BOOM}\n"))[0] is None
    assert where(run(library, f"[HCTR][RK3 main]: {BOOM}\n"))[0] is None


def _watchdog(group: str) -> str:
    return (
        f"[E1013 03:22:49.683087154 ProcessGroupNCCL.cpp:1923] [{group} Rank 1] Process group watchdog "
        "thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=COALESCED, Timeout(ms)=600000) ran for 600096 milliseconds"
        " before timing out.\n"
    )


def test_a_rank_within_a_process_group_other_than_the_default_is_no_global_rank() -> None:
    pipeline = _watchdog("PG ID 6 PG GUID 90(PIPELINE_MODEL_PARALLEL_GROUP)")
    # the launcher's tag names the global rank; the group's "Rank 1" counts within the pipeline group
    assert where(diagnose([Source.from_text("job.log", "[rank10]:" + pipeline)]))[0] == 10
    assert where(diagnose([Source.from_text("job.log", pipeline)]))[0] is None
    # the default group's ranks are the world's; a tag naming no group is read as the world's too
    for group in ("PG ID 0 PG GUID 0(default_pg)", "PG ID 1 PG GUID 1"):
        assert where(diagnose([Source.from_text("job.log", _watchdog(group))]))[0] == 1


def test_the_continuation_of_an_error_message_names_its_rank(library: Library) -> None:
    log = f"{BOOM}: parameters not used\nin producing loss.\nParameter indices without grad for rank 4: 1\n"
    assert where(run(library, log))[0] == 4
    parted = f"{BOOM}\n\nParameter indices without grad for rank 4: 1\n"  # a blank line ends the message
    assert where(run(library, parted))[0] is None


def test_a_lone_local_rank_0_is_rank_0_only_when_the_log_names_no_other_process(library: Library) -> None:
    launcher = "[ERROR] [launch.py:434:sigkill_handler] ['python', 'main.py', '--local_rank=0'] {}\n"
    assert where(run(library, launcher.format(BOOM)))[0] == 0
    others = launcher.format(BOOM) + "...\n" * 4 + "[rank3]: RuntimeError: kernel-fault happened\n"
    assert where(run(library, others))[0] is None  # rank 3 exists: local rank 0 may be any rank
    assert where(run(library, f"[default3]:{BOOM}\n"))[0] is None  # local rank 3 implies more processes
    world = f"world_size=8\n[default0]:{BOOM}\n"
    assert where(run(library, world))[0] is None


def test_a_job_of_world_size_1_has_only_rank_0(library: Library) -> None:
    assert where(run(library, f"RANK and WORLD_SIZE in environ: 0/1\n{BOOM}\n"))[0] == 0
    assert where(run(library, f"world_size=1\n{BOOM}\n"))[0] == 0
    named = f"world_size=1\n[rank3]: step 1 {BOOM}\n...\n...\n...\n...\n{BOOM}\n"
    assert where(run(library, named))[0] == 3  # a line names rank 3: the world size is not the job's


def test_the_only_host_the_log_names_is_the_host(library: Library) -> None:
    log = f"{BOOM}\nsrun: error: gpu-17: task 0: Exited with exit code 1\n"
    assert where(run(library, log)) == (None, "gpu-17")
    two = log + "srun: error: gpu-18: task 1: Exited with exit code 1\n"
    assert where(run(library, two)) == (None, None)


@pytest.mark.parametrize(
    ("log", "rank"),
    [
        # srun forwards the step daemon's line under task 0's label; srun's report names the task
        (
            "  0: slurmstepd: error: kernel-fault happened in StepId=9.2\n"
            "srun: error: gpu-3: task 6: Out Of Memory\n",
            6,
        ),
        ("2: slurmstepd-gpu-3: error: kernel-fault happened\nsrun: error: gpu-3: task 11: Killed\n", 11),
        # two tasks named: the log does not say which one it concerns
        (
            "0: slurmstepd: error: kernel-fault happened\n"
            "srun: error: a: task 1: Killed\nsrun: error: a: task 4: Killed\n",
            None,
        ),
        # no report below: the label is still nobody's
        ("0: slurmstepd: error: kernel-fault happened\n", None),
        # a task's own line keeps its label
        (f"0: {BOOM}\nsrun: error: gpu-3: task 6: Out Of Memory\n", 0),
    ],
)
def test_slurms_step_daemon_speaks_for_the_task_srun_names(
    library: Library, log: str, rank: int | None
) -> None:
    assert where(run(library, log))[0] == rank


def test_one_process_stating_its_rank_in_its_settings_is_that_rank(library: Library) -> None:
    settings = "backend: nccl\nargs.dist_rank: 3\nworld_size: 4\n"
    assert where(run(library, f"{settings}{BOOM}\n"))[0] == 3
    # it beats the file's name: the content says it
    assert where(run(library, f"{settings}{BOOM}\n", names=["rank1.log"]))[0] == 3
    # a log of several processes: another rank named, or rank tags, and the settings say nothing
    assert where(run(library, f"{settings}[rank1]: step 10 ok\n{BOOM}\n"))[0] is None
    died = (
        "E0501 22:05:19.414000 1 torch/distributed/elastic/multiprocessing/api.py:881] "
        "failed (exitcode: 1) local_rank: 2 (pid: 222) of binary: /usr/bin/python\n"
    )
    assert where(run(library, f"{settings}{BOOM}\n{died}"))[0] is None
    # a local rank is never taken for it
    assert where(run(library, f"local_rank: 3\n{BOOM}\n"))[0] is None


def test_a_rank_beside_the_count_of_all_ranks_is_the_processs_own(library: Library) -> None:
    # Paddle's communicator: "nranks: 4 local rank: 2", its ranks the job's
    init = "I1005 20:24:27.297324 30412 comm.cc:74] init comm context nranks: 4 local rank: 2 gpu id: 2\n"
    assert where(run(library, f"{init}{BOOM}\n"))[0] == 2
    assert where(run(library, f"init comm context local rank: 2 gpu id: 2\n{BOOM}\n"))[0] is None
    # detectron2's "Rank of current process: 2. World size: 4"; a peer's rank is no declaration
    head = "[12/22 19:49:34] d2 INFO: Rank of current process: 2. World size: 4\n"
    assert where(run(library, f"{head}{BOOM}\n"))[0] == 2
    assert where(run(library, f"[12/22 19:49:34] d2 INFO: rank of peer: 2\n{BOOM}\n"))[0] is None
    assert where(run(library, f"INFO:root:Initialized (rank/world-size) 3/4\n{BOOM}\n"))[0] == 3
    # Paddle's fleet topology names the process's rank_id among its parallel degrees
    topo = "topology.py:187 - HybridParallelInfo: rank_id: 3, mp_degree: 1, dp_degree: 4\n"
    assert where(run(library, f"{topo}{BOOM}\n"))[0] == 3
    assert where(run(library, f"HybridParallelInfo: mp_id: 3, dp_degree: 4\n{BOOM}\n"))[0] is None


def test_a_rank_named_in_a_sentence_is_no_setting(library: Library) -> None:
    # "Waiting for rank: 3" names a peer, "Local rank: 3" a per-node index: neither is the log's own
    for line in ("Waiting for rank: 3 to join\n", "Local rank: 3\n"):
        assert where(run(library, f"{line}{BOOM}\n"))[0] is None
