"""Healthy runs must stay quiet: no diagnosis claims a failure, no failure signature fires.

The logs in tests/healthy/ imitate HF Trainer, Lightning, Megatron-LM, DeepSpeed and torchrun
output, look-alike lines included. Benign signatures may name their warnings there; any other
hit must be listed, with a reason, in known_false_positives.yaml.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from signatures import Source, Status, diagnose
from signatures.engine import find_all
from tests.healthy.generate import LOGS, render

HEALTHY = Path(__file__).resolve().parent / "healthy"
NAMES = sorted(LOGS)
KNOWN = yaml.safe_load((HEALTHY / "known_false_positives.yaml").read_text("utf-8")) or []


def _is_known(signature_id: str, file: str, text: str) -> bool:
    return any(
        k["signature"] == signature_id and Path(file).name == k["file"] and k["line"] in text for k in KNOWN
    )


@pytest.mark.parametrize("name", NAMES)
def test_healthy_log_is_clean(name):
    diagnosis = diagnose([Source.from_path(HEALTHY / name)])
    assert diagnosis.status is Status.CLEAN, (diagnosis.status, diagnosis.initiating)


@pytest.mark.parametrize("name", NAMES)
def test_no_failure_signature_fires_on_a_healthy_log(name):
    findings = find_all([Source.from_path(HEALTHY / name)])
    unexpected = [
        (f.signature_id, f.line, f.text[:200])
        for f in findings
        if str(f.role) != "benign" and not _is_known(f.signature_id, f.file, f.text)
    ]
    assert unexpected == []


def test_known_false_positives_still_hit():
    findings = find_all([Source.from_path(HEALTHY / name) for name in NAMES])
    stale = [
        k
        for k in KNOWN
        if not any(
            f.signature_id == k["signature"] and Path(f.file).name == k["file"] and k["line"] in f.text
            for f in findings
        )
    ]
    assert stale == []


@pytest.mark.parametrize("name", NAMES)
def test_committed_log_matches_its_generator(name):
    # The generator is seeded: a drift means someone edited one without regenerating the other.
    assert (HEALTHY / name).read_bytes() == render(name).encode("utf-8"), "run tests/healthy/generate.py"


@pytest.mark.parametrize("name", NAMES)
def test_healthy_log_is_long_multi_rank_and_small(name):
    data = (HEALTHY / name).read_bytes()
    assert 2000 <= data.count(b"\n") <= 6000
    assert len(data) < 1 << 20
