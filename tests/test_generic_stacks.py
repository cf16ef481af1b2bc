"""More failures no signature knows (signatures/shapes.py, episodes.py, nonfinite.py): a FATAL
record over a native stack, an exception's repr, a signal a process says it received, and a
non-finite metric the run came back from. Made-up lines, negatives beside positives.
"""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, Status, diagnose
from signatures.candidate import TIER_BENIGN
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc("chatty", role="benign"),
            signature_doc("stuck", role="initiating", fingerprints=[{"regex": r"queues have waited \d+ s"}]),
            signature_doc("step-carrier", role="wrapper", fingerprints=[{"regex": r"CompileStepFailed: "}]),
        ],
    )


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.log", text)], library=library)


def line_of(d: Diagnosis) -> int | None:
    return d.initiating.line if d.initiating else None


ORDINARY = "".join(f"worker: loaded block {n}\n" for n in range(8))


@pytest.mark.parametrize(
    "stack",
    [
        "*** Check failure stack trace: ***\n    @     0x7f4c5091c27d  google::LogMessage::Fail()\n",
        "==== backtrace (tid:  4411) ====\n 0 0x0000000000047798 ucs_fatal_error_message()  ???:0\n",
        "#0  0x00007f3a1c2d in raise () from /lib/libc.so.6\n#1  0x00007f3a1c2e in abort ()\n",
    ],
)
def test_a_fatal_record_over_a_native_stack_states_the_failure(library: Library, stack: str) -> None:
    record = "F0307 11:02:03.000100  4411 channel.cc:88] lost the parameter shard server\n"
    d = run(library, "starting\n" + record + stack + ORDINARY)
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2


def test_an_error_record_followed_by_ordinary_output_was_survived(library: Library) -> None:
    # the same record with no stack under it, and the process printing on: carried on from it
    record = "E0307 11:02:03.000100  4411 channel.cc:88] lost the parameter shard server\n"
    assert run(library, "starting\n" + record + ORDINARY).status is Status.CLEAN


