"""Forms of failure learned from first-sight batches 35 and later (signatures/shapes.py,
nativestacks.py, kernelasserts.py, nonfinite.py, echoes.py): a loss named by its kind or printed
by MSVC going non-finite, dmlc's fatal message over its native stack, a kernel's assertion
printed below the report it raised, a loss that exploded before it went non-finite, a bare
exception line a later traceback repeats, a TensorFlow op's failed status logged before the
exception that carries it (opfailures.py), a report of one metric per line going non-finite, a
DataLoader worker's own report of the signal that killed it, a terminal's echo of an interrupt,
an exception's words a handler printed a few lines above its traceback, a bare exception over
Python's note on a chained one.
Made-up lines, a negative beside each positive.
"""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, Status, diagnose
from signatures.library import Library
from signatures.tracebacks import exception_name
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("chatty", role="benign")])


def run(library: Library | None, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.log", text)], library=library)


def test_a_loss_named_by_its_kind_going_non_finite_is_a_degradation(library: Library) -> None:
    rows = "".join(
        f"[Epoch 0][Batch {n}99], Speed: 31.8 samples/s, CrossEntropy=12.2, SmoothL1=nan\n" for n in range(4)
    )
    d = run(library, "Start training from [Epoch 0]\n" + rows)
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.line == 2
    assert run(library, rows.replace("SmoothL1=nan", "SmoothL1=0.52")).status is Status.CLEAN
    # an evaluation metric's nan (no positives yet) is no loss
    assert run(library, rows.replace("SmoothL1=nan", "Recall=nan")).status is Status.CLEAN


def test_msvcs_printf_of_a_non_finite_loss_is_read_as_one(library: Library) -> None:
    row = " Epoch[ 1 of 1]-Minibatch[ {n}]: TrainLossPerSample =  {v}; EvalErr[0]PerSample = 0.48\n"
    log = row.format(n=1, v="5.87155566") + row.format(n=2, v="1.#QNAN000") + row.format(n=3, v="-1.#IND00")
    d = run(library, log)
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.line == 2
    assert run(library, row.format(n=1, v="5.87") + row.format(n=2, v="1.25")).status is Status.CLEAN


def test_a_metric_that_exploded_before_going_non_finite_went_wrong_at_the_explosion(library: Library) -> None:
    def log(values: list[str]) -> str:
        return "".join(f"Step: {n}, Loss: {v}\nFull step time 224.5 ms\n" for n, v in enumerate(values, 393))

    d = run(library, log(["2.40625", "2.375", "2.421875", "1.3633944e+15", "inf", "inf"]))
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.line == 7
    assert d.initiating.text == "Step: 396, Loss: 1.3633944e+15"
    # a loss that grew by less than the explosion factor went wrong where it stopped being finite
    d = run(library, log(["2.40625", "2.375", "2.421875", "9.5", "inf", "inf"]))
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.line == 9


def test_a_report_of_one_metric_per_line_went_non_finite_at_its_first_such_line(library: Library) -> None:
    def report(kl: str) -> str:
        return (
            "***** Episode 31455, Mean R = 28911.0 *****\nBeta: 6.91\nExplainedVarOld: 0.812\n"
            f"KL: {kl}\nPolicyEntropy: nan\nloss: nan\nSteps: 672\n\n"
        )

    d = run(None, report("nan"))
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.text == "KL: nan"
    d = run(None, report("0.0031"))
    assert d.initiating and d.initiating.text == "PolicyEntropy: nan"
    # a line of another form ends the report: a non-finite value above it belongs to another one
    d = run(None, "KL: nan\n***** Episode 31456 *****\nloss: nan\n")
    assert d.initiating and d.initiating.line == 3


def test_a_dataloader_workers_report_of_its_signal_is_the_death_the_main_process_reports_later() -> None:
    main = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/torch/utils/data/dataloader.py", line 779, in _try_get_data\n'
        "    data = self._data_queue.get(timeout=timeout)\n"
        "RuntimeError: DataLoader worker (pid 380) is killed by signal: Segmentation fault.\n"
    )
    worker = "ERROR: Unexpected segmentation fault encountered in worker.\n"
    d = run(None, "epoch 25 iter 300 loss 0.41\n" + worker + main)
    assert d.initiating and d.initiating.line == 2
    # without the worker's report, the main process's is the one
    d = run(None, "epoch 25 iter 300 loss 0.41\nepoch 25 iter 301 loss 0.40\n" + main)
    assert d.initiating and d.initiating.line == 6


