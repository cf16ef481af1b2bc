"""Redaction of secrets in log text, applied before anything leaves the engine.

Logs carry what the job's environment carried: tokens in URLs, `HF_TOKEN=` dumps, AWS keys in a
boto error, the user's e-mail. None of it may reach Slack, Redis or a terminal we print to.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # Private key blocks (on one line when a log flattened them, or their header alone).
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
        ),
        f"-----BEGIN PRIVATE KEY-----{MASK}",
    ),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"), MASK),  # Slack tokens
    (re.compile(r"\bxapp-[0-9]-[A-Za-z0-9-]{8,}"), MASK),  # Slack app-level tokens
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),  # Hugging Face
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MASK),  # GitHub classic tokens
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MASK),  # GitHub fine-grained tokens
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),  # AWS access key ids
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), MASK),  # OpenAI-style secret keys
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),  # JWTs
    # Authorization headers: Bearer/Basic/token values.
    (
        re.compile(r"(?i)\b(authorization|proxy-authorization)(\"?\s*[:=]\s*\"?)([A-Za-z]+ )?[^\s\"',;]+"),
        rf"\1\2\3{MASK}",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), f"Bearer {MASK}"),
    # Credentials in URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@"), rf"\1:{MASK}@"),
    # Environment-style secrets: HF_TOKEN=..., AWS_SECRET_ACCESS_KEY: ..., DB_PASSWORD=...
    (
        re.compile(
            r"\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|_KEY)"
            r"[A-Z0-9_]*)(\"?'?[ \t]*[:=][ \t]*\"?'?)(?!\[REDACTED\])[^\s\"',;&]+"
        ),
        rf"\1\2{MASK}",
    ),
    # The same in code and config style: hf_token="...", api_key: ..., password=...
    (
        re.compile(
            r"\b((?:[a-z0-9]+_)*(?:token|secret|password|passwd|api_?key|access_key|secret_key|private_key))"
            r"(\"?'?[ \t]*[:=][ \t]*\"?'?)(?!\[REDACTED\])[^\s\"',;&)]+"
        ),
        rf"\1\2{MASK}",
    ),
    # E-mail addresses.
    (re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), "[EMAIL]"),
)


def redact(text: str) -> str:
    """Replace secrets and e-mail addresses in ``text`` with placeholders."""
    if not text:
        return text
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
