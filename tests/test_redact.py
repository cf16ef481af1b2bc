"""Secrets never leave the engine (signatures/redact.py), and diagnoses are redacted."""

from __future__ import annotations

import pytest

from signatures import Source, diagnose, redact
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("token xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
        ("app xapp-1-A0123456789-abcdefghij", "xapp-1-A0123456789-abcdefghij"),
        ("HF hub hf_AbCdEfGhIjKlMnOpQrStUvWx", "hf_AbCdEfGhIjKlMnOpQrStUvWx"),
        ("git ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_0123456789abcdefghijABCDEFGHIJ"),
        ("git github_pat_11ABCDEFG0123456789_abcdefghij", "github_pat_11ABCDEFG0123456789_abcdefghij"),
        ("aws AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE"),
        ("env WANDB_API_KEY=0123456789abcdef", "0123456789abcdef"),
        ("env HF_TOKEN=abc123secret", "abc123secret"),
        ("MY_SECRET: s3cr3t-value", "s3cr3t-value"),
        ("DB_PASSWORD=hunter2!", "hunter2!"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdef", "eyJhbGciOiJIUzI1NiJ9abcdef"),
        ("curl -H 'authorization: token ab12cd34ef56'", "ab12cd34ef56"),
        ("fetch https://alice:pa55word@storage.example.com/ckpt", "pa55word"),
        ("-----BEGIN RSA PRIVATE KEY-----MIIEowIBAAKCAQEA-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
        ("mail jane.doe+ml@example.org about it", "jane.doe+ml@example.org"),
        ("hf_token='abcdef123456'", "abcdef123456"),
    ],
)
def test_each_kind_of_secret_is_removed(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED]" in out or "[EMAIL]" in out


@pytest.mark.parametrize(
    "text",
    [
        "num_tokens=4096 max_tokens: 12",
        "step 10 loss 0.5 grad_norm 1.2",
        "tokens/s 1.3e+06",
        "key_padding_mask=None",
    ],
)
def test_ordinary_training_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_diagnosis_text_is_redacted(tmp_path) -> None:
    lib: Library = build_library(tmp_path, [signature_doc("kernel-fault")])
    log = "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx\nkernel-fault happened for bob@example.com\n"
    d = diagnose([Source.from_text("x.log", log)], library=lib)
    dumped = str(d.to_dict())
    assert "bob@example.com" not in dumped and "hf_AbCdEfGhIjKlMnOpQrStUvWx" not in dumped
    assert d.initiating and "[EMAIL]" in d.initiating.text
