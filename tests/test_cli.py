"""`denpex diagnose` and `denpex signatures ...` as a user runs them."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from signatures.docs import render_signatures_markdown
from signatures.engine import default_library
from tests.sigfactory import signature_doc, write_library

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "signatures" / "examples" / "llama-64gpu-triton.log"
KEYS = {
    "status",
    "signature",
    "confidence",
    "initiating",
    "downstream",
    "root_causes",
    "fix",
    "decision_path",
    "missing_facts",
    "environment",
}


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["diagnose", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_example_names_rank_12s_triton_failure(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, str(EXAMPLE))
    assert data.keys() >= KEYS
    assert data["status"] == "failure"
    assert data["signature"]["id"] == "triton-compilation-failed"
    init = data["initiating"]
    assert init["rank"] == 12 and "Triton compilation failed" in init["text"]
    assert init["file"].endswith("llama-64gpu-triton.log") and init["line"] > 1
    groups = {g["signature"]: g for g in data["downstream"]}
    timeouts = groups["nccl-watchdog-collective-timeout"]
    assert len(timeouts["ranks"]) == 63 and timeouts["count"] >= 63
    assert 12 not in timeouts["ranks"]
    assert data["fix"] and data["decision_path"] and data["root_causes"]
    assert data["environment"]["torch"] == "2.5.1+cu124"


def test_context_option_bounds_the_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "--context", "1", str(EXAMPLE))
    assert len(data["initiating"]["before"]) <= 1 and len(data["initiating"]["after"]) <= 1


def test_human_output_names_what_where_and_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    for part in ("Where it started", "rank 12", "What followed", "Fix", "Decision path", "What I still need"):
        assert part in out


def test_version_is_printed_on_standard_output() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--version"], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert proc.stdout.startswith("denpex ") and proc.stdout.strip() != "denpex"
    assert proc.stderr == ""


def test_stdin_is_read_with_a_dash() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "diagnose", "--json", "-"],
        input=EXAMPLE.read_bytes(),
        capture_output=True,
        check=True,
        cwd=ROOT,
    )
    data = json.loads(proc.stdout)
    assert data["initiating"]["file"] == "<stdin>" and data["initiating"]["rank"] == 12


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"\x00\x01\x02binary\x00" * 100, "binary"),
        (b"\x1f\x8b\x08\x00not really gzip", "gzip"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, message: str
) -> None:
    path = tmp_path / "bad.log.gz"
    if content is not None:
        path.write_bytes(content)
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_gzip_input_gives_the_same_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gz = tmp_path / "example.log.gz"
    gz.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    plain = run_json(capsys, str(EXAMPLE))
    packed = run_json(capsys, str(gz))
    assert packed["initiating"]["line"] == plain["initiating"]["line"]
    assert packed["signature"] == plain["signature"]


def test_lint_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = signature_doc("broken-one", unknown_field=1)
    bad["fingerprints"] = [{"regex": "(a+)+$"}]
    write_library(tmp_path, [bad, signature_doc("fine-one")])
    assert main(["signatures", "lint", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "broken-one.yaml: unknown_field: unknown field" in err
    assert "broken-one.yaml: fingerprints[0].regex: nested unbounded repeats" in err


def test_bundled_library_lints_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["signatures", "lint"]) == 0
    assert "no problems" in capsys.readouterr().out


def test_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["signatures", "list", "--category", "distributed"]) == 0
    out = capsys.readouterr().out
    assert "nccl-watchdog-collective-timeout" in out and "cuda-oom-allocator" not in out
    assert main(["signatures", "show", "cuda-oom-allocator"]) == 0
    assert "Fingerprints" in capsys.readouterr().out
    assert main(["signatures", "show", "no-such-thing"]) == 2


def test_docs_page_is_up_to_date() -> None:
    expected = render_signatures_markdown(default_library().signatures)
    assert (ROOT / "docs" / "signatures.md").read_text(encoding="utf-8") == expected, (
        "docs/signatures.md is stale: run `denpex signatures docs --output docs/signatures.md`"
    )


def test_json_output_does_not_load_the_terminal_renderer() -> None:
    # rich costs ~50 ms of start-up; a script reading --json never sees its output.
    code = (
        "import json, sys\n"
        "from bot.cli.main import main\n"
        f"code = main(['diagnose', '--json', {str(EXAMPLE)!r}])\n"
        "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    code, loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert code == 0 and json.loads(proc.stdout)["initiating"]["rank"] == 12
    assert sorted(m for m in loaded if m == "rich" or m.startswith("rich.")) == []
    assert "bot.cli.terminal" not in loaded
