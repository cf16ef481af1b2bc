"""Properties of ``redact`` over generated text: idempotent, and no planted secret comes out."""

from __future__ import annotations

import sys
from collections.abc import Callable

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from signatures import redact
from tests.test_redact import SECRETS

redact_module = sys.modules["signatures.redact"]

SETTINGS = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = UPPER.lower()
DIGITS = "0123456789"
ALNUM = UPPER + LOWER + DIGITS
URLSAFE = ALNUM + "_-"


def chars(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size)


# A password as people pick them: no spaces or quotes (where those end a value, masking stops
# there by design), not starting with '-' (that reads as the next option), at least one digit.
password = st.builds(
    lambda head, rest, digit: head + rest + digit,
    st.sampled_from(ALNUM + "!$%^*(_+.~"),
    st.text(alphabet=ALNUM + "!$%^*()_+.~@", min_size=4, max_size=24),
    st.sampled_from(DIGITS),
)


# E-mail addresses as people have them (RFC 5322 allows more in the local part: '*', '{', ...).
email = st.builds(
    lambda first, rest, host, tld: f"{first}{rest}@{host}.{tld}",
    st.sampled_from(ALNUM),
    st.text(alphabet=ALNUM + "._%+-", max_size=20),
    st.text(alphabet=LOWER + DIGITS + "-", min_size=1, max_size=15).filter(lambda h: h[0] != "-"),
    st.text(alphabet=LOWER, min_size=2, max_size=6),
)


def planted(template: str) -> Callable[[str], tuple[str, str]]:
    """A secret value placed in ``template``'s ``{}``: (text, the value)."""
    return lambda value: (template.format(value), value)


# Each strategy draws (the planted text, the part of it that must not come out).
PLANTED: list[st.SearchStrategy[tuple[str, str]]] = [
    chars(UPPER + DIGITS, 16).map(lambda s: ("AKIA" + s,) * 2),
    chars(URLSAFE, 35).map(lambda s: ("AIza" + s,) * 2),
    chars(ALNUM, 36).map(lambda s: ("ghp_" + s,) * 2),
    chars(ALNUM + "_", 82).map(lambda s: ("github_pat_" + s,) * 2),
    chars(URLSAFE, 20).map(lambda s: ("glpat-" + s,) * 2),
    chars(ALNUM, 36).map(lambda s: ("npm_" + s,) * 2),
    chars(URLSAFE, 60).map(lambda s: ("pypi-AgEIcHlwaS5vcmc" + s,) * 2),
    chars(ALNUM, 24).map(lambda s: ("xoxb-123456789012-1234567890123-" + s, s)),
    chars(LOWER + DIGITS, 32).map(lambda s: ("xapp-1-A0123456789-1234567890123-" + s, s)),
    chars(ALNUM, 24).map(lambda s: ("https://hooks.slack.com/services/T0123ABCD/B0123ABCD/" + s, s)),
    chars(URLSAFE, 68).map(lambda s: ("https://discord.com/api/webhooks/112233445566778899/" + s, s)),
    chars(URLSAFE, 34).map(lambda s: ("https://api.telegram.org/bot110201543:A" + s + "/getMe", "A" + s)),
    chars(ALNUM, 24).map(lambda s: ("sk_live_" + s,) * 2),
    chars(ALNUM, 24).map(lambda s: ("rk_live_" + s,) * 2),
    chars(URLSAFE, 40).map(lambda s: ("sk-proj-" + s + "7",) * 2),
    chars(URLSAFE, 93).map(lambda s: ("sk-ant-api03-" + s + "AA",) * 2),
    chars(LOWER + UPPER, 34).map(lambda s: ("hf_" + s,) * 2),
    st.tuples(chars(URLSAFE, 20), chars(URLSAFE, 30), chars(URLSAFE, 43)).map(
        lambda p: (f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}",) * 2
    ),
    st.lists(chars(ALNUM + "+/", 64), min_size=1, max_size=4).map(
        lambda body: (
            "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----",
            body[0],
        )
    ),
    email.map(lambda address: (address, address)),
    *(
        password.map(planted(template))
        for template in (
            "--password {}",
            "--password={}",
            "--api-key {}",
            "Password: {}",
            "Token: {}",
            "ApiKey={}",
            "X-Api-Key: {}",
            "Authorization: Bearer {}",
            "HF_TOKEN={}",
            'db_password = "{}"',
            "mysql -uroot -p{} -e 'select 1'",
            "postgres://trainer:{}@db.internal:5432/runs",
            "redis://:{}@cache:6379/0",
            "https://h.example/x?token={}&a=1",
            "https://h.example/x?a=1&sig={}",
            "Server=db;User ID=ml;Password={};Encrypt=true",
        )
    ),
]

surrounding = st.text(max_size=60)
separator = st.sampled_from([" ", "\n", "\t", " | ", "\r\n"])
fragments = st.one_of(
    st.text(max_size=30),
    st.sampled_from([text for text, _ in SECRETS]),
    st.sampled_from(
        ["[REDACTED]", "[EMAIL]", "token=", "Password: ", "://", "@", "-----BEGIN PRIVATE KEY-----"]
    ),
    st.sampled_from(
        ["step 10 loss=0.5 tokens_per_sec=123.4", "NCCL INFO Channel 00/02 : 0 1", "max_tokens: 512"]
    ),
)
mixed = st.lists(st.tuples(fragments, st.sampled_from(["", " ", "\n", "=", ": ", "/"])), max_size=8).map(
    lambda parts: "".join(text + glue for text, glue in parts)
)


@SETTINGS
@given(st.text())
def test_redaction_is_idempotent_on_any_text(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@SETTINGS
@given(mixed)
def test_redaction_is_idempotent_on_text_full_of_secrets(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@SETTINGS
@given(surrounding, separator, st.one_of(PLANTED), separator, surrounding)
def test_no_planted_secret_comes_out(
    before: str, sep1: str, secret: tuple[str, str], sep2: str, after: str
) -> None:
    text, value = secret
    assume(value not in before and value not in after)
    out = redact(before + sep1 + text + sep2 + after)
    assert value not in out


@SETTINGS
@given(mixed)
def test_every_rule_that_would_mask_passes_its_gate(text: str) -> None:
    """The RE2 gates decide which rules run; a gate that misses a match would let a secret out."""
    passed = set(redact_module._GATES.passed(text))
    for index, rule in enumerate(redact_module._RULES):
        if redact_module._apply(rule, text) != text:
            assert index in passed, rule.gate
