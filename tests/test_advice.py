"""The restart block of a signature and the advice derived from it (signatures/advice.py), each
rule on its own, on real corpus logs where one shows it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from signatures import Diagnosis, Source, Status, diagnose
from signatures.advice import INVESTIGATE_MAX, Advice, AdviceFormatError, Decision, advise
from signatures.loader import load_signatures
from signatures.spec import Restart, RestartClass, SignatureError
from tests.corpus.cases import load_cases
from tests.sigfactory import signature_doc, write_library

CASES = {c.id: c for c in load_cases()}
ROOT = Path(__file__).resolve().parent.parent


def corpus(case_id: str) -> Diagnosis:
    case = CASES[case_id]
    return diagnose([Source.from_bytes(case.path.name, case.data)])


# -- the restart block in YAML ------------------------------------------------------------------


def _problems(root: Path) -> list[str]:
    with pytest.raises(SignatureError) as info:
        load_signatures(root)
    return [str(p) for p in info.value.problems]


def test_an_initiating_signature_must_state_its_restart_class(tmp_path: Path) -> None:
    doc = signature_doc("no-class")
    del doc["restart"]
    write_library(tmp_path, [doc])
    assert "no-class.yaml: restart: required on initiating signatures: {class, reason}" in "\n".join(
        _problems(tmp_path)
    )


def test_other_roles_default_to_unknown(tmp_path: Path) -> None:
    docs = [signature_doc("a-symptom", role="downstream"), signature_doc("a-warning", role="benign")]
    for doc in docs:
        del doc["restart"]
    write_library(tmp_path, docs)
    by_id = {s.id: s.restart for s in load_signatures(tmp_path)}
    assert by_id["a-symptom"].cls is RestartClass.UNKNOWN
    assert "downstream line only reports a failure printed elsewhere" in by_id["a-symptom"].reason
    assert by_id["a-warning"].cls is RestartClass.UNKNOWN


def test_a_bad_restart_block_is_reported_with_the_other_problems(tmp_path: Path) -> None:
    bad_class = signature_doc("bad-class", restart={"class": "maybe", "reason": "r"})
    two_lines = signature_doc("two-lines", restart={"class": "transient", "reason": "one\ntwo"})
    extra = signature_doc("extra-field", restart={"class": "node", "reason": "r", "hosts": ["a"]})
    no_reason = signature_doc("no-reason", restart={"class": "node"})
    write_library(tmp_path, [bad_class, two_lines, extra, no_reason])
    text = "\n".join(_problems(tmp_path))
    assert "bad-class.yaml: restart.class: one of transient, node, deterministic, unknown" in text
    assert "two-lines.yaml: restart.reason: must be one line" in text
    assert "extra-field.yaml: restart.hosts: unknown field" in text
    assert "no-reason.yaml: restart.reason: missing required field" in text


def test_the_bundled_library_uses_every_class() -> None:
    classes = {s.restart.cls for s in load_signatures()}
    assert classes == set(RestartClass)


# -- the rules ----------------------------------------------------------------------------------


def test_rule1_a_clean_log_gets_no_advice() -> None:
    none_case = next(c for c in CASES.values() if not c.is_failure)
    d = corpus(none_case.id)
    assert d.status is Status.CLEAN and d.advice is None
    assert d.to_dict()["advice"] is None


@pytest.mark.parametrize("status", ["clean", "empty", "degraded"])
def test_rule1_a_run_that_did_not_end_in_failure_gets_no_advice(status: str) -> None:
    restart = Restart(RestartClass.DETERMINISTIC, "r")
    assert advise(restart, status=status, confidence=0.9, host="h") is None


def test_rule2_transient_restarts_from_the_checkpoint() -> None:
    d = corpus("extra-034")  # an InfiniBand completion error on a real run
    assert d.signature and d.signature.id == "nccl-ib-transport-error"
    assert d.advice and d.advice.decision is Decision.RESTART
    assert d.advice.restart_class is RestartClass.TRANSIENT and d.advice.exclude_hosts == ()
    assert d.advice.line.startswith("Restart from the last checkpoint: an InfiniBand/RoCE link")


def test_rule2_node_restarts_without_the_initiating_host() -> None:
    d = corpus("extra2b-070")  # "srun: error: Node failure on worker-1"
    assert d.signature and d.signature.id == "slurm-node-failure"
    assert d.advice and d.advice.decision is Decision.RESTART_EXCLUDING
    assert d.advice.exclude_hosts == ("worker-1",)
    assert d.advice.line == (
        "Restart without worker-1: Slurm lost the node under the job; the code is not at fault"
    )


def test_rule2_deterministic_stops() -> None:
    d = diagnose([ROOT / "signatures/examples/llama-64gpu-triton.log"])
    assert d.signature and d.signature.id == "triton-compilation-failed"
    assert d.advice and d.advice.decision is Decision.STOP and d.advice.confidence == d.confidence
    assert d.advice.line.startswith("Do not restart: Triton cannot compile this kernel")


def test_rule2_unknown_investigates() -> None:
    d = corpus("extra-001")
    assert d.signature and d.signature.id == "nccl-system-error"
    assert d.advice and d.advice.decision is Decision.INVESTIGATE
    assert d.advice.restart_class is RestartClass.UNKNOWN


def test_rule3_an_unrecognized_failure_is_investigated() -> None:
    d = corpus("long-dev-001")
    assert d.status is Status.UNRECOGNIZED
    assert d.advice and d.advice.decision is Decision.INVESTIGATE
    assert "no signature knows this error" in d.advice.reason


def test_rule4_a_node_failure_without_a_host_is_investigated() -> None:
    d = corpus("extra2a-029")  # uncorrectable ECC, no host printed anywhere
    assert d.signature and d.signature.id == "cuda-ecc-uncorrectable"
    assert d.initiating and d.initiating.host is None
    assert d.advice and d.advice.decision is Decision.INVESTIGATE
    assert d.advice.restart_class is RestartClass.NODE and d.advice.exclude_hosts == ()
    assert "(the log does not name the host: " in d.advice.reason


def test_rule5_investigate_is_never_confident() -> None:
    unknown = advise(Restart(RestartClass.UNKNOWN, "r"), status="failure", confidence=0.9, host=None)
    sure = advise(Restart(RestartClass.TRANSIENT, "r"), status="failure", confidence=0.9, host=None)
    assert unknown and unknown.confidence == INVESTIGATE_MAX
    assert sure and sure.confidence == 0.9


def test_every_failure_of_the_corpus_gets_advice_as_the_readme_counts_it() -> None:
    spec = importlib.util.spec_from_file_location("bench_advice", ROOT / "bench" / "advice.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up there
    spec.loader.exec_module(bench)
    tally = bench.tally()
    assert tally.unadvised == []
    assert tally.advised == tally.failures - len(tally.warnings) > 240
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert bench.table(tally) in readme, "run bench/advice.py and update the README's table"


# -- the JSON form ------------------------------------------------------------------------------


def test_advice_survives_the_stored_form_and_older_diagnoses_still_load() -> None:
    d = corpus("extra2b-070")
    again = Diagnosis.from_dict(d.to_dict())
    assert again.advice == d.advice
    older = d.to_dict()
    del older["advice"]
    assert Diagnosis.from_dict(older).advice is None


@pytest.mark.parametrize(
    "bad",
    [
        "restart",
        {"decision": "reboot"},
        {"decision": "stop", "class": "sometimes"},
        {"decision": "stop", "exclude_hosts": "gpu-1"},
        {"decision": "stop", "confidence": "high"},
    ],
)
def test_a_malformed_advice_is_refused_by_name(bad: object) -> None:
    with pytest.raises(AdviceFormatError):
        Advice.from_dict(bad)
