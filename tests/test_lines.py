"""Unwrapping launcher and logger prefixes (signatures/lines.py)."""

from __future__ import annotations

import pytest

from signatures.lines import rank_from_name, time_key, unwrap


@pytest.mark.parametrize(
    ("line", "message", "rank"),
    [
        ("[rank3]: RuntimeError: boom", "RuntimeError: boom", 3),
        (
            "[2022-06-09T09:22:31.405197Z] 8de2ca81 ||   exitcode  : 1 (pid: 36)",
            "  exitcode  : 1 (pid: 36)",
            None,
        ),
        ("run 8de2ca81 || done", "run 8de2ca81 || done", None),  # a message's own bars stay
        (
            "  **what():  Error: compute_ctc_loss, stat = unknown error**",
            "what():  Error: compute_ctc_loss, stat = unknown error**",
            None,
        ),
        (
            "*** SIGABRT (@0x3e8) received by PID 14218",
            "*** SIGABRT (@0x3e8) received by PID 14218",
            None,
        ),  # no bold
        ("[default7]:RuntimeError: boom", "RuntimeError: boom", None),  # a local rank, not a rank
        ("[host1:0]AttributeError: boom", "AttributeError: boom", None),  # torchrun --role host: --tee
        ("[gpu-node-07:3]: ValueError: x", "ValueError: x", None),  # the number is a local rank
        ("12: RuntimeError: boom", "RuntimeError: boom", 12),
        ("[1,5]<stderr>:RuntimeError: boom", "RuntimeError: boom", 5),
        (
            "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught",
            "[Rank 0] Watchdog caught",
            0,
        ),
        ("[E ProcessGroupNCCL.cpp:475] [Rank 9] Watchdog caught", "[Rank 9] Watchdog caught", 9),
        (
            "W0823 18:56:31.554000 40177 torch/_dynamo/convert_frame.py:1016] [0/8] torch._dynamo hit",
            "torch._dynamo hit",
            None,
        ),
        ("\x1b[31m[rank2]: ValueError: red\x1b[0m", "ValueError: red", 2),
        (
            "> ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9)",
            "failed (exitcode: -9)",
            None,
        ),
        (
            "[2023-10-13 17:40:02,544] torch.distributed.elastic.multiprocessing.api: [ERROR] "
            "failed (exitcode: -9)",
            "failed (exitcode: -9)",
            None,
        ),
        (
            "[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW!",
            "[deepspeed] OVERFLOW!",
            None,
        ),
        (
            "[f3d8bac11bcb] 2022-08-08 08:47:11,459 (trainer:647) WARNING: The grad norm is nan.",
            "The grad norm is nan.",
            None,
        ),
        (
            "(EngineCore_DP0 pid=123) ERROR 02-28 17:42:17 [core.py:1006] EngineCore failed",
            "EngineCore failed",
            None,
        ),
        (
            "FileNotFoundError: [ERROR] Image folder not found",
            "FileNotFoundError: [ERROR] Image folder not found",
            None,
        ),
    ],
)
def test_unwrap_strips_prefixes_and_keeps_rank(line: str, message: str, rank: int | None) -> None:
    facts = unwrap(line)
    assert facts.message == message
    assert facts.rank == rank


def test_unwrap_reads_host_and_time() -> None:
    facts = unwrap("node-12:4567:4589 [3] NCCL INFO comm 0x1 rank 3 nRanks 64")
    assert facts.host == "node-12"
    assert unwrap("node003: RuntimeError: x").host == "node003"
    assert unwrap("Jan 12 10:00:00 gpu7 kernel: Out of memory").host == "gpu7"
    stamped = unwrap("[2024-01-02 03:04:05,678] ERROR boom")
    assert stamped.time == "2024-01-02T03:04:05.678"
    glog = unwrap("[rank1]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] x")
    assert glog.time == "03-21T02:07:08.408"


