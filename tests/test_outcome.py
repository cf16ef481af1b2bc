"""Crash, degradation, clean or empty (signatures/outcome.py, diagnosis.py). One test per rule."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, Status, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc(
                "limit-hit",
                category="torch-compile",
                outcome="degradation",
                fingerprints=[{"literal": "hit the recompile limit"}, {"literal": "FailOnLimitHit"}],
            ),
            signature_doc("kernel-fault"),
        ],
    )


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("train.log", text)], library=library)


def steps(first: int, last: int, rate: float) -> str:
    return "".join(f"step {n} | loss 1.{n % 10} | {rate:.2f}it/s\n" for n in range(first, last))


def test_a_degradation_the_run_kept_training_with_is_degraded_and_says_how_much_slower(
    library: Library,
) -> None:
    d = run(
        library,
        steps(1, 9, 10.0)
        + "W0110 12:27:06 158 convert_frame.py:1551] hit the recompile limit\n"
        + steps(9, 20, 2.0),
    )
    assert d.status is Status.DEGRADED and d.signature and d.signature.id == "limit-hit"
    assert "kept training, 5.0x slower" in d.summary
    assert d.headline.startswith("Degraded, not crashed")


def test_a_degradation_the_run_then_died_of_is_a_failure(library: Library) -> None:
    log = steps(1, 5, 10.0) + "W0110 12:27:06 158 f.py:1] hit the recompile limit\nkernel-fault happened\n"
    assert run(library, log).status is Status.FAILURE


def test_a_degradation_whose_own_line_is_the_exception_that_stopped_the_run_is_a_failure(
    library: Library,
) -> None:
    log = (
        steps(1, 5, 10.0) + "torch._dynamo.exc.FailOnLimitHit: recompile_limit reached with fullgraph=True\n"
    )
    assert run(library, log).status is Status.FAILURE


def test_a_non_finite_loss_no_signature_knows_is_a_degradation(library: Library) -> None:
    log = "{'loss': 1.4596, 'grad_norm': 0.3}\n" + "".join(
        "{'loss': 0.0, 'grad_norm': nan}\n" for _ in range(4)
    )
    d = run(library, log)
    assert d.status is Status.DEGRADED and d.signature is None
    assert d.initiating and d.initiating.line == 2
    # a metric named in brackets, "[Loss] nan", the same; printed finite again, it recovered
    bracketed = "".join(
        f"E{e} iter[ 14/ 15] | [Loss] {v} | [exp] ./run\n" for e, v in enumerate(["51.4", "nan", "nan"])
    )
    assert run(library, bracketed).status is Status.DEGRADED
    assert run(library, bracketed + "E3 iter[ 14/ 15] | [Loss] 50.9 | [exp] ./run\n").status is Status.CLEAN


def test_the_same_non_finite_loss_before_a_crash_is_where_the_failure_started(library: Library) -> None:
    log = "step 5 | loss nan\nstep 6 | loss nan\nRuntimeError: Function 'LogBackward0' returned nan values\n"
    d = run(library, log)
    assert d.status is Status.UNRECOGNIZED


def test_an_input_without_text_is_empty_not_clean(library: Library) -> None:
    for text in ("", "\n\n  \n"):
        d = run(library, text)
        assert d.status is Status.EMPTY and d.initiating is None
        assert d.to_dict()["status"] == "empty"


def test_a_log_with_text_and_no_failure_is_clean(library: Library) -> None:
    assert run(library, steps(1, 30, 9.0)).status is Status.CLEAN
