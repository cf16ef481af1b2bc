"""A traceback logged as one record whose head names the rank (signatures/attribution.py), and a
padded `rank:  3` in a record's head (signatures/lines.py). Made-up lines, negatives beside."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.library import Library
from signatures.lines import unwrap
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(tmp_path_factory.mktemp("lib"), [signature_doc("shard-fault")])


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.out", text)], library=library)


FRAMES = '  File "/srv/train.py", line 40, in step\n    loss.backward()\n'
BOOM = "RuntimeError: shard-fault happened on the reducer\n"


@pytest.mark.parametrize(
    "head",
    [
        "rank:  5 | 2024-05-06 07:08:09,101 CRITICAL | ",
        "worker rank=5 :: ERROR :: ",
        "[2024-05-06 07:08:09] rank 5 - ERROR - ",
    ],
)
def test_the_record_that_opens_a_traceback_names_its_rank(library: Library, head: str) -> None:
    d = run(library, f"loading\n{head}Traceback (most recent call last):\n{FRAMES}{BOOM}")
    assert d.initiating is not None and d.initiating.line == 5 and d.initiating.rank == 5


def test_a_traceback_whose_opening_record_names_no_rank_has_none(library: Library) -> None:
    head = "2024-05-06 07:08:09,101 CRITICAL | "
    d = run(library, f"loading\n{head}Traceback (most recent call last):\n{FRAMES}{BOOM}")
    assert d.initiating is not None and d.initiating.rank is None
    # a rank named above a traceback's own plain header is another record's, not this traceback's
    plain = f"rank:  5 | checkpoint saved\nTraceback (most recent call last):\n{FRAMES}{BOOM}"
    d = run(library, plain)
    assert d.initiating is not None and d.initiating.rank is None


@pytest.mark.parametrize(
    "head",
    [
        "[2024-05-06 07:08:09,101][utils][ERROR] - [rank: 5] ",
        "rank:  5 | 2024-05-06 07:08:09,101 CRITICAL | ",
    ],
)
def test_the_opening_record_of_a_traceback_longer_than_the_kept_lines_still_names_its_rank(
    library: Library, head: str
) -> None:
    deep = FRAMES * 20  # forty lines between the title and the exception line
    title = "Traceback (most recent call last):\n"
    opener = head if head.startswith("rank") else head + "\n"
    d = run(library, f"loading\n{opener}{title}{deep}{BOOM}")
    assert d.initiating is not None and d.initiating.rank == 5
    quiet = run(
        library, f"loading\n[2024-05-06 07:08:09,101][utils][INFO] - [rank: 5] saved\n{title}{deep}{BOOM}"
    )
    assert quiet.initiating is not None and quiet.initiating.rank is None  # another record above it


def test_a_padded_rank_in_a_records_head_is_read() -> None:
    assert unwrap("rank:  7 | 2024-05-06 07:08:09,101 INFO | ready").rank == 7
    assert unwrap("rank:    7 | ready").rank is None  # past two spaces it is a table's column