def test_time_keys_order_within_a_kind() -> None:
    early, late = time_key("2024-01-02T03:04:05.6"), time_key("2024-01-02T03:04:06")
    assert early is not None and late is not None and early < late
    assert time_key("03-21T02:07:08.408") is not None
    assert time_key(None) is None and time_key("garbage") is None


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank12.log", 12),
        ("logs/train_rank_3.err", 3),
        ("rank-03.out", 3),
        ("node1.r7.out", None),  # "r7" could be a run, a replica or a retry
        ("job_r2.log", None),
        ("rank1-to-rank2.log", None),  # two ranks: ambiguous
        ("train.log", None),
    ],
)
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("W1210 08:01:33.059000 3495860 torch/_higher_order_ops/triton_kernel_wrap.py:987] [0/0] x", "W"),
        ("[rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] x", "E"),
        ("[2023-10-13 17:40:02,544] torch.distributed.elastic.multiprocessing.api: [ERROR] x", "E"),
        ("WARNING:torch.distributed.run:x", "W"),
        ("[INFO|trainer.py:1812] 2024-01-01 12:00:00,123 >> x", "I"),
        ("INFO:2026-01-05 05:12:08,452:jax._src.xla_bridge:925: x", "I"),  # logging, time first
        ("05:12:08.452 [I] x (2485939:xla_bridge.py:925)", "I"),  # a clock and a level letter
        ("RuntimeError: x", None),
    ],
)
def test_unwrap_keeps_the_logger_level(line: str, level: str | None) -> None:
    assert unwrap(line).level == level


def test_a_launchers_per_node_index_is_a_local_rank_not_a_rank() -> None:
    for line in (
        "[default3]:RuntimeError: x",
        "trainer/0 [3]:RuntimeError: x",
        "failed (exitcode: 1) local_rank: 3",
    ):
        facts = unwrap(line)
        assert facts.rank is None and facts.local_rank == 3


def test_nccls_prefix_gives_host_and_pid() -> None:
    facts = unwrap("gpu617:22841:22890 [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found")
    assert (facts.host, facts.pid, facts.rank) == ("gpu617", 22841, None)


def test_a_rank_from_a_launchers_tag_is_told_from_one_in_the_words() -> None:
    assert unwrap("[rank3]: RuntimeError: x").tagged
    assert not unwrap("srun: error: node-1: task 3: Killed").tagged
    assert unwrap("srun: error: node-1: task 3: Killed").rank == 3


@pytest.mark.parametrize(
    ("line", "host"),
    [
        ("mpirun noticed that process rank 1 with PID 12 on node gpu-17 exited on signal 9", "gpu-17"),
        ("srun: error: nid01934: task 2: Killed", "nid01934"),
        ("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: x", None),
    ],
)
def test_a_host_named_in_the_words(line: str, host: str | None) -> None:
    assert unwrap(line).host == host


@pytest.mark.parametrize(
    ("line", "message", "level"),
    [
        (
            "E0000 00:00:1737920191.807767 1997283 cuda_dnn.cc:8310] Unable to register",
            "Unable to register",
            "E",
        ),
        ("2021-10-13 17:19:29.385716: E tensorflow/cuda_dnn.cc:362] Loaded runtime", "Loaded runtime", "E"),
        ("`E external/xla/cuda_dnn.cc:447] Loaded runtime", "Loaded runtime", "E"),
        ("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: x", "ValueError: x", "E"),
    ],
)
def test_more_log_heads_are_peeled(line: str, message: str, level: str) -> None:
    facts = unwrap(line)
    assert (facts.message, facts.level) == (message, level)


def test_a_host_role_prefix_names_the_host_and_only_a_local_rank() -> None:
    facts = unwrap("[gpu-node-07:3]: ValueError: x")
    assert facts.host == "gpu-node-07" and facts.rank is None


@pytest.mark.parametrize(
    ("line", "message", "rank"),
    [
        # srun --label right-aligns the task id to the widest one of the step
        ("  7: [rank7]: KeyError: 'x'", "KeyError: 'x'", 7),
        (" 42: ValueError: bad shape", "ValueError: bad shape", 42),
        ("103: OSError: disk full", "OSError: disk full", 103),
    ],
)
def test_a_padded_srun_label_is_the_rank(line: str, message: str, rank: int) -> None:
    facts = unwrap(line)
    assert (facts.message, facts.rank, facts.tagged) == (message, rank, True)


def test_an_indented_line_deeper_than_a_label_is_no_rank() -> None:
    assert unwrap("        3: not a label").rank is None


