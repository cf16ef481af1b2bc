""" "What I still need" asks only for facts the logs do not hold (signatures/missing.py).

Each test asks a fact once on a log that lacks it and shows the same question suppressed on a log
that holds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from signatures import Diagnosis, SignatureError, Source, diagnose
from signatures.library import Library
from signatures.missing import COLLECT_ENV, NO_SIGNATURE
from tests.sigfactory import build_library, signature_doc

REASON = "Paste the 'last reason:' line under the warning."
STEP = "At which step did it fail?"
XID = "Attach dmesg Xid lines from the node."
ALL_RANKS = "Attach the logs of every rank."


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc(
                "recompiles",
                category="torch-compile",
                missing_facts=[{"ask": REASON, "when": "always", "unless": ["last_reason"]}],
            ),
            signature_doc(
                "host-oom",
                category="host-memory",
                missing_facts=[
                    {"ask": STEP, "when": "always", "unless": ["step"]},
                    {"ask": XID, "when": "always", "unless": ["xid"]},
                ],
            ),
            signature_doc(
                "peer-timeout",
                role="downstream",
                fingerprints=[{"regex": r"\[Rank (?P<rank>\d+)\] peer-timeout"}],
                missing_facts=[{"ask": ALL_RANKS, "when": "always", "unless": ["all_ranks"]}],
            ),
        ],
    )


def asks(library: Library, text: str) -> tuple[str, ...]:
    d: Diagnosis = diagnose([Source.from_text("job.log", text)], library=library)
    return d.missing_facts


def test_the_last_reason_is_asked_until_the_log_holds_it(library: Library) -> None:
    assert REASON in asks(library, "recompiles happened\n")
    assert REASON not in asks(library, "recompiles happened\n   last reason: 2/7: tensor 'x' size mismatch\n")


def test_the_step_is_asked_until_a_progress_line_names_one(library: Library) -> None:
    assert STEP in asks(library, "host-oom happened\n")
    assert STEP not in asks(library, "step 1200 | loss 2.1 | 1.3it/s\nhost-oom happened\n")


def test_xid_lines_are_asked_until_the_log_holds_them(library: Library) -> None:
    assert XID in asks(library, "host-oom happened\n")
    xid = "[ 1843.3] NVRM: Xid (PCI:0000:b3:00): 79, pid=123, GPU has fallen off the bus.\n"
    assert XID not in asks(library, xid + "host-oom happened\n")


def test_versions_are_asked_until_the_log_states_torch_and_cuda(library: Library) -> None:
    assert COLLECT_ENV in asks(library, "host-oom happened\n")
    env = "PyTorch version: 2.4.1+cu121\nCUDA used to build PyTorch: 12.1\n"
    assert COLLECT_ENV not in asks(library, env + "host-oom happened\n")


def test_the_full_traceback_is_asked_only_for_an_error_without_one(library: Library) -> None:
    assert NO_SIGNATURE in asks(library, "ValueError: bad shape\n")
    tb = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\nValueError: bad shape\n'
    assert NO_SIGNATURE not in asks(library, tb)
    assert NO_SIGNATURE not in asks(library, "ERROR: the worker died\n" + tb)


def test_every_ranks_log_is_asked_until_every_rank_shows_up(library: Library) -> None:
    some = "world_size=2\n[Rank 0] peer-timeout\n"
    assert ALL_RANKS in asks(library, some)
    assert ALL_RANKS not in asks(library, some + "[Rank 1] peer-timeout\n")


def test_a_signature_may_only_name_known_detectors(tmp_path: Path) -> None:
    doc = signature_doc("x", missing_facts=[{"ask": "a", "when": "always", "unless": ["stars"]}])
    with pytest.raises(SignatureError, match="unknown detector 'stars'"):
        build_library(tmp_path, [doc])


def test_the_global_rank_is_asked_when_the_line_names_a_local_rank_only(library: Library) -> None:
    assert any("local rank 3 only" in a for a in asks(library, "[default3]:host-oom happened\n"))
    mapped = "+ torchrun --nproc_per_node 8 train.py\n[default3]:host-oom happened\n"
    assert not any("local rank" in a for a in asks(library, mapped))