def test_a_terminals_echo_of_an_interrupt_is_the_process_stopping(library: Library) -> None:
    log = "[11/03 06:48:25.411]: lr:4.0e-06\nstep 3 loss 2.11\n^C\n"
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 3
    # words that name the key are no interrupt; an interrupt the run trained on past was survived
    assert run(library, "Press ^C to stop the server\nstep 3 loss 2.11\n").status is Status.CLEAN
    later = "".join(f"step {n} loss 2.0\n" for n in range(4, 40))
    assert run(library, log + later).status is Status.CLEAN


def test_a_bare_exception_a_later_traceback_repeats_is_the_same_failure_printed_first(
    library: Library,
) -> None:
    traceback = (
        'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
        "    loss = criterion(logits, labels)\n"
        "ValueError: Expected input batch_size (511) to match target batch_size (23).\n"
    )
    bare = "ValueError: Expected input batch_size (79) to match target batch_size (47).\n"
    d = run(library, bare + "    return forward_call(*args, **kwargs)\n" + traceback)
    assert d.initiating and d.initiating.line == 1
    # another exception printed bare above the traceback is no copy of it
    other = "KeyError: 'labels'\n"
    d = run(library, other + "    return forward_call(*args, **kwargs)\n" + traceback)
    assert d.initiating and d.initiating.line == 6


def _op_failed(status: str, n: int) -> str:
    return (
        f"2021-08-25 22:44:22.7883{n:02d}: W tensorflow/core/framework/op_kernel.cc:1763] "
        f"OP_REQUIRES failed at whole_file_read_ops.cc:116 : {status}\n"
    )


def test_a_tensorflow_ops_failed_status_states_the_failure_raised_with_it_later(library: Library) -> None:
    missing = "Not found: data/train2014/img_{}.jpg; No such file or directory"
    ops = "".join(_op_failed(missing.format(n * 7), n) for n in range(3))
    fit = "Epoch 1/10\n" + "".join(f"loading batch {n}\n" for n in range(20))
    raised = (
        'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\n    model.fit(ds)\n'
        "tensorflow.python.framework.errors_impl.NotFoundError: 2 root error(s) found.\n"
        f"  (0) Not found:  {missing.format(318556)[11:]}\n"
    )
    d = run(library, fit + ops + raised)
    assert d.initiating and d.initiating.line == 22
    # another failure raised later: the op's status was handled, not carried up
    other = raised.replace("NotFoundError: 2 root error(s) found.", "ValueError: bad shape").splitlines()[:4]
    d = run(library, fit + ops + "\n".join(other) + "\n")
    assert d.initiating and d.initiating.text.endswith("ValueError: bad shape")
    # an input pipeline's end of sequence, each epoch, carried up by nothing
    ends = _op_failed("Out of range: End of sequence", 1)
    assert run(library, fit + ends + fit + ends + "Training finished.\n").status is Status.CLEAN


STACK = (
    "\nStack trace returned 10 entries:\n"
    "[bt] (0) /usr/local/lib/libmxnet.so(_ZN4dmlc15LogMessageFatalD1Ev+0x3c) [0x7fd3561641fc]\n"
    "[bt] (1) /usr/local/lib/libmxnet.so(_ZN5mxnet7storage5AllocEm+0x163) [0x7fd357174b93]\n"
)


