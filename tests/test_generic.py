"""The generic failure layer (signatures/shapes.py, episodes.py): a failure no signature knows,
named by its shape, with the same noise model as a known one. One test per rule.

The library here holds only a downstream, a wrapper and a benign signature, so every initiating
line must be found by shape alone.
"""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, Status, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc(
                "peer-gone", role="downstream", fingerprints=[{"regex": r"\[Rank (?P<rank>\d+)\] peer-gone"}]
            ),
            signature_doc(
                "cleanup", role="wrapper", fingerprints=[{"regex": r"Sending process \d+ closing"}]
            ),
            signature_doc("chatty", role="benign"),
        ],
    )


def run(library: Library, text: str, name: str = "job.log") -> Diagnosis:
    return diagnose([Source.from_text(name, text)], library=library)


def line_of(d: Diagnosis) -> int | None:
    return d.initiating.line if d.initiating else None


@pytest.mark.parametrize(
    ("line", "shape"),
    [
        ("terminate called after throwing an instance of 'c10::Error'", "C++ exception"),
        (
            "../aten/src/ATen/native/cuda/Loss.cu:271: kernel: block: [0,0,0] Assertion `t >= 0` failed.",
            "assertion",
        ),
        ("[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out", "ERROR level"),
        ("2024-01-01 10:00:00,123 - trainer - ERROR - the batch could not be built", "ERROR level"),
        ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup.", "verdict"),
        ("main.c:4:10: fatal error: Python.h: No such file or directory", "own error line"),
        ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory", "exception"),
        ("Could not run the op: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx", "status code"),
        ("triton.runtime.errors.OutOfResources: out of resource: shared memory", "exception"),
        ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "verdict"),
        ("4m11s  Warning  Evicted  pod/egg  The node was low on resource: memory.", "verdict"),
        ("INFO:tf:Error reported to Coordinator: <class 'tf.errors.InvalidArgumentError'>, bad", "reported"),
        ("[E socket.cpp:500] [c10d] failed to bind (errno: 98 - Address already in use).", "errno"),
        ("ResourceExhaustedError (see above for traceback): OOM when allocating tensor", "TF1 exception"),
        ("  (1) Internal:  Collective Op has group_size 8 but that group has size 4", "root error by name"),
        ("!!!! gemm call went wrong. (m: 768, n: 4608, k: 3072, error: 13)", "a code closing a report"),
        ("zsh: segmentation fault  python train.py", "zsh's report of a signal"),
        ("[1]    15017 bus error  python3 train.py", "zsh's job report"),
        ("pure virtual method called", "the C++ runtime's abort"),
        ("/usr/bin/ld: cannot find -lcurand", "the linker's error"),
        ("double free or corruption (!prev)", "glibc's heap check"),
        (
            "*** Error in `python': free(): invalid pointer: 0x00007f3a2c000010 ***",
            "older glibc's heap check",
        ),
        ("*** stack smashing detected ***: terminated", "the stack protector"),
    ],
)
def test_a_failure_stated_by_its_shape_is_unrecognized_not_clean(
    library: Library, line: str, shape: str
) -> None:
    d = run(library, f"step 1 loss 2.0\n{line}\n")
    assert d.status is Status.UNRECOGNIZED, (shape, d.why)
    assert line_of(d) == 2


def test_the_runtimes_abort_report_is_stated_before_the_terminate_that_follows(library: Library) -> None:
    d = run(
        library, "step 1 loss 2.0\npure virtual method called\nterminate called without an active exception\n"
    )
    assert line_of(d) == 2
    for quoted in ("the pure virtual method called in the docs is fine", "malloc(): arena 3 created"):
        assert run(library, f"step 1 loss 2.0\n{quoted}\nstep 2 loss 1.9\n").status is Status.CLEAN


def test_a_check_after_a_source_location_is_stated_before_the_abort_that_repeats_it(library: Library) -> None:
    check = "[11:08:16] src/io/iter_loader.h:100: Check failed: n > 0 too few inputs\n"
    thrown = "terminate called after throwing an instance of 'dmlc::Error'\n  what():  " + check
    assert line_of(run(library, check + thrown + "Aborted\n")) == 1


