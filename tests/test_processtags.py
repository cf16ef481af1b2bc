"""Ranks from the log's structure: process tags learned from the log, ranks a message names as its
speaker, launchers' rules around one rank's output (signatures/processtags.py, rankwords.py,
attribution.py, structure.py). The lines are made up, in shapes no launcher's list names."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.library import Library
from signatures.lines import unwrap
from signatures.processtags import learn, read_head
from tests.sigfactory import build_library, signature_doc

BOOM = "RuntimeError: kernel-fault happened"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("kernel-fault")])


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.out", text)], library=library)


def where(d: Diagnosis) -> tuple[int | None, str | None]:
    assert d.initiating is not None
    return d.initiating.rank, d.initiating.host


def chatter(tag: str, values: range, message: str = "step 10 loss 2.1") -> str:
    return "".join(f"{tag.format(v)}{message}\n" for v in values)


@pytest.mark.parametrize(
    ("tag", "rank"),
    [
        ("[proc{}] ", 5),  # a word that names a process
        ("[worker-{}]: ", 5),
        ("(TrainActor pid=9{}1, ip=10.1.2.3, rank={}) ", 5),
        ("[global_rank={}] ", 5),
        ("[{}] ", 5),  # bare: learned from several lines with several small values
        ("{:02d}| ", None),  # not a tag shape: no rank is made up
    ],
)
def test_a_process_tag_is_learned_from_the_log(library: Library, tag: str, rank: int | None) -> None:
    fmt = tag.replace("{}", "{0}")
    log = chatter(fmt, range(4)) + fmt.format(5) + BOOM + "\n"
    assert where(run(library, log))[0] == rank


def test_a_bare_index_on_one_line_only_is_no_tag(library: Library) -> None:
    assert where(run(library, f"[5] {BOOM}\n"))[0] is None
    assert where(run(library, chatter("[{}] ", range(3)) + f"[5] {BOOM}\n"))[0] == 5


def test_a_global_tag_wins_over_a_local_one_behind_any_prefix(library: Library) -> None:
    log = chatter("trainer-x/0 [local{0}]:[rank{0}]: ", range(2)) + f"trainer-x/0 [local1]:[rank9]: {BOOM}\n"
    assert where(run(library, log))[0] == 9
    only_local = chatter("trainer-x/0 [local{0}]: ", range(2)) + f"trainer-x/0 [local1]: {BOOM}\n"
    assert where(run(library, only_local + "nnodes=2\n"))[0] is None  # a local index is no rank


def test_a_bare_tag_that_repeats_on_several_hosts_or_follows_a_host_is_local(library: Library) -> None:
    log = chatter("gpu-a07: [{}] ", range(4)) + chatter("gpu-b11: [{}] ", range(4)) + f"gpu-b11: [2] {BOOM}\n"
    assert where(run(library, log)) == (None, "gpu-b11")
    one_host = chatter("gpu-a07: [{}] ", range(4)) + f"gpu-a07: [2] {BOOM}\n"
    assert where(run(library, one_host)) == (None, "gpu-a07")  # an index within a named node
    assert where(run(library, "nnodes=1\n" + one_host)) == (2, "gpu-a07")  # the only node: its rank


def test_the_host_of_a_tag_comes_from_the_same_line_elsewhere(library: Library) -> None:
    log = "(Actor pid=71, ip=10.9.8.7, rank=3) step 1\n(Actor pid=72, ip=10.9.8.6, rank=4) step 1\n"
    assert where(run(library, log + f"(Actor pid=71, ip=10.9.8.7, rank=3) {BOOM}\n")) == (3, "10.9.8.7")


def test_an_untagged_traceback_line_is_the_nearest_tagged_process_above(library: Library) -> None:
    tb = 'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'
    log = chatter("[worker-{}]: ", range(3)) + f"[worker-6]: step failed\n{tb}{BOOM}\n"
    assert where(run(library, log))[0] == 6
    parted = chatter("[worker-{}]: ", range(3)) + f"[worker-6]: step failed\n\n{tb}{BOOM}\n"
    assert where(run(library, parted))[0] is None  # a blank line ends the block
    other = chatter("[worker-{}]: ", range(3)) + f"[worker-6]: step failed\nlauncher: restarting\n{BOOM}\n"
    assert where(run(library, other))[0] is None  # an untagged statement of its own is not the worker's


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (f"{BOOM} on global rank 7", 7),
        (f"{BOOM}: process_index=7", 7),
        (f"{BOOM}: /job:trainer/replica:0/task:7 has failed", 7),
        (f"{BOOM}: [7] is creating the communicator with [0]", 7),
        (f"{BOOM} (worker 7)", 7),
        (f"{BOOM} while waiting for rank 7", None),  # a peer it waits for
        (f"{BOOM}: no reply from rank 7", None),  # a peer after a preposition
        (f"{BOOM}. Rank 7 is not responding", None),  # a peer's absence
        (f"{BOOM}: local rank 7 is not ready", None),  # a local rank is no rank
        (f"{BOOM}: DataLoader worker 7 exited", None),  # another kind of worker
        (f"{BOOM}: /ckpt/rank7/model.pt is missing", None),  # a path names no speaker
        (f"{BOOM}: Process 7 has 14.5 GiB memory in use", None),  # a pid
    ],
)
def test_the_speaker_a_message_names_is_its_rank_a_peer_is_not(
    library: Library, line: str, rank: int | None
) -> None:
    assert where(run(library, line + "\n"))[0] == rank
    assert unwrap(line).rank == rank


def test_a_launchers_rule_around_one_ranks_output_names_it(library: Library) -> None:
    closed = f"{BOOM}\nwarnings.warn(...)\n\n=========== end of worker 4 output ===========\n"
    assert where(run(library, closed))[0] == 4
    opened = f"=== rank 3 ===\n{BOOM}\n"
    assert where(run(library, opened))[0] == 3
    closed_before = f"---- End rank 3 ----\n{BOOM}\n"
    assert where(run(library, closed_before))[0] is None  # a closed section says nothing below it
    local = f"{BOOM}\n------ end local rank 2 ------\n"
    assert where(run(library, local))[0] is None


def test_timestamps_and_levels_in_a_head_are_not_tags() -> None:
    assert read_head("2024-05-01 10:00:07,123 ERROR [proc2] boom").tokens[0].value == 2
    assert read_head("10:00:07.123: boom").tokens == ()
    model = learn(f"10:0{n}:07: step {n}" for n in range(5))
    assert not model.tagged


def test_a_process_whose_lines_name_one_rank_is_that_rank(library: Library) -> None:
    log = (
        "(TrainWorker pid=4411, ip=10.2.0.5) process group ready, world_rank=2, world_size=4\n"
        "(TrainWorker pid=4412, ip=10.2.0.6) process group ready, world_rank=3, world_size=4\n"
        f"(TrainWorker pid=4412, ip=10.2.0.6) {BOOM}\n"
    )
    assert where(run(library, log)) == (3, "10.2.0.6")


def test_a_launchers_stream_tag_names_the_process_even_alone(library: Library) -> None:
    assert where(run(library, f"[4]<stdout>:{BOOM}\n"))[0] == 4


def test_a_tag_whose_value_goes_with_several_processes_counts_nodes(library: Library) -> None:
    node1 = "".join(f"worker-1: [local{v}]: step 3\n" for v in range(4))
    node0 = "".join(f"worker-0: [local{v}]: step 3\n" for v in range(4))
    d = run(library, node0 + node1 + f"worker-1: [local2]: {BOOM}\n")
    assert where(d) == (None, "worker-1")  # node 1's local rank 2: no global rank shown
    tagged = "".join(f"worker-1: [rank{4 + v}]: step 3\n" for v in range(4))
    assert where(run(library, tagged + f"worker-1: [rank6]: {BOOM}\n"))[0] == 6


def test_files_pasted_together_under_tails_headers_are_each_their_ranks(library: Library) -> None:
    log = f"==> out/rank-2.log <==\nstep 1\n\n==> out/rank-5.log <==\nstep 1\n{BOOM}\n"
    assert where(run(library, log))[0] == 5
    unnamed = f"==> out/rank-2.log <==\nstep 1\n\n==> out/driver.log <==\n{BOOM}\n"
    assert where(run(library, unnamed))[0] is None


def test_a_local_rank_is_the_rank_when_the_world_fits_on_the_node_shown(library: Library) -> None:
    log = "world_size=4\n" + chatter("[local{}]: ", range(4)) + f"[local3]: {BOOM}\n"
    assert where(run(library, log))[0] == 3
    wider = "world_size=16\n" + chatter("[local{}]: ", range(4)) + f"[local3]: {BOOM}\n"
    assert where(run(library, wider))[0] is None


def test_an_outer_launchers_task_per_node_gives_way_to_the_tag_inside(library: Library) -> None:
    log = "".join(f"{node}: [rank{8 * node + v}]: step 3\n" for node in range(2) for v in range(3))
    assert where(run(library, log + f"1: [rank13]: {BOOM}\n"))[0] == 13
    per_node = "".join(f"{node}: [default{v}]: step 3\n" for node in range(2) for v in range(3))
    assert where(run(library, per_node + f"1: [default2]: {BOOM}\n"))[0] is None  # node 1, local 2
    mpi = "".join(f"[1,{v}]<stderr>: step 3\n" for v in range(3))
    assert where(run(library, mpi + f"[1,2]<stderr>: {BOOM}\n"))[0] == 2


def test_a_tag_before_a_local_index_counts_nodes_even_when_one_process_shows(library: Library) -> None:
    log = chatter("worker-1: [local3]: ", range(1)) * 3 + f"worker-1: [local3]: {BOOM}\n"
    assert where(run(library, log + "nnodes=2\n"))[0] is None  # node 1's local rank 3
    assert where(run(library, chatter("worker-{}: ", range(3)) + f"worker-1: {BOOM}\n"))[0] == 1


def test_a_container_runtimes_line_head_hides_no_tag(library: Library) -> None:
    head = "2024-05-01T10:00:00.123Z stderr F "
    log = chatter(head + "[proc{}] ", range(3)) + f"{head}[proc2] {BOOM}\n"
    assert where(run(library, log))[0] == 2


def test_a_tag_whose_word_names_a_rank_needs_no_learning() -> None:
    model = learn(["plain line"])
    assert model.read("[gworker3] x").rank is None  # an unknown word is learned, never assumed
    assert model.read("[global_rank=7] x").rank == 7
    assert model.read("[local=2] x").local == 2