def test_a_native_stack_makes_the_message_above_it_the_failure(library: Library) -> None:
    # the message in no failure words: only the stack below says it was fatal
    message = "[15:14:52] /src/tree/updater_histmaker.cc:307: fv=0.36465, hist.last=0.349512\n"
    d = run(library, "initializing trainer\n" + message + STACK)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 2
    # the same header without frames below it is words, not a stack
    words = "initializing trainer\n" + message + "\nStack trace returned 10 entries:\nepoch 1 done\n"
    assert run(library, words).status is Status.CLEAN
    # a message that is a failure by its own shape keeps its line; the header adds nothing
    raised = "mxnet.base.MXNetError: [11:41:11] src/c.h:108: cudaMalloc failed: out of memory\n"
    d = run(library, raised + STACK)
    assert d.initiating and d.initiating.line == 1 and d.initiating.text.startswith("mxnet.base")


def test_a_native_stack_is_read_inside_its_launchers_rank_tags(library: Library) -> None:
    message = "[15:14:52] /src/tree/updater_histmaker.cc:307: fv=0.36465, hist.last=0.349512\n"
    body = "initializing trainer\n" + message + STACK
    tagged = "".join(f"[rank1]: {line}\n" for line in body.splitlines())
    d = run(library, tagged)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 2
    assert d.initiating.rank == 1
    words = "initializing trainer\n" + message + "\nStack trace returned 10 entries:\nepoch 1 done\n"
    assert run(library, "".join(f"[rank1]: {line}\n" for line in words.splitlines())).status is Status.CLEAN


def _assert_below(gap: int) -> str:
    report = "THCudaCheck FAIL file=/THC/Pairwise.cu line=81 error=59 : device-side assert triggered\n"
    traceback = (
        'Traceback (most recent call last):\n  File "train.py", line 215, in train\n    optimizer.step()\n'
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at Pairwise.cu:81\n"
    )
    kernel = (
        "/pytorch/THCUNN/ClassNLLCriterion.cu:105: void cunn_kernel(float *) [with Dtype = float]: "
        "block: [0,0,0], thread: [15,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    return report + traceback + "".join(f"shutting down worker {n}\n" for n in range(gap)) + kernel


def test_a_kernels_assertion_printed_below_its_report_states_it() -> None:
    d = run(None, _assert_below(0))
    assert d.initiating and "Assertion `t >= 0" in d.initiating.text
    # far below, it is no assertion of that report's: the report states its own failure
    far = run(None, _assert_below(250))
    assert far.initiating and far.initiating.line == 1


def test_a_line_printed_above_a_traceback_that_its_exception_repeats_states_it(library: Library) -> None:
    printed = "Error allocating 147865600 bytes of device memory (out of memory). Driver report 14144 free\n"
    traceback = (
        'Traceback (most recent call last):\n  File "train.py", line 192, in <module>\n'
        "    loss = iter_train(b)\n"
        "MemoryError: Error allocating 147865600 bytes of device memory (out of memory).\n"
    )
    d = run(library, "  batch SGD\n" + printed + traceback)
    assert d.initiating and d.initiating.line == 2
    # a line above in other words is the run's own output: the exception states it
    other = run(library, "  batch SGD\nloading 147865600 bytes of data\n" + traceback)
    assert other.initiating and other.initiating.text.startswith("MemoryError")


def _died_in(frame: str) -> str:
    return (
        "05/31 01:37:05 PM param size = 1.686136MB\n"
        f'Traceback (most recent call last):\n  File "train_search.py", line 372, in {frame}\n    main()\n'
        "AttributeError: 'Structure' object has no attribute 'normal'\n"
        "05/31 01:37:08 PM epoch 0 lr 2.498816e-02\n05/31 01:37:08 PM epoch 0 epsilon_alpha 3.0e-02\n"
    )


def test_an_exception_that_ends_the_script_is_no_error_trained_past(library: Library) -> None:
    # the traceback opens in the script's module code: nothing caught it and the interpreter
    # exited; the progress lines after it are the process's stdout, flushed at exit
    d = run(library, _died_in("<module>"))
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 5
    # opening in a function, it may be a handled exception's logged traceback: trained past
    assert run(library, _died_in("main")).status is Status.CLEAN


def test_an_exception_that_quotes_a_callbacks_traceback_carries_the_one_that_ends_it(
    library: Library,
) -> None:
    carrier = "jaxlib.XlaRuntimeError: INTERNAL: CpuCallback error: Traceback (most recent call last):\n"
    quoted = '  File "train.py", line 281, in <module>\n  File "jax/core.py", line 443, in bind\n'
    outer = 'Traceback (most recent call last):\n  File "train.py", line 281, in <module>\n'
    text = (
        "global step=4034560, episodic return=1317.69\n"
        + outer
        + carrier
        + quoted
        + "ValueError: bad shape\n"
    )
    d = run(library, text)
    assert d.initiating and d.initiating.text.startswith("ValueError")
    # a bare exception name is no introduction of a ruler drawn below it
    ruled = text.replace("ValueError: bad shape\n", "KeyboardInterrupt:\n" + "-" * 20 + "\n")
    assert run(library, ruled).initiating.text == "KeyboardInterrupt:"  # type: ignore[union-attr]
    # the quoted traceback cut before its exception: the carrier is all the log says
    cut = text.replace("ValueError: bad shape\n", "")
    assert run(library, cut).initiating.line == 4  # type: ignore[union-attr]


def test_a_modules_own_error_class_ends_a_traceback(library: Library) -> None:
    log = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/usr/lib/python3.10/base64.py", line 87, in b64decode\n'
        "[rank0]:     return binascii.a2b_base64(s)\n"
        "[rank0]: binascii.Error: Incorrect padding\n"
    )
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 4
    assert d.initiating.rank == 0
    # a bare "Error: " is a message's word, not a class
    assert exception_name("Error: Incorrect padding") is None
    assert exception_name("binascii.Error: Incorrect padding") == "Error"