def test_a_root_error_of_an_inputs_end_or_a_cancellation_states_nothing(library: Library) -> None:
    for line in ("  (0) Out of range: End of sequence", "  (1) Cancelled: the step was cancelled"):
        assert run(library, f"step 1 loss 2.0\n{line}\n").status is Status.CLEAN, line


def test_a_tensorflow_status_logged_as_a_warning_right_before_a_traceback_states_it(library: Library) -> None:
    line = "2018-06-08 17:26:00.908130: W tensorflow/core/framework/op_kernel.cc:1202] OP_REQUIRES failed : "
    traceback = 'Traceback (most recent call last):\n  File "session.py", line 1361, in _do_call\n'
    d = run(library, f"{line}Resource exhausted: OOM when allocating tensor\n{traceback}")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 1
    alone = run(library, f"{line}Resource exhausted: OOM when allocating tensor\nstep 2 loss 1.0\n")
    assert alone.status is Status.CLEAN  # a warning on its own is no failure


def test_workers_killed_for_memory_are_a_death(library: Library) -> None:
    d = run(library, "12 Workers (tasks / actors) killed due to memory pressure (OOM), 0 crashed\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 1


def test_a_process_death_is_named_when_nothing_states_a_cause(library: Library) -> None:
    d = run(library, "step 7 loss 1.2\n/var/spool/slurm_script: line 28:  8156 Killed   python train.py\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2
    assert "process death" in d.why[0]


def test_a_process_that_exited_with_a_non_zero_code_in_words_is_a_death(library: Library) -> None:
    d = run(library, "step 7 loss 1.2\nContainer trainer-2 exited with code 137\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2
    assert run(library, "step 7 loss 1.2\nContainer trainer-2 exited with code 0\n").status is Status.CLEAN


def test_a_stated_error_beats_the_death_it_caused(library: Library) -> None:
    log = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "Segmentation fault (core dumped)\n"
    )
    assert line_of(run(library, log)) == 1


def test_a_healthy_log_with_look_alikes_stays_clean(library: Library) -> None:
    log = (
        "step 1 | loss 2.1 | nan_count=0 | error_if_nonfinite=False\n"
        "/site/torch/nn/conv.py:456: UserWarning: Plan failed with a cudnnException: "
        "CUDNN_STATUS_NOT_SUPPORTED\n"
        "[W socket.cpp:697] [c10d] Warning: hostname lookup failed, falling back to the IP address\n"
        "step 2 | loss 2.0 | grad_norm 0.3\n"
    )
    d = run(library, log)
    assert d.status is Status.CLEAN and d.initiating is None


def test_an_nccl_warning_is_a_failure_when_its_return_code_unwinds(library: Library) -> None:
    log = (
        "node1:100:200 [0] init.cc:573 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 on dev 10\n"
        "node1:100:200 [0] NCCL INFO init.cc:840 -> 5\n"
    )
    assert run(library, log).status is Status.UNRECOGNIZED


def test_an_nccl_warning_followed_by_the_same_process_carrying_on_is_a_fallback(library: Library) -> None:
    log = (
        "node1:100:100 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
        "node1:100:100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
    )
    assert run(library, log).status is Status.CLEAN


def test_an_error_the_same_rank_trained_on_past_was_handled(library: Library) -> None:
    log = (
        "[rank3]: step 10 loss 1.0\n"
        "[rank3]: ERROR: could not reach the metrics server\n"
        "[rank3]: step 11 loss 0.9\n"
        "[rank3]: step 12 loss 0.8\n"
    )
    assert run(library, log).status is Status.CLEAN


def test_another_rank_finishing_its_step_does_not_excuse_an_error(library: Library) -> None:
    log = (
        "[rank3]: step 10 loss 1.0\n"
        "[rank3]: ERROR: could not reach the parameter server\n"
        "[rank5]: step 10 loss 0.9\n"
        "[rank5]: step 11 loss 0.8\n"
    )
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2


def test_an_error_record_the_process_carried_on_from_is_survived(library: Library) -> None:
    log = (
        "E0000 00:00:1737920191.807767 1997283 cuda_dnn.cc:8310] Unable to register cuDNN factory\n"
        "Some weights were not initialized from the model checkpoint\n"
        "You should probably TRAIN this model on a down-stream task\n"
        "Loading dataset from disk\n"
        "Tokenizing 20000 examples\n"
        "Starting the first epoch\n"
    )
    assert run(library, log).status is Status.CLEAN


def test_the_same_error_record_with_a_traceback_after_it_is_not_survived(library: Library) -> None:
    log = (
        "E0000 00:00:1737920191.807767 1997283 cuda_dnn.cc:8310] Unable to register cuDNN factory\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "Loading dataset from disk\nTokenizing\nStarting\nStill starting\nAlmost\n"
    )
    assert run(library, log).status is Status.UNRECOGNIZED


def test_a_header_that_introduces_a_traceback_gives_way_to_its_exception(library: Library) -> None:
    log = (
        "2023-07-01 16:41:05,669 - ERROR: Exception occurred during the run:\n"
        "Traceback (most recent call last):\n"
        '  File "/site/torch/serialization.py", line 441, in save\n'
        "RuntimeError: [enforce fail at inline_container.cc:471] file write failed\n"
    )
    assert line_of(run(library, log)) == 4


def test_a_bare_exception_is_stated_on_the_next_line(library: Library) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "AssertionError: \n"
        "The NVIDIA driver on your system is too old (found version 9000).\n"
    )
    d = run(library, log)
    assert line_of(d) == 4 and d.initiating and "too old" in d.initiating.text


def test_an_exception_with_words_before_its_colon_stays(library: Library) -> None:
    log = "RuntimeError: Error(s) in loading state_dict for Model:\n\tsize mismatch for conv.weight\n"
    assert line_of(run(library, log)) == 1


def test_a_statement_just_before_an_unknown_traceback_leads_it(library: Library) -> None:
    log = (
        "**ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shm.**\n"
        "Traceback (most recent call last):\n"
        '  File "/site/torch/utils/data/dataloader.py", line 990, in _try_get_data\n'
        "RuntimeError: DataLoader worker (pid 7579) is killed by signal: Bus error.\n"
    )
    assert line_of(run(library, log)) == 1


def test_a_long_run_of_statements_before_a_traceback_is_led_by_its_first(library: Library) -> None:
    said = "".join(f"!!!! gemm call went wrong. (m: {64 * i}, k: 64, error: 13)\n" for i in range(1, 14))
    traceback = 'Traceback (most recent call last):\n  File "run.py", line 9, in <module>\n    main()\n'
    assert line_of(run(library, "step 1 loss 2.0\n" + said + traceback)) == 2
    # a code that is a metric's value is none
    assert run(library, "step 1 loss 2.0\ntrain error: 0.13 (best)\n").status is Status.CLEAN


def test_kernel_assertions_before_a_traceback_lead_it(library: Library) -> None:
    assertion = "Loss.cu:108: kernel: block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n` failed."
    log = (
        "".join(assertion.format(t=t) + "\n" for t in range(3))
        + "Traceback (most recent call last):\n"
        + '  File "train.py", line 379, in train_model\n'
        + "RuntimeError: CUDA error: device-side assert triggered\n"
    )
    assert line_of(run(library, log)) == 1


def test_a_wrapped_message_is_named_by_its_known_half(library: Library) -> None:
    log = (
        "  what():  [PG 0 Rank 2] Process group watchdog thread terminated with exception:\n"
        " [Rank 2] peer-gone\n"
    )
    assert line_of(run(library, log)) == 2


def test_a_scheduler_verdict_after_a_kill_explains_it(library: Library) -> None:
    log = "[Rank 0] peer-gone\nslurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup.\n"
    assert line_of(run(library, log)) == 2


def test_an_exception_just_above_a_kill_verdict_is_how_a_process_met_the_kill(library: Library) -> None:
    raised = "sweep.errors.SweepError: ('jobs did not finish', [job-7])\n"
    verdict = "slurmstepd: error: Detected 3 oom-kill event(s) in StepId=88.batch cgroup.\n"
    assert line_of(run(library, "step 1 loss 2.0\n" + raised + verdict)) == 3
    # far above the verdict, the exception is a failure of its own; srun's words are no reaction
    far = "".join(f"cleanup note {i}\n" for i in range(125))
    assert line_of(run(library, "step 1 loss 2.0\n" + raised + far + verdict)) == 2
    srun = "srun: error: Node failure on node-17\n"
    lost = "slurmstepd: error: *** STEP 88.0 ON n3 CANCELLED AT 2031-01-01T00:00 DUE TO NODE FAILURE ***\n"
    assert line_of(run(library, "step 1 loss 2.0\n" + srun + lost)) == 2


def test_a_death_after_a_downstream_symptom_is_its_consequence(library: Library) -> None:
    log = (
        "[Rank 0] peer-gone\nERROR:launcher:failed (exitcode: -6) local_rank: 0 (pid: 12) of binary: python\n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == "peer-gone"


def test_the_launchers_report_of_a_death_beats_its_cleanup(library: Library, tmp_path) -> None:
    lib = build_library(
        tmp_path,
        [
            signature_doc(
                "cleanup", role="wrapper", fingerprints=[{"regex": r"Sending process \d+ closing"}]
            ),
            signature_doc(
                "child-failed", role="wrapper", fingerprints=[{"regex": r"failed \(exitcode: -?\d+\)"}]
            ),
        ],
    )
    log = (
        "W0629 00:06:21 1 api.py:851] Sending process 29735 closing signal SIGTERM\n"
        "E0629 00:06:24 1 api.py:826] failed (exitcode: -9) local_rank: 2 (pid: 29736) of binary: python\n"
    )
    assert line_of(run(lib, log)) == 2


def test_generic_errors_repeated_on_many_ranks_are_one_finding(library: Library) -> None:
    log = "".join(f"[rank{r}]: ERROR: the dataset shard is missing\n" for r in (4, 1, 7))
    d = run(library, log)
    assert d.initiating and d.initiating.rank == 4
    assert d.downstream and d.downstream[0].count == 2 and d.downstream[0].ranks == (1, 7)


def test_a_known_initiating_signature_still_beats_an_earlier_generic_record(tmp_path) -> None:
    lib = build_library(tmp_path, [signature_doc("kernel-fault")])
    d = run(lib, "ERROR: metrics upload failed\nkernel-fault happened\n")
    assert d.status is Status.FAILURE and d.signature and d.signature.id == "kernel-fault"


def test_a_progress_bar_redrawn_as_the_process_exits_is_no_progress(library: Library) -> None:
    log = (
        "Epoch 1:  45%|####5     | 100/220 [00:10<00:12,  9.80it/s]\n"
        "ERROR: the batch could not be collated\n"
        "Epoch 1:  45%|####5     | 100/220 [00:11<00:12,  9.10it/s]\n"
        "Validation:  45%|####5     | 100/220 [00:11<00:12,  9.10it/s]\n"
    )
    assert run(library, log).status is Status.UNRECOGNIZED


def test_an_untagged_error_the_whole_job_trained_past_was_handled(library: Library) -> None:
    log = (
        "[rank0]: step 10 | loss 1.0\n"
        "wandb: ERROR Failed to sample metric: Not Supported\n"
        "[rank0]: step 11 | loss 0.9\n"
        "[rank1]: step 12 | loss 0.9\n"
        "[rank0]: step 13 | loss 0.8\n"
    )
    assert run(library, log).status is Status.CLEAN


def test_an_error_the_job_moved_only_one_step_past_still_counts(library: Library) -> None:
    log = "[rank0]: step 10 | loss 1.0\n[rank3]: ERROR: shard 7 is missing\n[rank0]: step 11 | loss 0.9\n"
    assert run(library, log).status is Status.UNRECOGNIZED


def test_the_failure_at_the_end_is_found_past_a_thousand_handled_records(library: Library) -> None:
    pad = "x" * 2000  # a few MB: the log spans several chunks, as a real one does
    handled = "".join(f"step {n} | loss 1.0 | {pad}\nERROR: metrics push timed out\n" for n in range(1200))
    fatal = "ERROR: the dataset mount went away, giving up\n"
    d = run(library, handled + "step 1200 | loss 1.0\nstep 1201 | loss 1.0\n" + fatal)
    assert d.status is Status.UNRECOGNIZED and d.initiating and "mount went away" in d.initiating.text


@pytest.mark.parametrize(
    "line",
    [
        "WARNING:torchdynamo.convert_frame:torchdynamo hit recompilation cache limit (64) for 'forward'",
        "[WARNING] torch._dynamo hit config.cache_size_limit (64)",
        "recompile_limit reached with one_graph=False",
    ],
)
def test_a_limit_hit_in_words_is_a_degradation(library: Library, line: str) -> None:
    d = run(library, f"step 1 loss 2.0\n{line}\nstep 2 loss 1.9\nstep 3 loss 1.8\n")
    assert d.status is Status.DEGRADED and line_of(d) == 2


def test_asyncios_unretrieved_task_exception_states_a_failure(library: Library) -> None:
    log = (
        "Task exception was never retrieved\nfuture: <Task finished name='T' coro=<loop()> exception=Boom>\n"
    )
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2


def test_an_exception_being_handled_when_another_was_raised_does_not_lead(library: Library) -> None:
    task = "future: <Task finished name='T' coro=<loop()> exception=Triton Error [CUDA]: invalid argument>\n"
    traceback = (
        'Traceback (most recent call last):\n  File "<string>", line 21, in _fwd\nKeyError: (2, 0)\n\n'
    )
    chain = "During handling of the above exception, another exception occurred:\n\n"
    quiet = "router: shutting down\n" * 8
    assert line_of(run(library, task + quiet + traceback + chain)) == 1
    assert line_of(run(library, task + quiet + traceback)) == 12  # an exception that ends a traceback leads


def test_a_launcher_that_received_a_signal_and_exits_reports_a_death_at_any_level(library: Library) -> None:
    cleanup = "[2025-08-15 08:42:10,745] [INFO] [launch.py:319:sigkill_handler] Sending process 1 closing\n"
    signal = "[2025-08-15 08:42:11,420] [INFO] [launch.py:328:f] Main process received SIGINT, exiting\n"
    d = run(library, cleanup + signal)
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2
    informed = "[2025-08-15 08:42:11,420] [INFO] [launch.py:328:sigkill_handler] received SIGINT\n"
    assert run(library, cleanup + informed).status is not Status.UNRECOGNIZED  # no exit stated


@pytest.mark.parametrize(
    "line",
    [
        "rpc.RemoteCallError(KeyError): Trainer.step() on worker 3",
        "TaskFailedError(torch.cuda.OutOfMemoryError): actor Policy[rank=1] ran out",
    ],
)
def test_a_wrapper_naming_the_exception_it_carries_is_an_exception_line(library: Library, line: str) -> None:
    # the carried class in parentheses (Ray's `RayTaskError(OutOfMemoryError): ...`), frames below it
    log = f'{line}\n  File "/srv/app/worker.py", line 12, in step\n    out = self.model(batch)\n'
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 1


def test_a_launchers_verdict_that_a_process_was_aborted_is_a_death_in_prose(library: Library) -> None:
    d = run(library, "job started\nsupervisor: 2 of 8 worker processes were aborted; see their logs\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2
    # an aborted request, download or transaction is no process's death
    assert run(library, "GET /health was aborted by the client\nstep 1 loss 0.3\n").status is Status.CLEAN
