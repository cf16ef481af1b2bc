"""Reading traceback structure above a hit (signatures/tracebacks.py)."""

from __future__ import annotations

from signatures.tracebacks import exception_name, is_advice, read_traceback, recovered

TB = [
    "Traceback (most recent call last):",
    '  File "/site/torch/_inductor/graph.py", line 194, in call_function',
    "    return lowerings[target](*args, **kwargs)",
    '  File "/site/torch/_inductor/ir.py", line 1570, in unwrap_storage',
    "    assert isinstance(x, (Buffer, ReinterpretView)), x",
]


def test_exception_after_frames_is_in_a_traceback_with_its_frames() -> None:
    view = read_traceback("AssertionError: View(", TB)
    assert view.in_traceback and not view.echo
    assert view.frames == ("/site/torch/_inductor/graph.py", "/site/torch/_inductor/ir.py")
    assert (
        view.assert_offset == 1 and view.assert_text is not None and "assert isinstance" in view.assert_text
    )


def test_source_echo_and_frame_lines_are_recognised() -> None:
    assert read_traceback("    assert isinstance(x, (Buffer, ReinterpretView)), x", TB[:4]).echo
    assert read_traceback('  File "/x.py", line 3, in f', TB[:1]).frame


def test_a_wrapper_head_between_frames_and_inner_error_is_skipped() -> None:
    before = [*TB, "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"]
    view = read_traceback("AssertionError: ", before)
    assert view.in_traceback and view.assert_offset == 2


def test_a_lone_exception_line_is_not_in_a_traceback() -> None:
    view = read_traceback("ValueError: bad", ["step 1", "step 2"])
    assert not view.in_traceback and view.frames == ()


def test_exception_ignored_is_flagged() -> None:
    before = [
        "Exception ignored in: <function X.__del__ at 0x1>",
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in __del__',
    ]
    assert read_traceback("AttributeError: 'X' object has no attribute 'y'", before).ignored


def test_names_advice_and_recovery() -> None:
    assert exception_name("torch.OutOfMemoryError: CUDA out of memory") == "OutOfMemoryError"
    assert exception_name("UserWarning: something") is None
    assert is_advice("For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
    assert is_advice("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    assert not is_advice("RuntimeError: CUDA error: device-side assert triggered")
    assert recovered(["Retrying (Retry(total=4, connect=None)) after connection broken"])
    assert not recovered(["step 5 loss 0.1"])


def test_an_indented_traceback_keeps_its_exception_line_as_the_message() -> None:
    # torchrun's failure table indents the whole worker traceback: frames at 4, the error at 2.
    before = [
        "  traceback : Traceback (most recent call last):",
        '    File "/x/bug.py", line 16, in main',
        "      dist.barrier()",
        "             ^^^^^^",
    ]
    view = read_traceback("  RuntimeError: Detected mismatch between collectives on ranks.", before)
    assert not view.echo and view.in_traceback
    assert read_traceback("        barrier_again()", before).echo