def test_an_exception_that_points_to_its_reason_above_gives_way_to_it(library: Library) -> None:
    warned = "[05/10 14:09:32] ppdet.utils.download WARNING: Config annotation a.json is not a file\n"
    raised = (
        'Traceback (most recent call last):\n  File "tools/train.py", line 202, in <module>\n'
        "    main()\nValueError: Dataset /d is not valid for reason above, please check again.\n"
    )
    assert run(library, warned + raised).initiating.line == 1  # type: ignore[union-attr]
    own = raised.replace(" for reason above", "")
    assert run(library, warned + own).initiating.line == 5  # type: ignore[union-attr]


def test_the_exceptions_words_printed_whole_a_few_lines_above_its_traceback_state_it(
    library: Library,
) -> None:
    handler = "<class 'RuntimeError'>\nshape '[-1, 115200]' is invalid for input of size 72000\n"
    timing = "Elapsed Time (training network) 0 m 13.94 s\n"
    raised = (
        'Traceback (most recent call last):\n  File "train.py", line 114, in forward\n'
        "    x = x.view(-1, 8* 16* 1* 30* 30)\n"
        "RuntimeError: shape '[-1, 115200]' is invalid for input of size 72000\n"
    )
    assert run(library, "1, 55,  20, 0.0516\n" + handler + timing + raised).initiating.line == 3  # type: ignore[union-attr]
    # the words after the trainer's own head, a report line between
    said = "Error during training: shape '[-1, 115200]' is invalid for input of size 72000\n"
    said += "No report written\n"
    assert run(library, "1, 55,  20, 0.0516\n" + said + raised).initiating.line == 2  # type: ignore[union-attr]
    # other words printed above are no statement of it
    other = handler.replace("is invalid for input of size 72000", "is the target shape")
    assert run(library, "1, 55,  20, 0.0516\n" + other + timing + raised).initiating.line == 8  # type: ignore[union-attr]


