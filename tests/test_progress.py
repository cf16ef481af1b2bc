"""Training progress and what it says about an error (signatures/progress.py). One test per rule."""

from __future__ import annotations

from signatures.progress import WHOLE, Progress, progress_lines


def _chunk(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def test_a_log_up_to_whole_bytes_is_read_whole_and_a_larger_chunk_at_its_end() -> None:
    lines = [f"[Step {i}/9000] Loss: 0.5" if i % 2 else "x" * 120 for i in range(1, 9001)]
    small = _chunk(lines[:2000])
    assert len(small) <= WHOLE
    assert len(progress_lines(small, 2000)) == 1000  # a start-up error is followed by all of them
    large = _chunk(lines)
    assert len(large) > WHOLE
    found = progress_lines(large, len(lines))
    assert found and all(lines[n - 1] == text and n > 8990 for n, text in found)


def test_a_small_chunk_is_read_whole() -> None:
    lines = ["boot", "step 1 loss 0.9", "x", "step 2 loss 0.8"]
    assert progress_lines(_chunk(lines), 4) == [(2, "step 1 loss 0.9"), (4, "step 2 loss 0.8")]


def test_steps_after_a_start_up_error_show_the_job_went_on() -> None:
    steps = [(n, f"[Rank 0] step={n - 10}, skipped=0") for n in range(11, 16)]
    progress = Progress([(0, steps)])
    assert progress.went_on(0, 2, None)  # an untagged error on line 2, steps 1..5 after it
    assert not Progress([(0, steps[:2])]).went_on(0, 2, None)  # one step later proves nothing


def test_a_step_counter_that_started_again_is_read_from_its_new_start() -> None:
    old_run = [(n, f"[Rank 0] step={9000 + n}") for n in range(1, 4)]
    new_run = [(n, f"[Rank 0] step={n - 100}") for n in range(101, 106)]
    assert Progress([(0, old_run + new_run)]).went_on(0, 50, None)
    stalled = [(n, f"[Rank 0] step={n - 100}") for n in range(101, 103)]
    assert not Progress([(0, old_run + stalled)]).went_on(0, 50, None)


def test_a_summary_printed_at_exit_is_no_progress() -> None:
    assert progress_lines(b"wandb:   train/global_step 260\nwandb:          train/loss 1.4358\n", 2) == []


def test_an_untagged_error_goes_on_with_the_untagged_stream_after_it() -> None:
    # a server's untagged throughput lines; one worker's rank tag glued to a progress bar earlier
    glued = (3, "Capturing CUDA graph shapes: 66/67 [00:37<00:00, 1.98it/s](VllmWorker rank=1 pid=7) INFO")
    rates = [(n, f"INFO Engine 000: Avg prompt throughput: {n}.0 tokens/s") for n in range(20, 26)]
    assert Progress([(0, [glued, *rates])]).went_on(0, 10, None)
    # when the progress after it carries ranks, an untagged line's own process is unknown
    ranked = [(n, f"[rank{n % 2}]: 12.{n} it/s") for n in range(20, 26)]
    assert not Progress([(0, [glued, *ranked])]).went_on(0, 10, None)


def test_a_bar_of_setting_up_is_no_training_progress() -> None:
    # a process downloads and loads while another has already failed
    setup = b"Downloading shards: 100%|##########| 4/4 [00:00<00:00, 579.52it/s]\n"
    assert (
        progress_lines(setup + b"Loading checkpoint shards: 50%|#  | 1/2 [00:01<00:01, 1.2s/it]\n", 2) == []
    )
    training = b"Epoch 1: 100%|##########| 4/4 [00:00<00:00, 5.52it/s, loss=0.41]\n"
    assert progress_lines(training, 1) != []
