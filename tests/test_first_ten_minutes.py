"""What a new user meets in the first ten minutes: the CLI, `denpex serve`, the docs and deploy files.

Each test reproduces one stumble a new user had, through the real command where there is one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli.main import main
from bot.slack.render import render_headline, render_parent
from signatures import Diagnosis, Evidence, SignatureRef, Status
from signatures.display import human_time
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "signatures" / "examples" / "llama-64gpu-triton.log"
GLOG_LINE = (
    "[rank14]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [Rank 14] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=2070, OpType=ALLREDUCE) ran for 600000 milliseconds before "
    "timing out.\n"
)


def denpex(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command in a child process, as a user runs it (stdout is a pipe)."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        cwd=ROOT,
        timeout=120,
    )


def without_redis() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    return env


def until_healthy(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except urllib.error.HTTPError as exc:  # not ready yet (503)
            exc.close()
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"nothing answered on port {port}")


# -- 1. commands that read Redis -----------------------------------------------------------


@pytest.mark.redis
def test_jobs_stats_needs_only_redis_url(redis_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    done = denpex("jobs", "stats", env={**env, "REDIS_URL": redis_url})
    assert done.returncode == 0, done.stderr
    assert re.search(r"^length\s+\d+$", done.stdout, re.M)


def test_unreachable_redis_is_one_line_without_a_traceback() -> None:
    port = free_port()  # nothing listens there
    done = denpex("jobs", "stats", env={**os.environ, "REDIS_URL": f"redis://:s3cret@127.0.0.1:{port}/0"})
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"denpex: cannot reach Redis at redis://:***@127.0.0.1:{port}/0")
    assert "s3cret" not in done.stderr


@pytest.mark.redis
def test_a_job_id_where_a_dead_letter_id_belongs_is_one_line(redis_url: str) -> None:
    done = denpex("jobs", "--redis-url", redis_url, "dead-letter", "retry", "0f3c9a1b2d")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "not a dead-letter entry id" in line and "1712345678901-0" in line


def test_stats_without_redis_says_so_instead_of_reading_an_empty_store() -> None:
    done = denpex("stats", env=without_redis())
    assert done.returncode == 2
    assert "No diagnoses" not in done.stdout
    assert "set REDIS_URL" in done.stderr


# -- 2. the package name -------------------------------------------------------------------


def test_no_document_tells_anyone_to_pip_install_the_unrelated_denpex() -> None:
    texts = [
        ROOT / "README.md",
        *ROOT.glob("docs/*.md"),
        *(p for p in (ROOT / "deploy").rglob("*") if p.is_file()),
    ]
    offenders = []
    for path in texts:
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if (
                re.search(r"pip3? install\s+(-U\s+|--upgrade\s+)?denpex(?![-_\w])", line)
                and "never" not in line.lower()
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_the_distribution_has_its_own_name_and_the_command_stays_denpex() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] != "denpex"
    assert project["scripts"] == {"denpex": "bot.cli.main:main"}
    assert isinstance(project["license"], str)  # an SPDX expression, not the deprecated table


# -- 3. one unreadable input among many ---------------------------------------------------


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64


def test_a_binary_member_of_a_zip_is_skipped_with_a_note_and_the_rest_diagnosed(tmp_path: Path) -> None:
    bundle = tmp_path / "outputs.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("loss.png", PNG)
        zf.writestr("train.log", EXAMPLE.read_bytes())
    done = denpex("diagnose", "--json", str(bundle))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["initiating"]["rank"] == 12
    [note] = data["skipped"]
    assert "loss.png" in note and "binary" in note
    assert f"denpex: skipped {note}" in done.stderr


def test_a_binary_among_rank_files_is_skipped_and_only_nothing_readable_exits_2(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "rank1.bin").write_bytes(PNG)
    done = denpex("diagnose", str(tmp_path / "rank0.log"), str(tmp_path / "rank1.bin"))
    assert done.returncode == 0
    assert "denpex: skipped" in done.stderr and "rank1.bin" in done.stderr
    alone = denpex("diagnose", str(tmp_path / "rank1.bin"))
    assert alone.returncode == 2
    [line] = alone.stderr.strip().splitlines()
    assert "rank1.bin" in line and "binary" in line


# -- 4. the bot's own mention --------------------------------------------------------------


def test_the_requesting_users_mention_stays_a_mention_and_nothing_else_does() -> None:
    header = "Diagnosis of <!channel>.log (requested by <@U1ABC>)"
    parent = render_parent(header, mention="U1ABC").text
    assert "<@U1ABC>" in parent
    assert "<!channel>" not in parent and "&lt;!channel&gt;" in parent
    # Without the verified requester, a mention from a webhook's text stays inert.
    assert "<@U1ABC>" not in render_parent(header).text
    diagnosis = Diagnosis(status=Status.CLEAN, signature=None, confidence=0.0, initiating=None)
    assert "<@U1ABC>" in render_headline(diagnosis, header, mention="U1ABC").text


# -- 5. Slack manifest and the docs that point at it ---------------------------------------


def test_the_manifest_opens_the_messages_tab_it_subscribes_to() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "slack-manifest.yaml").read_text())
    assert "message.im" in manifest["settings"]["event_subscriptions"]["bot_events"]
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True


def test_the_readme_lists_every_slash_subcommand_and_docs_point_at_the_manifest_file() -> None:
    readme = (ROOT / "README.md").read_text()
    for sub in ("diagnose", "help", "signatures", "explain", "history", "stats"):
        assert f"`/denpex {sub}" in readme, sub
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "manifest in the README" not in operations
    assert "deploy/slack-manifest.yaml" in operations


# -- 7. the CLI ------------------------------------------------------------------------------


def test_version_and_bare_command_answer_instead_of_erroring(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert re.fullmatch(r"denpex \S+\n", capsys.readouterr().out)
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: denpex") and "diagnose" in out


def test_a_closed_pipe_ends_quietly() -> None:
    # `denpex signatures list | head -1`: the reader leaves after one line.
    with subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "signatures", "docs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert proc.returncode in (0, 141)


def test_a_negative_context_is_refused() -> None:
    done = denpex("diagnose", "--context", "-3", str(EXAMPLE))
    assert done.returncode == 2
    assert "expected 0 or more" in done.stderr


def test_signatures_docs_writes_to_stdout_not_into_the_working_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "signatures", "docs"],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Signature library")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [
        (("signatures", "show", "nccl-watchdog-collective-timout"), "nccl-watchdog-collective-timeout"),
        (("signatures", "list", "--category", "distributd"), "distributed"),
    ],
)
def test_a_mistyped_name_gets_a_suggestion(args: tuple[str, ...], suggestion: str) -> None:
    done = denpex(*args)
    assert done.returncode == 2
    assert f"did you mean {suggestion}" in done.stderr


def test_times_read_as_times() -> None:
    assert human_time("09-09T09:55:29.307629539") == "Sep 9 09:55:29.307 (no year in the log)"
    assert human_time("2024-09-11T17:52:18.030123Z") == "2024-09-11 17:52:18.030 UTC"
    done = denpex("diagnose", "-", stdin=GLOG_LINE.encode())
    assert "Sep 9 09:55:29.307" in done.stdout
    assert "307629539" not in done.stdout.split("Where it started", 1)[1].splitlines()[0]


def test_piped_output_keeps_roles_apart_and_is_not_wrapped() -> None:
    done = denpex("diagnose", str(EXAMPLE))
    assert done.returncode == 0
    out = done.stdout
    assert "\x1b[" not in out  # no colour codes in a pipe
    followed = out.split("What followed", 1)[1].split("\n\n", 1)[0]
    groups = [line for line in followed.splitlines() if line.strip().startswith("•")]
    assert groups and all(re.search(r"\((downstream|wrapper|benign|initiating|unknown)\b", g) for g in groups)
    assert all(not re.search(r"[a-z] (downstream|wrapper)\b", g) for g in groups)
    fix = out.split("\nFix\n", 1)[1].split("\n\n", 1)[0]
    longest = max(len(line) for line in fix.splitlines())
    assert longest > 100  # a long fix step stays on one line instead of being cut at 80 columns


def test_a_count_that_stopped_at_its_cap_says_at_least(tmp_path: Path) -> None:
    watchdog = GLOG_LINE.replace("[rank14]:", "[rank{r}]:").replace("[Rank 14]", "[Rank {r}]")
    lines = ["[rank12]: RuntimeError: Triton compilation failed: boom\n"]
    lines += [watchdog.format(r=i % 64) for i in range(6000)]
    log = tmp_path / "many.log"
    log.write_text("".join(lines))
    data = json.loads(denpex("diagnose", "--json", str(log)).stdout)
    [watchdogs] = [g for g in data["downstream"] if g["signature"] == "nccl-watchdog-collective-timeout"]
    assert watchdogs["capped"] is True and watchdogs["count"] < 6000
    out = denpex("diagnose", str(log)).stdout
    assert f"at least {watchdogs['count']}× NCCL watchdog" in out
    small = json.loads(denpex("diagnose", "--json", str(EXAMPLE)).stdout)
    assert not any(g["capped"] for g in small["downstream"])


# -- 8. denpex serve -------------------------------------------------------------------------


def test_serve_names_every_bad_setting_at_once() -> None:
    env = {k: v for k, v in without_redis().items() if not k.startswith(("SLACK_", "DENPEX_", "PORT"))}
    done = denpex("serve", env={**env, "SLACK_BOT_TOKEN": "wrong", "PORT": "http", "DENPEX_WORKERS": "0"})
    assert done.returncode == 2
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "PORT", "DENPEX_WORKERS"):
        assert name in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_says_where_it_listens_and_with_what() -> None:
    port = free_port()
    env = {
        **without_redis(),
        "SLACK_BOT_TOKEN": "xoxb-first-ten-minutes",
        "SLACK_SIGNING_SECRET": "signing",
        "PORT": str(port),
        "DENPEX_WORKERS": "2",
    }
    lines: list[dict[str, Any]] = []
    serve = [sys.executable, "-m", "bot.cli", "serve"]
    with subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT) as proc:
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                raw = proc.stdout.readline()
                if not raw:
                    break
                lines.append(json.loads(raw))
                if "listening on" in lines[-1]["message"]:
                    break
            # Stop it once it serves (a signal during start-up would test something else).
            until_healthy(port)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
    banner = next(line["message"] for line in lines if "listening on" in line["message"])
    assert f"http://localhost:{port}" in banner
    assert "embedded" in banner and "2 worker(s)" in banner
    assert re.search(r"\b\d{2,} signatures\b", banner)
    assert not any("will be unused" in line["message"] for line in lines)


# -- 9. docs in step with the output ---------------------------------------------------------


def documented_json_keys() -> dict[str, set[str]]:
    """The README's `--json` table: top-level keys, and the keys of the nested objects it shows."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("`--json` prints one object", 1)[1].split("\n\n", 2)[1]
    top: set[str] = set()
    nested: dict[str, set[str]] = {}
    for row in table.splitlines()[2:]:
        key_cell, value_cell = row.split(" | ", 1)
        keys = re.findall(r"`(\w+)`", key_cell)
        top.update(keys)
        shape = re.search(r"`\[?\{([^`]*)\}", value_cell)
        if shape and len(keys) == 1:
            inner = re.sub(r"\{[^{}]*\}", "", shape.group(1))
            nested[keys[0]] = {k.strip().rstrip(":?") for k in inner.split(",") if k.strip()}
    nested[""] = top
    return nested


def test_the_readme_documents_exactly_the_keys_the_json_has(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--json", str(EXAMPLE)]) == 0
    data = json.loads(capsys.readouterr().out)
    documented = documented_json_keys()
    assert documented[""] == set(data)
    assert documented["signature"] == set(data["signature"])
    assert documented["initiating"] == set(data["initiating"])
    assert documented["downstream"] == set(data["downstream"][0])
    assert documented["advice"] == set(data["advice"])


def test_a_text_file_named_zip_is_read_as_the_text_it_is(tmp_path: Path) -> None:
    named = tmp_path / "rank12-output.zip"
    named.write_bytes(EXAMPLE.read_bytes())
    done = denpex("diagnose", "--json", str(named))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["initiating"]["rank"] == 12


def test_the_json_table_parser_sees_a_missing_key() -> None:
    documented = documented_json_keys()
    real = Diagnosis(
        status=Status.FAILURE,
        signature=SignatureRef("x", "X", "c", "initiating"),
        confidence=1.0,
        initiating=Evidence("f", 1, "t"),
    ).to_dict()
    assert documented[""] == set(real)
    assert documented[""] - {"summary"} != set(real)