def test_a_bare_exception_keeps_its_line_over_pythons_note_on_a_chained_one(library: Library) -> None:
    frames = "--> 518             torch._foreach_add_(\n\n"
    note = "During handling of the above exception, another exception occurred:\n\n"
    chained = "NameError    Traceback (most recent call last)\n"
    d = run(library, frames + "KeyboardInterrupt: \n\n" + note + chained)
    assert d.initiating and d.initiating.text.startswith("KeyboardInterrupt")
    # a bare name's words on the next line state it
    d = run(library, frames + "AssertionError: \nThe NVIDIA driver on your system is too old\n")
    assert d.initiating and d.initiating.text.startswith("The NVIDIA driver")


def test_warnings_a_run_carried_on_from_are_read_latest_first() -> None:
    def warned(package: str) -> str:
        return (
            "/venv/torch_geometric/typing.py:86: UserWarning: An issue occurred while importing "
            f"'{package}'. Disabling its usage. Stacktrace: /v/{package}/_cu.so: undefined symbol: _ZN5c\n"
            f"  warnings.warn(f\"An issue occurred while importing '{package}'. \"\n"
        )

    raised = 'Traceback (most recent call last):\n  File "t.py", line 9, in <module>\n'
    raised += "RuntimeError: bad dtype\n"
    steps = "".join(f"step {n} loss 0.5\n" for n in range(5))
    d = run(None, warned("torch-scatter") + warned("torch-sparse") + steps + raised)
    assert d.initiating and d.initiating.text == "RuntimeError: bad dtype"


def test_a_statement_above_a_traceback_that_ends_in_a_wrapper_leads_it() -> None:
    # the child's own error, then the parent's CalledProcessError (a wrapper that only re-reports)
    said = "base_train.py: error: argument --fp8: ignored explicit argument 'true'\n"
    raised = (
        'Traceback (most recent call last):\n  File "train.py", line 7, in <module>\n'
        "    subprocess.run(cmd, check=True)\n"
        "subprocess.CalledProcessError: Command '['python', 'b.py']' returned non-zero exit status 2.\n"
    )
    assert run(None, said + raised).initiating.line == 1  # type: ignore[union-attr]
    # a known failure at the traceback's end states it; the statement only introduced it
    oom = raised.replace(
        "subprocess.CalledProcessError: Command '['python', 'b.py']' returned non-zero exit status 2.",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    assert run(None, said + oom).initiating.line == 5  # type: ignore[union-attr]


def test_a_loss_column_gone_non_finite_is_a_degradation(library: Library) -> None:
    # word-language-model's table: the value padded into its column ("loss   nan")
    row = "| epoch   1 |   {n}/ 2983 batches | lr 20.0000 | ms/batch 11.61 | loss   {v} | ppl      {v}\n"
    rows = "".join(row.format(n=n, v="nan") for n in (200, 400, 600))
    d = run(library, rows)
    assert d.status is Status.DEGRADED and d.initiating and d.initiating.line == 1
    assert run(library, rows.replace("nan", "5.32")).status is Status.CLEAN


def test_a_debuggers_head_naming_only_the_class_gives_way_to_the_message_below(library: Library) -> None:
    # VS Code's "Exception has occurred: RuntimeError", then the message, then the frames
    log = (
        "Exception has occurred: RuntimeError\n"
        "Expected object of scalar type Long but got scalar type Int for argument #2 'target'\n"
        '  File "train.py", line 133, in train_one_epoch\n    loss_x = criteria_x(logits_x, lbs_x)\n'
    )
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 2
    # a head with words of its own states the failure itself
    worded = log.replace("Exception has occurred: RuntimeError", "Exception has occurred in the loader: bad")
    assert run(library, worded).initiating.line == 1  # type: ignore[union-attr]