def test_a_fatal_record_is_a_failure_without_a_check(library: Library) -> None:
    d = run(library, "boot\nF1201 08:00:00.5 91 pool.cc:12] arena exhausted, giving up\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2
    info = "boot\nI1201 08:00:00.5 91 pool.cc:12] arena exhausted, resizing\n"
    assert run(library, info).status is Status.CLEAN


@pytest.mark.parametrize(
    "line",
    [
        "KeyError('optimizer.lr')",
        "ConfigCompositionException(\"Could not override 'trainer.devices'\")",
        "mypkg.errors.ShardError('shard 3 of 8 is empty')",
    ],
)
def test_an_exceptions_repr_printed_alone_states_a_failure(library: Library, line: str) -> None:
    d = run(library, f"Error executing job with overrides: []\n{line}\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2


@pytest.mark.parametrize(
    "line",
    [
        "retrying after KeyError('optimizer.lr') on attempt 1",  # mid-sentence: the retry handles it
        "handlers = {ValueError(): skip}",
        "class ShardError(Exception):",
    ],
)
def test_an_exception_named_in_other_text_is_no_repr_line(library: Library, line: str) -> None:
    assert run(library, f"step 1 loss 0.5\n{line}\nstep 2 loss 0.4\n").status is Status.CLEAN


def test_a_message_that_ends_in_the_signal_it_received_is_a_death(library: Library) -> None:
    d = run(library, "step 10 loss 0.3\n[rank: 3] Received SIGHUP: 1\n")
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 2 and d.initiating and d.initiating.rank == 3
    # a handler installed for it, or the signal logged at info level with no exit, is none
    assert run(library, "step 10 loss 0.3\nRegistered handler for SIGHUP: 1\n").status is Status.CLEAN
    quiet = "[2025-01-02 03:04:05,006] [INFO] [agent.py:9:f] Received SIGHUP: 1\n"
    assert run(library, "step 10 loss 0.3\n" + quiet).status is Status.CLEAN


def test_a_non_finite_metric_printed_finite_again_was_recovered(library: Library) -> None:
    # a scaler's first overflowed steps: the gradient norm comes back finite
    log = (
        "it [1][50/900] lr 0.1, grad_norm: nan, loss_x: 1.2\n"
        "it [1][100/900] lr 0.1, grad_norm: 4.51, loss_x: 1.1\n"
    )
    assert run(library, log).status is Status.CLEAN
    # a running average spoiled for a while, then reset
    spoiled = "".join(f"ep 3 it {n}: train loss nan\n" for n in range(1, 6))
    assert run(library, spoiled + "ep 4 it 1: train loss 0.912\n").status is Status.CLEAN


def test_a_metric_whose_name_goes_on_past_the_word_loss_is_read(library: Library) -> None:
    head = "2020-09-10 11:52:14,449 (trainer:831) INFO: (Step: 95400) "
    log = f"{head}duration_loss = 0.0353.\n{head}mel_loss_before = nan.\n{head}mel_loss_after = nan.\n"
    assert run(library, log).status is Status.DEGRADED
    finite = log.replace("= nan.", "= 0.41.")
    assert run(library, finite).status is Status.CLEAN


def test_a_non_finite_metric_that_stays_so_is_a_degradation(library: Library) -> None:
    spoiled = "".join(f"ep 3 it {n}: train loss nan\n" for n in range(1, 6))
    assert run(library, "ep 2 it 9: train loss 0.97\n" + spoiled).status is Status.DEGRADED
    # another metric finite is no recovery of the one that went non-finite
    log = "it 50 grad_norm: inf, lr: 0.1\nit 100 grad_norm: inf, lr: 0.1\nit 150 lr: 0.1\n"
    assert run(library, log).status is Status.DEGRADED
    # the same name printed finite by another kind of line: a training bar is no recovery of the
    # validation pass's loss
    epochs = "".join(f"Train Epoch: {n} Loss: 0.3597\nValid Epoch: {n} Loss: nan\n" for n in range(3, 7))
    assert run(library, epochs + "Train Epoch: 7 Loss: 0.3597\n").status is Status.DEGRADED
    # the same kind of line behind a logger's head left in the message is the same report
    head = "2021-11-22 01:32:34,502 - mmx - INFO - "
    mixed = (
        " Epoch [1][100/900]\tloss: 1.9, grad_norm: nan\n"
        + head
        + "Epoch [1][200/900]\tloss: 0.9, grad_norm: 3.9\n"
    )
    assert run(library, mixed).status is Status.CLEAN


def test_a_warning_whose_next_line_introduces_a_list_is_one_report_not_survived(library: Library) -> None:
    # a known failure logged as a warning, then the list it introduces: its detail, not ordinary
    # output the process went on with
    head = "[0]<stderr>:W0101 10:00:00.1 7 watch.cc:5] queues have waited 90 s on a subset of workers\n"
    listed = "[0]<stderr>:Waiting workers:\n" + "".join(f"[0]<stderr>:{n}: [queue.{n}]\n" for n in range(6))
    d = run(library, head + listed)
    assert d.signature is not None and d.signature.id == "stuck" and line_of(d) == 1
    # the same warning followed by ordinary lines was survived
    ordinary = "".join(f"[0]<stderr>:loaded block {n}\n" for n in range(6))
    assert run(library, head + ordinary).status is Status.CLEAN


def test_a_long_run_of_non_finite_lines_recovers_from_its_last_one(library: Library) -> None:
    # with no progress lines kept (a large log's sampling), only the last non-finite line sees the
    # finite value within its context; the earlier ones of the same metric recovered with it
    from signatures.engine import scan_sources
    from signatures.ranking import candidates

    spoiled = "".join(f"ep 3 it {n}: train loss nan\n" for n in range(1, 30))
    for tail, recovered in (("ep 4 it 1: train loss 0.912\n", True), ("ep 4 it 1: lr 0.1\n", False)):
        scans = scan_sources([Source.from_text("job.log", spoiled + tail)], library=library)
        cands = candidates([h for s in scans for h in s.hits], library, None)
        degraded = [c for c in cands if "non-finite-metric" in c.shapes and c.tier != TIER_BENIGN]
        assert (degraded == []) is recovered


def test_a_paste_that_lost_its_line_breaks_is_read_past_its_first_frame(library: Library) -> None:
    # a frame that goes on with the rest of the traceback on the same line: the exception in it
    # states the failure; a frame line alone, however long its path, states nothing
    pad = "x" * 150
    lost = (
        f'File "/srv/{pad}/comm.py", line 88, in broadcast  3: work = pg.broadcast(t)  '
        "3: mylib.errors.LinkError: peer 10.0.0.7 closed the bootstrap socket\n"
    )
    d = run(library, lost)
    assert d.status is Status.UNRECOGNIZED and line_of(d) == 1
    alone = f'step 3 loss 0.2\n  File "/srv/{pad}/{pad}/mylib/errors.py", line 88, in raise_link_error\n'
    assert run(library, alone).status is Status.CLEAN


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:", "BackendCompilerFailed"),
        ("mypkg.errors.ShardGone: shard 3", "ShardGone"),
        ("ValueError: bad", "ValueError"),
        ("my.module.Thing: not an exception", None),
        ("excess.Value: a field", None),
    ],
)
def test_a_class_of_an_exceptions_module_is_an_exception_by_name(line: str, name: str | None) -> None:
    from signatures.tracebacks import exception_name

    assert exception_name(line) == name


def test_a_carrier_of_an_exceptions_module_gives_way_to_the_error_it_raised(library: Library) -> None:
    head = "[2024-01-02 03:04:05,006] tool.convert: [WARNING] "
    log = (
        f"{head}Traceback (most recent call last):\n"
        f'{head}  File "/srv/build.py", line 9, in compile\n'
        f"{head}mytool.exc.CompileStepFailed: backend='fast' raised:\n"
        f"{head}FileNotFoundError: [Errno 2] No such file or directory: 'linker'\n"
    )
    d = run(library, "start\n" + log)
    assert d.initiating is not None and d.initiating.line == 5


