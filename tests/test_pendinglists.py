"""A report listing, rank by rank, the collectives each rank waits in (signatures/pendinglists.py):
different collectives are a mismatch, one collective a missing rank. Made-up lines."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc

REPORT = "W0101 10:00:00.1 7 watch.cc:5] collectives waited 90 s for a subset of workers"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc(
                "nccl-collective-rank-missing",
                role="initiating",
                fingerprints=[{"regex": r"collectives waited \d+ s for a subset"}],
            ),
            signature_doc("collective-mismatch-desync", role="initiating"),
        ],
    )


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.log", text)], library=library)


def signature_of(library: Library, text: str) -> str | None:
    d = run(library, text)
    return d.signature.id if d.signature else None


def listed(tag: str, entries: list[tuple[int, str]], intro: str = "Waiting workers:") -> str:
    lines = [f"{tag}{REPORT}", f"{tag}{intro}", *(f"{tag}{r}: [{names}]" for r, names in entries)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("tag", ["", "[2]<stderr>:", "Mon Jan  1 10:00:00 2024[1,0]<stderr>:"])
def test_ranks_waiting_in_different_collectives_are_a_mismatch(library: Library, tag: str) -> None:
    entries = [(0, "allgather.step.17"), (1, "allgather.step.18"), (2, "allgather.step.18")]
    assert signature_of(library, listed(tag, entries)) == "collective-mismatch-desync"


def test_ranks_waiting_in_one_collective_are_a_missing_rank(library: Library) -> None:
    same = [(1, "reduce.grad.4, reduce.grad.5"), (3, "reduce.grad.5, reduce.grad.4")]
    assert signature_of(library, listed("", same)) == "nccl-collective-rank-missing"
    # one rank listed is one rank missing, whatever it waits in
    assert signature_of(library, listed("", [(5, "reduce.grad.4")])) == "nccl-collective-rank-missing"


def test_a_list_the_report_does_not_introduce_is_not_read(library: Library) -> None:
    # the lines below are no list of the report's: no line introducing them
    entries = [(0, "allgather.step.17"), (1, "allgather.step.18")]
    text = f"{REPORT}\nstep 9 done\n" + "".join(f"{r}: [{n}]\n" for r, n in entries)
    assert signature_of(library, text) == "nccl-collective-rank-missing"
    # another process's entries interleaved under the intro are not this report's list
    other = f"[0]<stderr>:{REPORT}\n[0]<stderr>:Waiting workers:\n"
    other += "[1]<stderr>:0: [a.1]\n[1]<stderr>:1: [a.2]\n"
    assert signature_of(library, other) == "nccl-collective-rank-missing"
