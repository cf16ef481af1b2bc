"""Secrets never leave the engine (signatures/redact.py), and diagnoses are redacted.

Every sample secret below is fake but has the real format. They are assembled from parts so that
secret scanners do not flag this file.
"""

from __future__ import annotations

import sys
import time

import pytest

from signatures import Source, diagnose, redact
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc

redact_module = sys.modules["signatures.redact"]


def j(*parts: str) -> str:
    return "".join(parts)


AWS_ID = j("AKIA", "IOSFODNN7EXAMPLE")
AWS_SECRET = j("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYEXAMPLEKEY")
GCP_KEY = j("AIza", "SyD9tSrke72PouQMnMXa7eZSW0jkFMBWY0x")
GH_PAT = j("ghp_", "R2d2C3po0123456789abcdefABCDEF012345")
GH_FINE = j(
    "github_pat_", "11ABCDEFG0123456789_", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"
)
SLACK_BOT = j("xoxb-", "123456789012-1234567890123-", "AbCdEfGhIjKlMnOpQrStUvWx")
STRIPE = j("sk_", "live_", "51HbQ2eKz8Xy7Wv6Ut5Sr4Qp3On")
OPENAI = j("sk-", "proj-", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z")
ANTHROPIC = j(
    "sk-", "ant-api03-", "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe", "-" * 2, "Dc9Ba8Zx7Yw6Vu5Ts4Rq3Po2Nm1Lk0AA"
)
PYPI = j("pypi-", "AgEIcHlwaS5vcmcCJGY1ZTQ2YzQ1LTk4ZDEtNGJlNi04ZjE2LTQ2NWY1N2I0ZTlkYgACKlsz")
JWT = j(
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ",
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
)
AZURE_KEY = j("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq", "/K1SZFPTOtr/KBHBeksoGMGw==")
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo\n"
)
RSA_BLOCK = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----"

