"""Framework coverage of the library: samples name the framework and versions whose wording they are
in, every framework ML teams run has a failure signature with a sample from a public report, and the
reference page shows both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from signatures.docs import framework_coverage, render_signatures_markdown
from signatures.engine import default_library
from signatures.loader import load_signatures
from signatures.spec import FRAMEWORKS, SignatureError
from tests.sigfactory import signature_doc, write_library

# The frameworks and tools whose failures a user must be able to paste and get named (issue 16).
REQUIRED = (
    "torch",
    "torch-compile",
    "jax",
    "tensorflow",
    "vllm",
    "ray",
    "lightning",
    "transformers",
    "accelerate",
    "deepspeed",
    "megatron",
    "gloo",
    "nccl",
    "triton",
    "cuda-toolchain",
)


def _sample(sig_id: str, **fields: Any) -> dict[str, Any]:
    return {"log": f"{sig_id} happened\n", "line": f"{sig_id} happened", **fields}


def test_every_required_framework_is_a_known_name() -> None:
    assert set(REQUIRED) <= set(FRAMEWORKS)


@pytest.mark.parametrize("framework", REQUIRED)
def test_framework_has_a_failure_signature_with_a_public_sample(framework: str) -> None:
    covered = framework_coverage(default_library().signatures)[framework]
    assert covered, f"no failure signature wins a sample from a public report in {framework}'s wording"


def test_coverage_counts_only_public_samples_a_failure_signature_wins_itself(tmp_path: Path) -> None:
    url = "https://github.com/example/project/issues/1"
    docs = [
        signature_doc("counted", samples=_samples("counted", source=url, framework="jax")),
        signature_doc("no-url", samples=_samples("no-url", source="written from source", framework="jax")),
        signature_doc("warning", role="benign", samples=_samples("warning", source=url, framework="jax")),
        signature_doc("no-framework", samples=_samples("no-framework", source=url)),
    ]
    other = signature_doc("other-wins", samples=_samples("counted", source=url, framework="ray"))
    other["samples"]["positive"][0]["diagnosis"] = "counted"
    write_library(tmp_path, [*docs, other])
    coverage = framework_coverage(load_signatures(tmp_path))
    assert coverage["jax"] == ["counted"]
    assert coverage["ray"] == []


def test_the_page_shows_coverage_and_each_signature_frameworks_and_versions(tmp_path: Path) -> None:
    url = "https://github.com/example/project/issues/2"
    samples = _samples("oom", source=url, framework="jax", versions="jaxlib 0.4")
    samples["positive"].append(
        _sample("oom", source="written from source", framework="torch", versions="2.5+")
    )
    write_library(tmp_path, [signature_doc("oom", samples=samples)])
    page = render_signatures_markdown(load_signatures(tmp_path))
    assert "| jax | `oom` |" in page
    assert "| torch | (none yet) |" in page
    assert "samples: jax (jaxlib 0.4), torch (2.5+) · 2 positive (1 from public reports), 1 negative" in page


def test_an_unknown_framework_is_refused(tmp_path: Path) -> None:
    write_library(
        tmp_path, [signature_doc("typo", samples=_samples("typo", source="x", framework="pytorch"))]
    )
    with pytest.raises(SignatureError) as info:
        load_signatures(tmp_path)
    assert "typo.yaml: samples.positive[0].framework: unknown framework 'pytorch'" in str(info.value)


def _samples(sig_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "positive": [_sample(sig_id, **fields)],
        "negative": [{"log": "nothing to see\n", "why": "unrelated"}],
    }
