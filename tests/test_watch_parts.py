"""The parts of `denpex watch`: following files like tail -F, deciding what is news, naming the job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bot.watch.answer import CASCADE, DEGRADED, FAILURE, AnswerKey, Tracker, event_between
from bot.watch.follow import Follower
from bot.watch.job import from_environment
from bot.watch.process import alive
from signatures import Diagnosis, DownstreamGroup, Evidence, SignatureRef, Status
from signatures.engine import default_library
from signatures.incremental import Incident


def read_all(f: Follower) -> list[tuple[str, bytes, bool]]:
    return [(Path(p.name).name, p.data, p.restarted) for p in f.poll()]


def test_follower_reads_each_byte_once_and_waits_for_files_to_appear(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    f = Follower([str(log), str(tmp_path / "rank*.log")])
    assert read_all(f) == []  # nothing there yet: waited for
    log.write_bytes(b"one\ntw")
    assert read_all(f) == [("train.log", b"one\ntw", False)]
    assert read_all(f) == []
    with log.open("ab") as out:
        out.write(b"o\n")
    (tmp_path / "rank1.log").write_bytes(b"r1\n")
    assert sorted(read_all(f)) == [("rank1.log", b"r1\n", False), ("train.log", b"o\n", False)]
    f.close()


def test_follower_finishes_a_rotated_file_then_reads_its_successor(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"a\n")
    f = Follower([str(log)])
    assert read_all(f) == [("train.log", b"a\n", False)]
    with log.open("ab") as out:
        out.write(b"b\n")  # written before the rotation, read after it
    os.replace(log, tmp_path / "train.log.1")
    assert read_all(f) == [("train.log", b"b\n", False)]
    assert read_all(f) == []  # the new file is not there yet
    log.write_bytes(b"c\n")
    assert read_all(f) == []  # the end of the old one is seen first ...
    assert read_all(f) == [("train.log", b"c\n", True)]  # ... then the new file, from its start
    f.close()


def test_follower_rereads_a_truncated_file_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"first run\n")
    f = Follower([str(log)], read_max=4)
    assert b"".join(p[1] for p in read_all(f) + read_all(f) + read_all(f)) == b"first run\n"
    log.write_bytes(b"")  # copytruncate
    assert read_all(f) == []
    with log.open("ab") as out:
        out.write(b"new\n")
    assert read_all(f) == [("train.log", b"new\n", True)]
    f.close()


def test_follower_from_end_skips_what_is_there_and_reads_later_files_whole(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"old 1\nold 2\nhalf a li")  # a writer is in the middle of a line
    done = tmp_path / "done.log"
    done.write_bytes(b"finished\n")
    f = Follower([str(log), str(done), str(tmp_path / "rank*.log")], from_end=True)
    assert read_all(f) == [("train.log", b"half a li", False)]  # the unfinished line whole
    with log.open("ab") as out:
        out.write(b"ne\nnew\n")
    (tmp_path / "rank1.log").write_bytes(b"r1 a\nr1 b\n")  # appeared after the start: all of it
    assert sorted(read_all(f)) == [("rank1.log", b"r1 a\nr1 b\n", False), ("train.log", b"ne\nnew\n", False)]
    f.close()
    assert read_all(Follower([str(done)], from_end=False)) == [("done.log", b"finished\n", False)]


def diagnosis(
    status: Status, line: int = 10, sig: str | None = "nccl-x", ranks: tuple[int, ...] = ()
) -> Diagnosis:
    ref = SignatureRef(sig, sig, "distributed", "initiating") if sig else None
    first = Evidence("train.log", 99, "later")
    groups = (DownstreamGroup(None, "downstream", len(ranks), ranks, first),) if ranks else ()
    return Diagnosis(status, ref, 0.9, Evidence("train.log", line, "the line"), downstream=groups)


def key(*args: object, **kwargs: object) -> AnswerKey:
    return AnswerKey.of(diagnosis(*args, **kwargs))  # type: ignore[arg-type]


def test_what_is_news() -> None:
    assert event_between(None, key(Status.CLEAN, sig=None)) is None
    assert event_between(None, key(Status.DEGRADED)) == DEGRADED
    assert event_between(key(Status.DEGRADED), key(Status.DEGRADED)) is None
    assert event_between(key(Status.DEGRADED), key(Status.FAILURE)) == FAILURE  # the run died of it
    assert event_between(key(Status.FAILURE), key(Status.FAILURE, ranks=(2,))) == CASCADE
    assert event_between(key(Status.FAILURE, ranks=(2, 5)), key(Status.FAILURE, ranks=(2,))) is None
    assert event_between(key(Status.FAILURE), key(Status.FAILURE, line=3)) == FAILURE  # an earlier cause
    assert event_between(key(Status.FAILURE), key(Status.UNRECOGNIZED, sig=None)) == FAILURE
    assert event_between(key(Status.FAILURE), key(Status.CLEAN, sig=None)) is None


def test_a_new_answer_is_reported_once_it_has_held_for_the_settle_time() -> None:
    t = Tracker(settle=5.0)
    t.see(diagnosis(Status.UNRECOGNIZED, sig=None), now=100.0)
    assert t.due(now=104.0) is None
    t.see(diagnosis(Status.CLEAN, sig=None), now=104.0)  # the run trained past it: a handled error
    assert t.due(now=200.0) is None
    t.see(diagnosis(Status.FAILURE), now=200.0)
    t.see(diagnosis(Status.FAILURE), now=203.0)  # the same answer again does not restart the clock
    assert t.due(now=205.0) == FAILURE
    assert t.due(now=300.0) is None  # reported once


def test_job_id_comes_from_the_scheduler() -> None:
    slurm = from_environment(
        {"SLURM_JOB_ID": "4242", "SLURM_CLUSTER_NAME": "prod", "SLURM_JOB_NAME": "llama"}
    )
    assert (slurm.job_id, slurm.job_name, slurm.cluster) == ("prod-4242", "llama", "prod")
    array = from_environment({"SLURM_JOB_ID": "9", "SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "2"})
    assert array.job_id == "slurm-7_2"
    pod = from_environment(
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "train-abc", "POD_NAMESPACE": "ml"}
    )
    assert pod.job_id == "k8s-ml-train-abc"
    assert from_environment({"TORCHELASTIC_RUN_ID": "run 7"}).job_id == "torchrun-run-7"
    assert from_environment({"SLURM_JOB_ID": "1"}, job_id="mine").job_id == "mine"
    assert slurm.event_id("failure", 2) == "prod-4242:failure-2"
    assert slurm.event_id("final", 3) == "prod-4242"


def test_a_process_is_alive_until_it_exits_even_before_its_parent_reaps_it() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert alive(proc.pid)
    assert proc.stdin is not None
    proc.stdin.close()
    deadline = time.monotonic() + 60
    while alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.returncode is None  # not reaped yet: exited, a zombie, and that counts as ended
    assert not alive(proc.pid)
    assert proc.wait(timeout=10) == 0


def test_an_error_the_run_trains_past_within_the_settle_time_is_not_reported() -> None:
    incident = Incident(default_library())
    text = incident.text("train.log")
    tracker = Tracker(settle=30.0)
    text.feed(b"".join(f"[rank0]: step {s} loss 2.0 1.0 it/s\n".encode() for s in range(1, 10)))
    text.feed(b"[rank0]: RuntimeError: failed to fetch shard 12 from the object store\n")
    text.flush()
    tracker.see(incident.diagnosis(), now=0.0)  # alone, it looks like the failure that ends the run
    assert tracker.due(now=10.0) is None
    text.feed(b"".join(f"[rank0]: step {s} loss 2.0 1.0 it/s\n".encode() for s in range(10, 14)))
    text.flush()
    tracker.see(incident.diagnosis(), now=12.0)  # it trained on: a handled error
    assert tracker.due(now=100.0) is None
    text.feed(b"[rank0]: RuntimeError: failed to fetch shard 13 from the object store\n")
    text.flush()
    tracker.see(incident.diagnosis(), now=200.0)  # and this time nothing follows
    assert tracker.due(now=230.0) == FAILURE