@pytest.mark.parametrize(
    ("line", "message", "rank", "host"),
    [
        (
            "(TrainerActor[rank=3] pid=77, ip=10.0.0.5) Fatal Python error: Bus error",
            "Fatal Python error: Bus error",
            3,
            "10.0.0.5",
        ),
        ("(RolloutWorker[replica_2] pid=12) RuntimeError: x", "RuntimeError: x", None, None),
        ("(Learner pid=9, ip=node-a) ok", "ok", None, "node-a"),
    ],
)
def test_a_ray_actor_tag_is_peeled_and_an_actor_named_by_rank_gives_it(
    line: str, message: str, rank: int | None, host: str | None
) -> None:
    facts = unwrap(line)
    assert (facts.message, facts.rank, facts.host) == (message, rank, host)


@pytest.mark.parametrize(
    ("line", "message", "level"),
    [
        ("[1600000000.123456] [gpu7:4410:0]   rc_iface.c:91   UCX  ERROR send failed", "send failed", "E"),
        ("[1600000000.5] [n-2:12:3]  ib_md.c:1 UCX  WARN  memory pool low", "memory pool low", "W"),
        ("[1600000000.5] [n-2:12:3]  wireup.c:12 UCX  DEBUG ep ready", "ep ready", "D"),
        ("[1600000000.5] [n-2:12:3]  wireup.c:12 UCX  TRACE ep ready", "ep ready", None),
    ],
)
def test_ucx_log_head_gives_the_level(line: str, message: str, level: str | None) -> None:
    facts = unwrap(line)
    assert (facts.message, facts.level) == (message, level)
    assert facts.host is not None and facts.pid is not None


def test_ucx_signal_handler_head_gives_host_and_pid() -> None:
    facts = unwrap("[node-b:9031 :1:9040] Caught signal 7 (Bus error: nonexistent physical address)")
    assert (facts.host, facts.pid) == ("node-b", 9031)
    assert facts.message.startswith("Caught signal 7")


@pytest.mark.parametrize(
    ("line", "message", "level"),
    [
        (
            "Training:  40%|████      | 40/100 [01:02<01:33,  1.55s/it]"
            "2024-03-01 10:00:00,123 ERROR worker died",
            "ERROR worker died",
            None,
        ),
        (
            "12%|█▏        | 120/1000 [00:10<01:20, 11.0it/s, loss=0.3]"
            "E0301 10:00:00.123456 77 alloc.cc:9] out of pool",
            "out of pool",
            "E",
        ),
        ("valid:  3%|▎ | 3/91 [00:01<00:40]  ERROR: shard 7 unreadable", "ERROR: shard 7 unreadable", None),
        (
            "Epoch 0: |          | 4540/? [07:57<00:00,  9.51it/s]Fatal Python error: Segmentation fault",
            "Fatal Python error: Segmentation fault",
            None,
        ),
        (
            "train: 9%|▉ | 9/99 [00:09<01:30]RuntimeError: CUDA error: boom",
            "RuntimeError: CUDA error: boom",
            None,
        ),
        (
            "  0%|          | 0/144 [00:00<?, ?it/s]zsh: bus error  yolo task=detect",
            "zsh: bus error  yolo task=detect",
            None,
        ),
        (
            "val:   2%|#4   | 20/1094 [00:41<11:04,  1.62it/s]/opt/bin/crun: line 6:  3305 Killed",
            "/opt/bin/crun: line 6:  3305 Killed",
            None,
        ),
        (
            "  0%|          | 0/19 [00:00<?, ?it/s]/Src/MPS/GatherND.mm:256: failed assertion `Rank (1)'",
            "/Src/MPS/GatherND.mm:256: failed assertion `Rank (1)'",
            None,
        ),
    ],
)
def test_a_record_printed_onto_a_progress_bar_is_read_as_its_own(
    line: str, message: str, level: str | None
) -> None:
    facts = unwrap(line)
    assert (facts.message, facts.level) == (message, level)


def test_a_progress_bar_alone_keeps_its_text() -> None:
    bar = "Epoch 3:  50%|█████     | 5/10 [00:05<00:05,  1.00it/s, loss=2.1]"
    assert unwrap(bar).message == bar
    words = bar + " saved checkpoint"  # words after a bar are not a record of their own
    assert unwrap(words).message == words
    path = bar + "/ckpt/epoch3.pt"  # nor a path that names no source line
    assert unwrap(path).message == path