def test_the_carried_line_keeps_its_own_strength_under_a_wrappers_signature(library: Library) -> None:
    # a wrapper's carrier ("...raised:") gives way to the error it carries on the next line; that
    # line states the failure as strongly as it did alone, so a later failure does not overtake it
    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/build.py", line 9, in compile\n'
        "mytool.exc.CompileStepFailed: backend='fast' raised:\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'linker'\n"
        "later: queues have waited 90 s on a subset of workers\n"
    )
    d = run(library, log)
    assert d.initiating is not None and d.initiating.line == 4
    assert d.signature is not None and d.signature.id == "step-carrier"


def test_a_training_tables_row_of_non_finite_values_is_a_degradation(library: Library) -> None:
    header = "     Epoch   gpu_mem       box       obj       cls    labels  img_size\n"
    bar = ": 100%|##########| 16/16 [00:23<00:00,  1.44s/it]\n"
    nan_row = "       0/2     1.86G       nan       nan       nan       113       640" + bar
    d = run(library, header + nan_row + nan_row.replace("0/2", "1/2"))
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.line == 2
    # the next epoch's row finite again: recovered
    finite = nan_row.replace("0/2", "1/2").replace("nan", "0.05")
    assert run(library, header + nan_row + finite).status is Status.CLEAN
    # one value alone, or a row without a bar, is no table of losses
    one = nan_row.replace("nan       nan       nan", "nan       0.02      0.01")
    assert run(library, header + one).status is Status.CLEAN
    assert run(library, header + nan_row.replace(bar, "\n")).status is Status.CLEAN


def test_a_failed_assertion_printed_onto_a_bar_states_the_failure(library: Library) -> None:
    line = "/Src/MPSNDArray/Kernels/MPSNDArrayGatherND.mm:256: failed assertion `Rank of updates (1)'\n"
    tracker = (
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: "
        "There appear to be 1 leaked semaphore objects to clean up at shutdown\n"
        "  warnings.warn('resource_tracker: There appear to be %d '\n"
    )
    table = (
        "      Epoch    GPU_mem   box_loss   cls_loss  Instances       Size\n"
        "       1/20         0G      2.888      30.52         22       1920: 100%|##########| 300/300"
        " [13:00<00:00,  2.60s/it]\n"
    )
    bar = "      Class     Images   Box(P      R  mAP50):   0%|          | 0/19 [00:00<?, ?it/s]"
    d = run(library, table + bar + line + tracker)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 3
    # no source location before it: a sentence that mentions one
    quoted = "epoch 1 loss 2.0\nthe failed assertion `x' is in the docs\nepoch 2 loss 1.9\n"
    assert run(library, quoted).status is Status.CLEAN


def test_a_record_headed_by_an_error_code_states_a_failure(library: Library) -> None:
    record = "EI0009: [PID: 2225827] 2025-09-24-20:59:48.119 Transport init error. Reason: link refused\n"
    solution = "[rank1]:   Solution: check the other NPUs\n"
    d = run(library, "[rank0]: step 1 loss 2.0\n[rank1]: " + record + solution + "[rank0]: step 2 loss 1.9\n")
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 2
    assert d.initiating.rank == 1
    # a warning's code, or the bare "Inner Error!" heading, states nothing by itself
    for quiet in ("W11001: [PID: 7] High-priority service started\n", "EE9999: Inner Error!\n"):
        assert run(library, "step 1 loss 2.0\n" + quiet).status is Status.CLEAN, quiet


def test_a_bare_exception_name_with_the_pastes_trailing_space_ends_its_traceback(library: Library) -> None:
    frames = 'Traceback (most recent call last):\nFile "buffer.py", line 39, in extend\nself += list(data)\n'
    d = run(library, "step 1 loss 2.0\n" + frames + "MemoryError \n")
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 5
    # a word that only ends in Error, inside a sentence, is no exception line
    assert (
        run(library, "step 1 loss 2.0\nsee MemoryError in the docs\nstep 2 loss 1.9\n").status is Status.CLEAN
    )


def test_an_mlir_diagnostic_states_a_compilers_error(library: Library) -> None:
    diag = (
        'loc("mps_subtract"("(mpsFileLoc): /Src/MPSGraphUtilities.mm":228:0)): '
        "error: input types are not broadcast compatible\n"
    )
    d = run(
        library,
        "step 1 loss 2.0\n"
        + diag
        + "LLVM ERROR: Failed to infer result type(s).\nzsh: abort      python train.py\n",
    )
    assert d.initiating and d.initiating.line == 2
    note = diag.replace("): error: ", "): note: ")
    assert run(library, "step 1 loss 2.0\n" + note + "step 2 loss 1.9\n").status is Status.CLEAN
