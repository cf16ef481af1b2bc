"""Ranks from tag forms no launcher list names, learned from each log's structure, and the guards
that keep a peer, a local index, a device, a step counter or a port from being taken for the rank
(signatures/tagheads.py, processtags.py, neighbours.py, verdicts.py, attribution.py). The lines
are made up, in shapes the corpus does not hold."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.library import Library
from signatures.lines import unwrap
from signatures.processtags import learn
from tests.sigfactory import build_library, signature_doc

BOOM = "RuntimeError: kernel-fault happened"
TB = 'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def rank_of(library: Library, text: str) -> int | None:
    d: Diagnosis = diagnose([Source.from_text("job.out", text)], library=library)
    assert d.initiating is not None
    return d.initiating.rank


def lines(fmt: str, values: list[int], message: str = "step {} loss 2.1") -> str:
    return "".join(f"{fmt.format(v)}{message.format(i)}\n" for i, v in enumerate(values))


def test_an_actor_head_with_fields_after_its_ip_names_its_rank(library: Library) -> None:
    head = "(TrainWorker pid=4{0}, ip=10.1.1.2, world_rank={0}, local_rank=1) "
    assert unwrap(head.format(5) + BOOM).message == BOOM
    assert rank_of(library, lines(head, [3, 4]) + head.format(5) + BOOM + "\n") == 5
    local_only = "(TrainWorker pid=4{0}, ip=10.1.1.2, local_rank={0}) "
    text = lines(local_only, [0, 1]) + local_only.format(1) + BOOM + "\nnnodes=2\n"
    assert rank_of(library, text) is None  # a local index of a two-node job is no rank


def test_a_process_head_binds_its_pid_to_the_rank_it_names(library: Library) -> None:
    text = (
        "[ERROR] 2031-04-01-10:00:00 (PID:77, Device:0, RankID:41) EZ1234 call failed.\n"
        f"EZ1234: [PID: 77] 2031-04-01-10:00:00.100 {BOOM} [streamID:[9], taskID[38]]\n"
    )
    assert rank_of(library, text) == 41  # a stream's task id is no rank of its own
    model = learn(text.splitlines())
    assert model.read(text.splitlines()[1]).host is None  # an upper-case error code is no host
    # the device a process uses is no rank
    assert learn(["(PID:77, Device:3) a", "(PID:78, Device:4) b"]).read("(PID:77, Device:3) a").rank is None


def test_a_bare_number_after_a_tag_that_names_its_process_is_the_message(library: Library) -> None:
    text = "[default0]:Stalled ranks:\n[default0]:0: [allreduce.71]\n[default0]:1: [allreduce.73]\n"
    model = learn((text + "[default0]:2: [allreduce.75]\n").splitlines())
    assert model.global_shapes == set()
    after_rank = (
        "[rank0]:Stalled ranks:\n[rank0]:1: [allreduce.71]\n[rank0]:2: [allreduce.73]\n[rank0]:3: [x]\n"
    )
    assert learn(after_rank.splitlines()).coarse_shapes == set()  # the rank tag counts no nodes
    assert rank_of(library, after_rank + f"[rank0]:{BOOM}\n") == 0


def test_a_device_index_after_nccls_head_is_not_what_the_tag_before_it_counts(library: Library) -> None:
    text = (
        lines("[{0}] hostA:11{0}:12 [{0}] NCCL INFO ", [0, 1])
        + lines("[{0}] hostB:11{0}:12 [0] NCCL INFO ", [2, 3])
        + f"[3] hostB:113:12 [0] {BOOM}\n"
    )
    model = learn(text.splitlines())
    assert "[#]" in model.global_shapes and "…[#]" in model.local_shapes
    assert rank_of(library, text) == 3


def test_a_local_index_of_a_log_naming_several_processes_is_not_rank_0(library: Library) -> None:
    several = lines("[default{0}]:", [0, 1]) + f"[default0]:{BOOM}\n"
    assert rank_of(library, several) is None  # local 0 of which node?
    alone = lines("[default{0}]:", [0, 0]) + f"[default0]:{BOOM}\n"
    assert rank_of(library, alone) == 0  # the log names no other process: a one-process job


def test_an_untagged_line_reprinted_by_a_learned_tag_below_is_that_process(library: Library) -> None:
    head = "(Trainer pid=9{0}, ip=10.2.0.1, rank={0}) "
    text = (
        f"train.py: starting epoch 2\n\n{BOOM}\n"
        + head.format(2)
        + TB.splitlines()[0]
        + "\n"
        + head.format(2)
        + "  File ...\n"
    )
    assert rank_of(library, lines(head, [0, 1]) + text) == 2
    mixed = f"train.py: starting epoch 2\n\n{BOOM}\n" + head.format(2) + "a\n" + head.format(1) + "b\n"
    assert rank_of(library, lines(head, [0, 1]) + mixed) is None  # neighbours of two processes


def test_a_process_of_a_world_is_learned_when_processes_take_turns(library: Library) -> None:
    turns = lines("[{}/16] ", [3, 9, 3, 9, 4])
    assert rank_of(library, turns + f"[9/16] {BOOM}\n") == 9
    epochs = lines("[{}/10] ", [1, 1, 2, 2, 3, 3])  # an epoch counter: never back
    assert rank_of(library, epochs + f"[3/10] {BOOM}\n") is None
    frames = lines("[{}/0] ", [0, 1, 0, 1])  # dynamo's frame ids: the index is no smaller
    assert rank_of(library, frames + f"[1/0] {BOOM}\n") is None


def test_pipe_separated_heads_name_a_rank_when_hosts_split_the_values(library: Library) -> None:
    split = lines("node7|{}| ", [0, 1]) + lines("node9|{}| ", [2, 3])
    assert rank_of(library, split + f"node9|3| {BOOM}\n") == 3
    repeated = lines("node7|{}| ", [0, 1]) + lines("node9|{}| ", [0, 1])
    assert rank_of(library, repeated + f"node9|1| {BOOM}\n") is None  # an index within each node
    one_host = lines("node7|{}| ", [0, 1, 2])
    assert rank_of(library, one_host + f"node7|2| {BOOM}\n") is None  # 0-2 of one node: either


@pytest.mark.parametrize(
    ("line", "rank", "message"),
    [
        ("(rank 3) RuntimeError: x", 3, "RuntimeError: x"),
        ("<rank=12> RuntimeError: x", 12, "RuntimeError: x"),
        ("[rank: 2] RuntimeError: x", 2, "RuntimeError: x"),
        ("[Rank 0] Watchdog caught collective operation timeout", 0, None),  # NCCL's: kept
        ("(local_rank 3) RuntimeError: x", None, None),  # a local index is no rank
        ("(port 29500) RuntimeError: x", None, None),
    ],
)
def test_a_loggers_rank_head_is_peeled(line: str, rank: int | None, message: str | None) -> None:
    facts = unwrap(line)
    assert facts.rank == rank
    assert facts.message == (message if message is not None else line)


def test_ports_gpu_ids_and_step_counts_in_heads_are_no_ranks(library: Library) -> None:
    ports = lines("[{}] ", [29500, 29501, 29502])
    assert rank_of(library, ports + f"[29501] {BOOM}\n") is None
    gpus = lines("gpu{}: ", [0, 1, 2])
    assert rank_of(library, gpus + f"gpu1: {BOOM}\nnnodes=2\n") is None  # a device, per node
    steps = "".join(f"step {s}: loss 2.1\n" for s in range(1, 6))
    assert rank_of(library, steps + f"step 5: {BOOM}\n") is None
    groups = lines("[TP{0} DP{1}] ".replace("{1}", "0"), [0, 1]) + lines("[TP{0} DP1] ", [0, 1])
    assert rank_of(library, groups + f"[TP1 DP1] {BOOM}\n") is None  # a TP index of several groups


def test_local_indexes_whose_lines_name_one_nodes_ranks_map_to_them(library: Library) -> None:
    named = "[default{0}]:[W ProcessGroupNCCL.cpp:1] [PG 0 Rank 1{0}] watchdog started\n"
    text = named.format(0) + named.format(1) + f"[default1]:{BOOM}\n"
    assert rank_of(library, text) == 11
    one = named.format(1) + f"[default1]:{BOOM}\nnnodes=2\n"
    assert rank_of(library, one) is None  # one index alone may be another node's
    skew = named.format(0) + "[default1]:[W x.cpp:1] [PG 0 Rank 15] watchdog started\n"
    assert rank_of(library, skew + f"[default1]:{BOOM}\nnnodes=2\n") is None  # not one node's offset


def test_a_launchers_verdict_on_a_child_named_by_its_local_index(library: Library) -> None:
    launcher = "[INFO] [launch.py:1:main] dist_world_size=4\n"
    verdict = (
        "[ERROR] [launch.py:2:handler] ['python', 'train.py', '--local_rank=3'] exits with return code = 1\n"
    )
    assert rank_of(library, launcher + TB + BOOM + "\n" + verdict) == 3
    twice = launcher + TB + BOOM + "\n" + TB + BOOM + "\n" + verdict
    assert rank_of(library, twice) is None  # several printed it: the launcher names the one it noticed
    clean = verdict.replace("code = 1", "code = 0")
    assert rank_of(library, launcher + TB + BOOM + "\n" + clean) is None  # exit 0 is no verdict
    unsized = TB + BOOM + "\n" + verdict + "nnodes=2\n"
    assert rank_of(library, unsized) is None  # local 3 of which node?


def test_nccls_init_line_of_a_newer_version_binds_its_pid(library: Library) -> None:
    text = (
        "hostA:501:502 [0] NCCL INFO ncclCommInitRankConfig comm 0x5a rank 1 nranks 2 cudaDev 0 Init START\n"
        f"hostA:501:503 [0] misc/socket.cc:1 NCCL WARN {BOOM}\n"
    )
    assert rank_of(library, text) == 1


@pytest.mark.parametrize(
    ("message", "rank"),
    [
        ("task 3: Killed", 3),
        ("taskID[38] waits", None),
        ("task_id=3 started", None),
        ("Task id 4 done", None),
    ],
)
def test_a_task_id_counts_no_process(message: str, rank: int | None) -> None:
    assert unwrap(message).rank == rank
