"""A log's last words (signatures/lastwords.py, lastlines.py): when no line states a failure by a
known shape, the line near the end that says in plain words that something failed is named.

The library here knows one made-up failure, so every line below is found (or not) by the last
words alone. The wording is invented, in shapes the corpus does not use.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signatures import Diagnosis, Source, Status, diagnose
from signatures.lastlines import TAIL_LINES, keep_last, keep_last_lines
from signatures.lastwords import states_failure
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc

START = "".join(f"2031-05-0{1 + i % 8} 09:1{i % 10}:00 node-a trainer booting part {i}\n" for i in range(6))


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.out", text)], library=library)


def stated(library: Library, text: str) -> str | None:
    d = run(library, text)
    if d.status is Status.CLEAN:
        return None
    assert d.status is Status.UNRECOGNIZED, d.why
    assert d.initiating is not None
    return d.initiating.text


@pytest.mark.parametrize(
    "line",
    [
        "supervisor: lost contact with worker node-7, giving up",
        "gang scheduler: peer group 3 did not answer in time; the session is dead",
        "Fabric manager reports link 4 unreachable",
        "mover couldn't push shard 12 to the bucket",
        "barrier at epoch 2 timed out after 900 s",
        "EZ0042: 2031-05-09-10:00:00.000 The handshake with the remote card times out.",
        "[2031-05-09 10:00:00] [err] [4411] [pool.cc:7] channel pool create failed, code 3",
    ],
)
def test_a_log_that_ends_in_a_failure_stated_in_words_is_unrecognized_not_clean(
    library: Library, line: str
) -> None:
    assert stated(library, START + line + "\n") == line


@pytest.mark.parametrize(
    "line",
    [
        "validation finished: no errors, 0 failed",
        "if the link fails the job is retried by the scheduler",
        "errors: 0",
        "checkpoint index not found, using an empty one",
        "tokenizer cache missing: falling back to the slow tokenizer",
        "2031-05-09 10:00:00 INFO could not find the optional plugin",
        "node-a:11:12 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v9 symbol.",
    ],
)
def test_negations_conditions_workarounds_and_info_records_state_nothing(library: Library, line: str) -> None:
    assert stated(library, START + line + "\n") is None


def test_a_failure_the_text_went_on_from_is_no_last_word(library: Library) -> None:
    went_on = "".join(f"2031-05-09 10:0{i}:00 node-a eval batch {i} done\n" for i in range(6))
    assert stated(library, START + "mover couldn't push shard 12 to the bucket\n" + went_on) is None


def test_a_failure_before_the_last_progress_line_is_no_last_word(library: Library) -> None:
    progress = "".join(f"step {100 + i} loss 2.{i} 3.1 it/s\n" for i in range(4))
    assert stated(library, START + "mover couldn't push shard 12 to the bucket\n" + progress) is None


def test_a_run_whose_progress_reached_its_total_finished(library: Library) -> None:
    progress = "".join(f"[train] iter: {n}/3000, loss: 0.2{n % 7}\n" for n in (2980, 2990, 3000))
    summary = "no count rule for <class 'Gate'>; it could not be counted\n"
    assert stated(library, START + progress + summary) is None
    unfinished = progress.replace("3000/3000", "2995/3000")
    assert stated(library, START + unfinished + summary) is not None
    # the wrap-up after the last step can still fail: an error code's record says so
    coded = "QX0042: 2031-05-09-10:00:00.000 flush of the device queue failed\n"
    assert stated(library, START + progress + coded) == coded.rstrip("\n")


def test_a_report_printed_again_word_for_word_is_no_output_the_text_went_on_with(library: Library) -> None:
    report = "QX0042: sync of the card failed, result 7\n  (function cardSync)\nQX0042: Inner Error!\n"
    report += "[W card.cpp:3] Warning: card warning, code 7.\n"
    assert stated(library, START + report * 3) == report.splitlines()[0]


def test_a_log_that_ends_in_warnings_alone_is_clean(library: Library) -> None:
    text = START + "2031-05-09 10:00:00 WARNING pool.py:9 -- worker 3 unreachable, will be re-scheduled\n"
    text += "Additional detail: connect error from peer 10.0.0.3\n"  # the warning's headless detail
    assert stated(library, text) is None


def test_a_warning_that_a_failure_follows_is_the_earliest_statement(library: Library) -> None:
    warning = "2031-05-09 10:00:00 WARNING monitor.py:3 -- node 10.0.0.3 missed its heartbeats and is dead"
    error = "2031-05-09 10:00:01 agent.py:8 -- the trainer actor exited unexpectedly"
    assert stated(library, f"{START}{warning}\n{error}\n\tactor_id: 77aa\n\tpid: 31\n") == warning


def test_a_reports_list_items_and_rules_are_no_ordinary_output(library: Library) -> None:
    box = (
        "launcher could not reach host node-9\n"
        "-------------------------------------\n"
        "The launcher stopped. This is usually caused by:\n"
        "* a missing route to the host\n"
        "* a firewall on the node\n"
        "* the daemon not being installed\n"
        "* a wrong host name\n"
        "* an expired credential\n"
        "-------------------------------------\n"
    )
    assert stated(library, START + box) == "launcher could not reach host node-9"


def test_a_known_failure_keeps_the_lead_over_last_words(library: Library) -> None:
    d = run(library, START + "kernel-fault happened\nthe uploader failed\n")
    assert d.signature is not None and d.signature.id == "kernel-fault"


@pytest.mark.parametrize(
    ("message", "states"),
    [
        ("the link to node 3 was lost", True),
        ("[ERROR]           ^^^^^^^^^^^^^^", False),
        ("without error", False),
        ("may time out under load", False),
        ("Unable to connect to the endpoint", True),
        ("Error resolving handler 'pkg.make_loader'", True),  # a message that opens with the word
        ("Error rate: 0.031", False),
        ("error: 0.12 acc: 0.9", False),
        ("worker 0 crashed in step 12", True),  # an index, not a count of none
        ("done: 12 passed, 0 crashed", False),
        ("link failed, trying again in 5 s", False),
        ("Exiting due to exception: sizes 4 and 5 differ", True),  # the cause of an ending
        ("the loop stopped with an unhandled exception", True),
        ("finished with error rate 0.2", False),
        ("Exception in main training loop: out of memory to allocate 205520896 bytes", True),
        ("Exception ignored in: <function _releaseLock at 0x7f>", False),  # Python's note on a handled one
        ("Exception handling is configured per layer", False),
    ],
)
def test_states_failure(message: str, states: bool) -> None:
    assert states_failure(message) is states


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="abc xyz012", max_size=12), min_size=1, max_size=500),
    cuts=st.lists(st.integers(min_value=1, max_value=499), max_size=6),
)
def test_the_kept_last_lines_are_the_texts_last_lines_however_it_is_cut(
    lines: list[str], cuts: list[int]
) -> None:
    text = "".join(x + "\n" for x in lines).encode()
    bounds = sorted({0, len(lines), *(c for c in cuts if c < len(lines))})
    kept: list[tuple[int, str]] = []
    for a, b in itertools.pairwise(bounds):
        chunk = "".join(x + "\n" for x in lines[a:b]).encode()
        kept = keep_last(kept, chunk, b)
    want = [(n, x) for n, x in enumerate(lines, 1)][-TAIL_LINES:]
    assert kept == want, text[:80]


def test_later_lines_replace_kept_lines_of_the_same_numbers() -> None:
    kept = [(1, "a"), (2, "b"), (3, "partial")]
    assert keep_last_lines(kept, [(3, "partial line"), (4, "d")]) == [
        (1, "a"),
        (2, "b"),
        (3, "partial line"),
        (4, "d"),
    ]


def test_the_source_line_under_a_traceback_frame_is_code_not_a_statement(library: Library) -> None:
    frame = '  File "/opt/lib/runner.py", line 12, in launch\n'
    code = "    return spawn(cmd, timeout=timeout, check=True,\n"
    assert stated(library, START + frame + code) is None
    # the same words as a line of their own state a failure
    said = "    spawn of the helper timed out after 30 s\n"
    assert stated(library, START + said) == said.rstrip("\n")


def test_a_text_that_ends_inside_a_traceback_failed_where_the_traceback_opens(library: Library) -> None:
    opening = "[2031-05-09 10:00:00 W3] Dispatcher hit an exception: Traceback (most recent call last):\n"
    # its frames, their indentation lost in the paste
    frames = 'File "/opt/lib/dispatch.py", line 9, in serve\nsetup_groups(size=self.size)\n'
    assert stated(library, START + opening + frames) == opening.rstrip("\n")
    # the traceback goes on to a line of ordinary output: it did not end the text, nothing is said
    assert stated(library, START + opening + frames + "dispatcher 2 ready, serving on port 7001\n") is None


def test_a_warning_above_a_traceback_the_text_ends_inside_says_what_the_process_died_of(
    library: Library,
) -> None:
    warning = (
        "[rank2]:[W303 08:23:41.025 socket.cpp:487] [c10d] waitForInput: socket timed out after 600000ms"
    )
    frames = '[rank2]:   File "/srv/train.py", line 111, in step\n[rank2]:     ) = next(loader)\n'
    carets = "[rank2]:         ^^^^^^^^^^^^\n"  # Python 3.11+ marks the failing expression
    title = "[rank2]: Traceback (most recent call last):\n"
    assert stated(library, f"{START}{warning}\n{title}{frames}{carets}") == warning
    # the same warning with the traceback finished and the text going on was survived
    done = f"{title}{frames}[rank2]: StopIteration\n[rank2]: step 12 loss 0.3\n[rank2]: step 13 loss 0.3\n"
    assert stated(library, f"{START}{warning}\n{done}") is None


def test_an_inference_about_a_failure_states_none(library: Library) -> None:
    assert states_failure("Received a signal from a child. It usually means the child failed.") is False
    assert states_failure("the child failed with exit code 3") is True


def test_what_a_text_says_in_words_before_a_bare_death_states_why_it_died(library: Library) -> None:
    said = "Device fault on card-3 (handle 0x64ff) reason :Card Hang\n"
    d = run(library, START + said * 3 + "Aborted (core dumped)\n")
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 7
    # the words of a launcher's box around a death say no more than the death
    rule = "-" * 60 + "\n"
    box = "Main job  terminated normally, but 1 process returned\na non-zero exit code. The job is aborted.\n"
    died = "Aborted (core dumped)\n"
    d = run(library, START + rule + box + rule + died)
    assert d.initiating and d.initiating.text == died.rstrip("\n")
    d = run(library, START + box + rule + died)  # a paste that starts inside the box
    assert d.initiating and d.initiating.text == died.rstrip("\n")


def test_a_death_a_launcher_logs_as_an_error_gives_way_to_what_was_said_before_it(library: Library) -> None:
    said = "Error resolving handler 'pkg.make_loader' for key loaders.train\n"
    advice = "Set the environment variable PKG_FULL_ERROR=1 for a complete stack trace.\n"
    death = "ERROR:runner.launch:Worker 0 crashed with exit code 1.\n"
    tail = "Waiting up to 30 seconds for the other workers to stop.\nWorker 0 (PID 4411) exited with code 1\n"
    assert stated(library, START + said + advice + death + tail) == said.rstrip("\n")
    # with nothing said before it, the launcher's record names the death
    assert stated(library, START + death + tail) == death.rstrip("\n")


def test_a_failure_retried_in_vain_is_stated_by_its_first_try(library: Library) -> None:
    tries = "upload failed, trying again\n" * 2
    given_up = "upload failed 3 times, giving up\n"
    d = run(library, START + tries + given_up)
    assert d.initiating and d.initiating.line == 7
    # a retry that is not followed by its subject failing again is worked around
    assert stated(library, START + tries) is None


def test_an_ending_that_went_as_meant_states_no_failure() -> None:
    assert states_failure("Primary job  terminated normally, but 1 process returned") is False
    assert states_failure("worker 3 terminated by signal 9") is True


def test_a_text_that_ends_as_its_tracebacks_begin_failed_where_the_first_opens(library: Library) -> None:
    title = "Traceback (most recent call last):\n"
    frame = '  File "/opt/run.py", line 68, in <module>\n'
    text = START + title + frame + title + frame + "    main()\n" + title
    d = run(library, text)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 7


def test_nccls_unwinding_with_no_warn_above_it_states_the_failed_call(library: Library) -> None:
    unwind = "".join(f"gpu-c:4707:5232 [2] NCCL INFO transport/shm.cc:{n} -> 2\n" for n in (101, 30, 76))
    d = run(library, START + unwind)
    assert d.status is Status.UNRECOGNIZED and d.initiating and d.initiating.line == 7
    # with the WARN above it, the WARN says what failed; the unwinding states nothing more
    warn = "gpu-c:4707:5232 [2] include/shm.h:28 NCCL WARN Unable to allocate shared memory\n"
    d = run(library, START + warn + unwind)
    assert d.initiating and d.initiating.line == 7 and "NCCL WARN" in d.initiating.text