@pytest.mark.parametrize(
    ("line", "message", "rank"),
    [
        ("[5]<stderr>:Fatal Python error: Segmentation fault", "Fatal Python error: Segmentation fault", 5),
        ("Tue Mar  4 09:01:02 2025[12]<stdout>:ValueError: bad shard", "ValueError: bad shard", 12),
        ("2025-03-04 09:01:02.5[0]<stderr>:worker ready", "worker ready", 0),
    ],
)
def test_a_launchers_stream_tag_of_one_number_is_the_rank(line: str, message: str, rank: int) -> None:
    # horovodrun (Gloo) tags each rank's stream "[rank]<stderr>:", glued to its timestamp or not
    facts = unwrap(line)
    assert (facts.message, facts.rank) == (message, rank)


def test_a_stream_name_in_brackets_without_a_rank_is_no_tag() -> None:
    assert unwrap("[x]<stderr>: hello").rank is None
    assert unwrap("[3] <stderr> hello").message == "[3] <stderr> hello"


def test_a_bar_refreshed_many_times_shows_its_last_refresh_and_what_was_printed_onto_it() -> None:
    bar = "Epoch 0:  31%|███       | {n}/3999 [1:07:0{n}<2:31:54,  3.28s/it, loss={n}.1]"
    line = "\r".join(bar.format(n=n) for n in (1, 2, 3)) + "[rank: 4] worker got SIGUSR1: 10"
    facts = unwrap(line)
    assert (facts.message, facts.rank) == ("worker got SIGUSR1: 10", 4)
    # the refreshes alone are still one progress bar's text
    plain = "\r".join(bar.format(n=n) for n in (1, 2))
    assert unwrap(plain).message == bar.format(n=2)
    # a carriage return in a line that is no progress bar is left alone
    assert unwrap("loading\rdone ok").message == "loading\rdone ok"


def test_unwrap_reads_deepspeeds_pdsh_prefix_of_an_address_or_localhost() -> None:
    # DeepSpeed's multi-node runner prefixes each line with the hostfile's name for the node.
    line = "localhost: [2026-03-31 15:32:44] gpu-a:2394670:2396491 [1] include/alloc.h:228 NCCL WARN x"
    nccl = unwrap(line)
    assert (nccl.host, nccl.pid, nccl.message) == ("gpu-a", 2394670, "include/alloc.h:228 NCCL WARN x")
    assert unwrap("10.0.3.17: RuntimeError: x").host == "10.0.3.17"
    assert unwrap("localhost: RuntimeError: x").host is None  # names no host of its own
    # a bare word with no digit is not a host ("note: ...", "error: ..."), nor a colon alone
    assert unwrap("error: RuntimeError: x").message == "error: RuntimeError: x"
    assert unwrap(": x").message == ": x"
    assert unwrap("1.2.3: x").message == "1.2.3: x"


def test_unwrap_peels_a_parents_relay_of_its_childs_streams() -> None:
    # accelerate test relays the launcher's output as "stderr: ..." / "stdout: ..."
    facts = unwrap("stderr:   rank      : 1 (local_rank: 1)")
    assert facts.message == "  rank      : 1 (local_rank: 1)"
    assert unwrap("stdout: [rank2]: RuntimeError: x").rank == 2
    assert unwrap("subprocess stderr: x").message == "subprocess stderr: x"  # not at the head


def test_a_loguru_record_gives_its_level_and_message() -> None:
    line = (
        " 7: 2025-01-24 14:23:53.201 | WARNING  | mix.dataset:_cleanup:208 - FileNotFoundError during cleanup"
    )
    facts = unwrap(line)
    assert (facts.message, facts.level, facts.rank) == ("FileNotFoundError during cleanup", "W", 7)
    error = unwrap("2025-01-24 14:23:53.201 | ERROR    | __main__:main:12 - RuntimeError: boom")
    assert (error.message, error.level) == ("RuntimeError: boom", "E")
    # a table drawn with bars is no loguru record
    row = "| epoch | loss |"
    assert unwrap(row).message == row