# (text as a log would carry it, the secret that must not survive)
SECRETS = [
    # Cloud keys.
    (f"botocore.credentials Found credentials in env: {AWS_ID}", AWS_ID),
    (j("sts temporary key ", "ASIA", "Y34FZKBOKMUTVV7A", " expires in 3600s"), j("ASIA", "Y34FZKBOKMUTVV7A")),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    (f'{{"AccessKeyId": "{AWS_ID}", "SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET),
    (f"https://maps.googleapis.com/maps/api/geocode/json?key={GCP_KEY}", GCP_KEY),
    (f"GOOGLE_API_KEY={GCP_KEY}", GCP_KEY),
    (f"genai.configure(api_key={GCP_KEY!r})", GCP_KEY),
    (
        '{"type": "service_account", "private_key_id": "1a2b3c", "private_key": '
        f'"-----BEGIN PRIVATE KEY-----\\n{PEM_BODY.splitlines()[0]}\\n-----END PRIVATE KEY-----\\n"}}',
        PEM_BODY.splitlines()[0],
    ),
    (
        f"DefaultEndpointsProtocol=https;AccountName=ckpts;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        AZURE_KEY,
    ),
    (
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=q1W2e3R4t5Y6u7I8o9P0=",
        "q1W2e3R4t5Y6u7I8o9P0=",
    ),
    # VCS and CI tokens.
    (f"remote: https://x-access-token:{GH_PAT}@github.com/org/repo.git", GH_PAT),
    (f"GITHUB_TOKEN {GH_PAT} in use", GH_PAT),
    (
        f"gh auth with {j('gho_', '16C7e42F292c6912E7710c838347Ae178B4a')}",
        j("gho_", "16C7e42F292c6912E7710c838347Ae178B4a"),
    ),
    (
        f"app token {j('ghs_', 'aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2')}",
        j("ghs_", "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2"),
    ),
    (f"using {GH_FINE} for the clone", GH_FINE),
    (f"glab auth {j('glpat-', 'xYz12AbC34dEf56GhI78')}", j("glpat-", "xYz12AbC34dEf56GhI78")),
    (
        f"//registry.npmjs.org/:_authToken {j('npm_', 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8')}",
        j("npm_", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    ),
    (f"twine upload -u __token__ -p {PYPI}", PYPI),
    # Chat tokens and webhooks.
    (f"slack_sdk: token {SLACK_BOT}", SLACK_BOT),
    (
        j("user xoxp-", "1234567890-1234567890-1234567890-", "abcdef0123456789abcdef0123456789"),
        "abcdef0123456789abcdef0123456789",
    ),
    (
        j("app xapp-", "1-A0123456789-1234567890123-", "0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    ),
    (
        j("POST https://hooks.slack.com/services/", "T0A1B2C3D/B4E5F6G7H/", "AbCdEfGhIjKlMnOpQrStUvWx"),
        "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    (
        j(
            "https://discord.com/api/webhooks/",
            "112233445566778899/",
            "Ab1_Cd2-Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7",
        ),
        "Ab1_Cd2-Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7",
    ),
    (
        j(
            "GET https://api.telegram.org/bot",
            "110201543:",
            "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
            "/sendMessage",
        ),
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
    ),
    # Payment and LLM API keys.
    (f"stripe.error.AuthenticationError: Invalid API Key provided: {STRIPE}", STRIPE),
    (
        j("restricted key rk_", "live_", "51HbQ2eKz8Xy7Wv6Ut5Sr4Qp3On"),
        j("rk_", "live_", "51HbQ2eKz8Xy7Wv6Ut5Sr4Qp3On"),
    ),
    (f"openai.AuthenticationError: Incorrect API key provided: {OPENAI}", OPENAI),
    (
        j("legacy key sk-", "T3BlbkFJ0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8"),
        j("sk-", "T3BlbkFJ0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8"),
    ),
    (f"anthropic client with {ANTHROPIC}", ANTHROPIC),
    (j("HF hub hf_", "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"), j("hf_", "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh")),
    (j("oauth ya29.", "a0AfH6SMBx1y2z3A4b5C6d7E8f9G0h"), j("ya29.", "a0AfH6SMBx1y2z3A4b5C6d7E8f9G0h")),
    (j("client GOCSPX-", "1a2B3c4D5e6F7g8H9i0J1k2L3m4N"), j("GOCSPX-", "1a2B3c4D5e6F7g8H9i0J1k2L3m4N")),
    (f"id_token {JWT} expired", JWT),
    # Private keys, across lines.
    (f"loading key\n{RSA_BLOCK}\nstep 1 loss 0.5", PEM_BODY.splitlines()[1]),
    (
        j("-----BEGIN OPENSSH PRIVATE KEY-----\n", PEM_BODY, "-----END OPENSSH PRIVATE KEY-----"),
        PEM_BODY.splitlines()[2],
    ),
    (
        j(
            "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D\n\n",
            PEM_BODY,
        ),
        PEM_BODY.splitlines()[0],
    ),
    ("-----BEGIN RSA PRIVATE KEY-----MIIEowIBAAKCAQEA-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
    # Passwords in flags and command lines.
    ("python upload.py --password hunter2 --retries 3", "hunter2"),
    ("python upload.py --password=hunter2", "hunter2"),
    ("deepspeed train.py --hub-token 'abcdef123456' --bf16", "abcdef123456"),
    ("mysql -uroot -pS3cretPw -e 'select 1'", "S3cretPw"),
    ("mysql -u root -p S3cretPw runs", "S3cretPw"),
    ("+ mysqldump -h db -u admin -pS3cret! runs > runs.sql", "S3cret!"),
    ("sshpass -p 'S3cretPw' ssh node01", "S3cretPw"),
    ("redis-cli -h cache -a S3cretPw ping", "S3cretPw"),
    # Headers.
    ("Authorization: Bearer abc123def456ghi789", "abc123def456ghi789"),
    ("curl -H 'authorization: token ab12cd34ef56'", "ab12cd34ef56"),
    ("Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("{'Authorization': 'AWS4-HMAC-SHA256 Credential=xyz/20240101, Signature=0a1b2c'}", "0a1b2c"),
    ("X-Api-Key: 0123456789abcdef", "0123456789abcdef"),
    ("x-auth-token: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("Token: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("Password: hunter2", "hunter2"),
    ("ApiKey=k3y-value-42", "k3y-value-42"),
    ("Cookie: session=abc123; csrftoken=xyz789", "xyz789"),
    # URLs and connection strings.
    ("fetch https://alice:pa55word@storage.example.com/ckpt", "pa55word"),
    ("redis.exceptions.AuthenticationError: redis://:s3cretpw@cache:6379/0", "s3cretpw"),
    ("sqlalchemy postgresql+psycopg2://trainer:pg-pass_123@db.internal:5432/runs", "pg-pass_123"),
    ("mysql://root:r00t!pw@mysql:3306/db", "r00t!pw"),
    ("mongodb+srv://ml:m0ngo@pw@cluster0.abcd.mongodb.net/x?retryWrites=true", "m0ngo@pw"),
    ("amqp://guest:amqp-pw-1@rabbit:5672//", "amqp-pw-1"),
    ("GET https://example.com/ckpt.pt?token=abc123xyz&x=1", "abc123xyz"),
    (
        "https://acct.blob.core.windows.net/c/f.pt?sv=2022-11-02&se=2025-01-01&sig=AbC%2Bdef0123%3D",
        "AbC%2Bdef0123%3D",
    ),
    (
        f"https://b.s3.amazonaws.com/ckpt.pt?X-Amz-Credential={AWS_ID}%2F20240101%2Fus-east-1"
        "&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
        "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
    ),
    ("Server=tcp:db.windows.net;Database=runs;User ID=ml;Password=p@ss w0rd;Encrypt=true;", "p@ss w0rd"),
    # Names of secrets with their values.
    ("env WANDB_API_KEY=0123456789abcdef", "0123456789abcdef"),
    ("env HF_TOKEN=abc123secret", "abc123secret"),
    ("MY_SECRET: s3cr3t-value", "s3cr3t-value"),
    ("DB_PASSWORD=hunter2!", "hunter2!"),
    ("db_password = 'correct horse battery'", "correct horse battery"),
    ('{"password": "p@ss w0rd", "user": "ml"}', "p@ss w0rd"),
    ('payload: {\\"api_key\\": \\"k-0123456789\\"}', "k-0123456789"),
    ("Namespace(hf_token='abcdef123456', lr=0.1)", "abcdef123456"),
    ("client_secret=c5e-9f8a7b6c", "c5e-9f8a7b6c"),
    ("hf_token='abcdef123456'", "abcdef123456"),
    ("mail jane.doe+ml@example.org about it", "jane.doe+ml@example.org"),
    # Short forms the redactor has always caught.
    ("token xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
    ("app xapp-1-A0123456789-abcdefghij", "xapp-1-A0123456789-abcdefghij"),
    ("HF hub hf_AbCdEfGhIjKlMnOpQrStUvWx", "hf_AbCdEfGhIjKlMnOpQrStUvWx"),
    ("git ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_0123456789abcdefghijABCDEFGHIJ"),
    ("git github_pat_11ABCDEFG0123456789_abcdefghij", "github_pat_11ABCDEFG0123456789_abcdefghij"),
    ("aws AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdef", "eyJhbGciOiJIUzI1NiJ9abcdef"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_each_kind_of_secret_is_removed(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED]" in out or "[EMAIL]" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc123def456ghi789", "Authorization: Bearer [REDACTED]"),
        ("fetch https://alice:pa55word@host/x", "fetch https://alice:[REDACTED]@host/x"),
        ("redis://:pw123456@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("mysql -uroot -pS3cret -e 'select 1'", "mysql -uroot -p[REDACTED] -e 'select 1'"),
        ('{"password": "p@ss w0rd"}', '{"password": "[REDACTED]"}'),
        ("?a=1&sig=xyz&b=2", "?a=1&sig=[REDACTED]&b=2"),
        (
            f"hook https://hooks.slack.com/services/{'T0/B1/' + 'x' * 24}",
            "hook https://hooks.slack.com/services/[REDACTED]",
        ),
        (f"a\n{RSA_BLOCK}\nb", "a\n[REDACTED] (private key)\nb"),
    ],
)
def test_only_the_secret_is_masked(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_begin_line_without_end_masks_the_key_lines_after_it_not_the_log() -> None:
    text = f"step 10 loss 0.5\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY}step 11 loss 0.4 lr=1e-4\n"
    out = redact(text)
    assert all(line not in out for line in PEM_BODY.splitlines())
    assert out.startswith("step 10 loss 0.5\n")
    assert out.endswith("step 11 loss 0.4 lr=1e-4\n")


def test_a_begin_line_without_end_in_a_windows_log_masks_the_key_lines_too() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\r\n" + PEM_BODY.replace("\n", "\r\n") + "step 11 loss 0.4\r\n"
    out = redact(text)
    assert all(line not in out for line in PEM_BODY.splitlines())
    assert out.endswith("\r\nstep 11 loss 0.4\r\n")


def test_a_key_body_line_on_its_own_is_masked() -> None:
    """The engine redacts one evidence line at a time; a PEM body line there has no BEGIN line."""
    line = PEM_BODY.splitlines()[1]
    assert redact(line) == "[REDACTED]"
    assert redact("  " + line + "\n") == "  [REDACTED]\n"


@pytest.mark.parametrize(
    "text",
    [
        "num_tokens=4096 max_tokens: 12",
        "step 10 loss=0.123 grad_norm 1.2 tokens_per_sec=51234.5 lr=3.0e-04",
        "max_tokens: 512",
        "pad_token_id=0 eos_token_id=2",
        "eos_token='</s>' bos_token: <s> pad_token=<pad> unk_token: <unk>",
        "Setting `pad_token_id` to `eos_token_id`:2 for open-end generation.",
        "Using pad_token, but it is not set yet.",
        "   - Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)",
        "key_padding_mask=None use_auth_token=True hf_token=None",
        "KeyError: 'token'",
        "tokens/s 1.3e+06",
        "NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7",
        "node01:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
        "NCCL version 2.18.1+cuda12.1",
        "[rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
        "/home/ml/.cache/huggingface/hub/models--meta-llama--Llama-2-7b-hf/snapshots/"
        "8cca527612d856d7d32bd94f8103728d614eb852/config.json",
        "torch 2.3.0+cu121 (git 97ff6cfd9c86c5c09d7ce775ab64ec5c99230f5d)",
        "transformers 4.40.0.dev0+git1a2b3c4",
        "sha256:3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a",
        "Epoch 3: 100%|██████████| 500/500 [01:23<00:00,  6.01it/s, loss=0.112]",
        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 1234)",
        "CUDA_VISIBLE_DEVICES=0,1,2,3 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500",
        "python train.py --max-tokens 512 --tokenizer gpt2 --key-dim 64 --no-auth",
        "ssh -p 2222 node01; mysql -P 3306 -h db",
        "docker run -p 8080:80 trainer:latest",
        "2024-05-01 12:00:01,123 - INFO - Authorization succeeded for the job",
        "pip install git+https://github.com/org/repo@v1.2.3",
        "https://huggingface.co/meta-llama/Llama-2-7b-hf/resolve/main/config.json",
        "Signal 11 (SIGSEGV) received by PID 2034",
        "secret_sauce_enabled=False",
    ],
)
def test_ordinary_training_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_long_log_is_redacted_across_its_chunks() -> None:
    """Past 64 KiB a text is gated in chunks cut at line ends; no secret falls between them."""
    ordinary = "step 100 loss=0.25 tokens_per_sec=41000.5 lr=1e-4 [rank0]\n"
    lines = [ordinary] * 5000
    for at in (0, 1100, 1101, 2499, 4999):
        lines[at] = f"env HF_TOKEN=secret{at}x SLACK {SLACK_BOT}\n"
    out = redact("".join(lines))
    assert "HF_TOKEN=[REDACTED]" in out
    assert all(f"secret{at}x" not in out for at in (0, 1100, 1101, 2499, 4999))
    assert SLACK_BOT not in out
    assert out.count(ordinary) == 4995


@pytest.mark.parametrize(
    "text",
    [
        "mysql " * 50_000,
        "password: a " * 30_000,
        "api_key: a " * 30_000,
        "Password=a b c " * 30_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 20_000,
        "1" * 300_000 + ":A" + "b" * 34,
        "--" + "a-" * 100_000 + "token x",
    ],
    ids=["mysql-words", "password-colon", "api-key-colon", "ado", "begin", "digits", "option-name"],
)
def test_hostile_lines_take_linear_time(text: str) -> None:
    """Each of these took minutes when a value or command scan ran to the end of the line."""
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 5.0


def test_gates_without_re2_give_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gates are valid in Python's re too: without google-re2 they are searched one by one."""
    gates = [rule.gate for rule in redact_module._RULES]
    with_re2 = redact_module._Gates(gates)
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 raises ImportError
    without = redact_module._Gates(gates)
    assert without._set is None
    for text, _ in SECRETS:
        assert without.passed(text) == with_re2.passed(text)


def test_diagnosis_text_is_redacted(tmp_path) -> None:
    lib: Library = build_library(tmp_path, [signature_doc("kernel-fault")])
    log = "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx\nkernel-fault happened for bob@example.com\n"
    d = diagnose([Source.from_text("x.log", log)], library=lib)
    dumped = str(d.to_dict())
    assert "bob@example.com" not in dumped and "hf_AbCdEfGhIjKlMnOpQrStUvWx" not in dumped
    assert d.initiating and "[EMAIL]" in d.initiating.text


@pytest.mark.parametrize("text,secret", SECRETS)
def test_the_open_gates_pass_every_text_the_written_gates_pass(text: str, secret: str) -> None:
    # The gate set is compiled with counted repeats made open: it must pass at least what they do.
    import re

    written = {i for i, rule in enumerate(redact_module._RULES) if re.search(rule.gate, text)}
    assert written <= set(redact_module._GATES.passed(text))


def test_open_counts_keep_optional_repeats_optional() -> None:
    assert redact_module._open_counts("AIza[0-9A-Za-z_-]{35}") == "AIza[0-9A-Za-z_-]+"
    assert redact_module._open_counts("=[^;]{1,256};") == "=[^;]+;"
    assert redact_module._open_counts("x{0,3}y") == "x*y"  # not x+y: zero x's still pass
    assert redact_module._open_counts(r"a\{2\}") == r"a\{2\}"  # a literal brace is no repeat
