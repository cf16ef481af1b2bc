"""Every signature's own evidence: positive samples must win with the right line, negative
samples must not match at all. One parametrised test runs them all."""

from __future__ import annotations

import pytest

from signatures import Role, Source, Status, diagnose
from signatures.engine import default_library, find_all
from signatures.spec import NegativeSample, Outcome, PositiveSample, Signature

try:
    LIBRARY = default_library()
    LOAD_ERROR: str | None = None
except Exception as exc:  # reported by test_library_loads, not as a collection error
    LIBRARY = None
    LOAD_ERROR = str(exc)

SIGNATURES: list[Signature] = LIBRARY.signatures if LIBRARY else []

POSITIVE = [
    pytest.param(sig, sample, id=f"{sig.id}+{i}")
    for sig in SIGNATURES
    for i, sample in enumerate(sig.positive)
]
NEGATIVE = [
    pytest.param(sig, sample, id=f"{sig.id}-{i}")
    for sig in SIGNATURES
    for i, sample in enumerate(sig.negative)
]


def test_library_loads() -> None:
    assert LOAD_ERROR is None, LOAD_ERROR
    assert len(SIGNATURES) >= 10


@pytest.mark.parametrize(("sig", "sample"), POSITIVE)
def test_positive_sample_wins(sig: Signature, sample: PositiveSample) -> None:
    expected = sample.diagnosis or sig.id
    diagnosis = diagnose([Source.from_text(f"{sig.id}.log", sample.log)], library=LIBRARY)
    assert diagnosis.signature is not None, f"no signature named; why: {diagnosis.why}"
    assert diagnosis.signature.id == expected, f"why: {diagnosis.why}"
    assert diagnosis.initiating is not None
    assert sample.line in diagnosis.initiating.text
    winner = LIBRARY.by_id[expected] if LIBRARY else sig
    if winner.role is Role.BENIGN:
        assert diagnosis.status is Status.CLEAN
    elif winner.outcome is Outcome.DEGRADATION:  # a sample may show the run going on, or dying
        assert diagnosis.status in (Status.DEGRADED, Status.FAILURE)
    else:
        assert diagnosis.status is Status.FAILURE


@pytest.mark.parametrize(("sig", "sample"), NEGATIVE)
def test_negative_sample_does_not_match(sig: Signature, sample: NegativeSample) -> None:
    hits = [
        f
        for f in find_all([Source.from_text(f"{sig.id}.log", sample.log)], LIBRARY)
        if f.signature_id == sig.id
    ]
    assert hits == [], f"{sig.id} matched a look-alike ({sample.why}): {hits[0].text!r}"


def test_every_signature_has_both_kinds_of_sample() -> None:
    missing = [s.id for s in SIGNATURES if not s.positive or not s.negative]
    assert missing == []
