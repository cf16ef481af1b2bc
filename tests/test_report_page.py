"""The full report page: what `denpex diagnose --html` writes and `denpex serve` serves.

Self-contained (no script, no external asset), every part of the diagnosis on it, log text
escaped and redacted, and a stylesheet the page's own policy allows.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from bot.pages.report import content_security_policy, render_report, response_headers
from bot.pages.view import ReportInfo
from signatures import Diagnosis, Source, diagnose
from tests.report_dom import Dom

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "signatures" / "examples" / "llama-64gpu-triton.log"
SECTIONS = ("initiating", "timeline", "downstream", "why", "causes", "fix", "decision", "checklist",
            "missing", "environment", "files")  # fmt: skip


@pytest.fixture(scope="module")
def example() -> Diagnosis:
    return diagnose([Source.from_path(EXAMPLE)])


@pytest.fixture(scope="module")
def page(example: Diagnosis) -> str:
    return render_report(example)


def hostile(**over: Any) -> Diagnosis:
    """A diagnosis whose log text tries to break out of the page, as if nothing had redacted it."""
    data: dict[str, Any] = {
        "status": "failure",
        "signature": {"id": "x-fail", "title": "X failed", "category": "runtime", "role": "initiating"},
        "confidence": 0.8,
        "initiating": {
            "file": "<b>rank0</b>.log",
            "line": 3,
            "text": "[rank0]: RuntimeError: <script>alert('x')</script><img src=x onerror=alert(1)> "
            "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123",
            "rank": 0,
            "host": "node-1",
            "time": None,
            "before": ["Authorization: Bearer abcdefghijklmnop", "login for alice@example.com"],
            "after": ["</code></pre><script>alert(2)</script>"],
        },
        "downstream": [
            {
                "signature": None,
                "title": None,
                "role": "unknown",
                "count": 2,
                "ranks": [1],
                "first": {"file": "rank1.log", "line": 9, "text": "[rank1]: <svg onload=alert(3)>"},
            }
        ],
        "fix": [{"step": "Set `TOKENIZERS_PARALLELISM`.", "command": "export TOKENIZERS_PARALLELISM=false"}],
        "environment": {"torch": '2.5"><script>alert(4)</script>', "user": "bob@example.com"},
        "files": ["<b>rank0</b>.log", "rank1.log"],
        **over,
    }
    return Diagnosis.from_dict(data)


def test_cli_writes_a_self_contained_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["diagnose", str(EXAMPLE), "--html", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"wrote the report to {out}" in captured.err
    assert "Triton kernel failed to compile" in captured.out  # the terminal answer is still printed
    html = out.read_text(encoding="utf-8")
    dom = Dom(html)
    assert dom.all("script") == [] and dom.all("link") == [] and dom.all("iframe") == []
    assert [e for e in dom.elements if "src" in e.attrs] == []
    assert {e.attrs["href"][0] for e in dom.all("a")} == {"#"}  # in-page anchors only
    assert not re.search(r"url\(|@import", dom.one("style").text)
    assert "default-src 'none'" in dom.one("meta", http_equiv="Content-Security-Policy").attrs["content"]


def test_cli_with_json_keeps_standard_output_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["diagnose", "--json", str(EXAMPLE), "--html", str(out)]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")
    assert out.stat().st_size > 10_000


def test_cli_says_when_the_page_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(EXAMPLE), "--html", str(tmp_path / "missing" / "r.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_every_part_of_the_diagnosis_is_on_the_page(page: str, example: Diagnosis) -> None:
    dom = Dom(page)
    assert dom.one("h1").text == "Triton kernel failed to compile"
    assert dom.one(id="status").text == "Failure"
    for section in SECTIONS:
        assert dom.all("section", id=section), section
    hit = dom.one(id="initiating-line").text
    assert "Triton compilation failed" in hit and hit.startswith("114")
    context = dom.all("span", cls="ln")
    assert len(context) == 1 + len(example.initiating.before) + len(example.initiating.after)  # type: ignore[union-attr]
    commands = [e.text for e in dom.all("pre", cls="cmd")]
    assert commands == [step["command"] for step in example.fix]
    glance = dict(zip([e.text for e in dom.all("dt")], [e.text for e in dom.all("dd")], strict=True))
    assert glance["First failure"].startswith("rank 12 · ")
    assert glance["Ranks that reported"] == "64 of 64"
    groups = dom.all("div", cls="group")
    assert len(groups) == len(example.downstream)
    assert any("71 lines from 63 ranks (0–11, 13–63)" in g.text for g in groups)
    assert "torch" in dom.one("table", cls="env").text and "2.5.1+cu124" in page
    assert example.files[0] in dom.one("section", id="files").text


def test_timeline_has_a_row_per_rank_a_column_per_report_and_a_labelled_first_failure(
    page: str, example: Diagnosis
) -> None:
    dom = Dom(page)
    rows = [e.attrs["data-rank"] for e in dom.all("g", cls="rank-row")]
    assert sorted(r for r in rows if r != "none") == sorted(str(r) for r in range(64))
    assert rows.count("none") == 1  # the launcher's lines carry no rank
    assert [c.attrs["data-event"] for c in dom.all("g", cls="column") if "first" in c.classes] == ["1"]
    assert "first" in dom.one("g", cls="rank-row", data_rank="12").classes
    assert dom.one("text", cls="first-label").text == "first failure · rank 12"
    assert len(dom.all("g", cls="column")) == 1 + len(example.downstream)
    markers = [e for e in dom.elements if "dot" in e.classes and e.inside("g", "markers")]
    by_role = {
        role: sum(f"role-{role}" in m.classes for m in markers)
        for role in ("initiating", "downstream", "wrapper")
    }
    # One marker per rank that printed a group's line (one for a group with no rank), plus the
    # initiating line itself: on the example, rank 12's error, the 63 watchdogs, the launcher.
    expected = {"initiating": 1, "downstream": 0, "wrapper": 0}
    for group in example.downstream:
        if group.role in expected:
            expected[group.role] += max(1, len(group.ranks))
    assert by_role == expected
    assert expected["downstream"] >= 63
    assert len(dom.all("circle", cls="ring")) == 1
    deltas = [e.text for e in dom.all("text", cls="delta")]
    assert deltas[:2] == ["+0s", "+9m 12s"]  # the watchdogs fired 9 minutes after rank 12 failed


def test_log_text_is_escaped_never_markup() -> None:
    html = render_report(hostile())
    dom = Dom(html)
    assert dom.all("script") == [] and dom.all("img") == []
    assert [e for e in dom.elements if any(a.startswith("on") for a in e.attrs)] == []
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "<b>" not in html and "&lt;b&gt;rank0&lt;/b&gt;.log" in html
    assert "<svg onload" not in html


def test_log_text_is_redacted_even_when_the_producer_did_not() -> None:
    html = render_report(hostile())
    for secret in (
        "hf_abcdefghijklmnopqrstuvwxyz0123",
        "abcdefghijklmnop",
        "alice@example.com",
        "bob@example.com",
    ):
        assert secret not in html, secret
    assert "[REDACTED]" in html and "[EMAIL]" in html


def test_library_commands_are_printed_as_written() -> None:
    html = render_report(hostile())
    assert Dom(html).one("pre", cls="cmd").text == "export TOKENIZERS_PARALLELISM=false"
    assert "Set <code>TOKENIZERS_PARALLELISM</code>." in html  # the library's `code` spans


def test_the_inline_stylesheet_is_the_one_the_policy_allows(page: str) -> None:
    dom = Dom(page)
    css = dom.one("style").text
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    meta = dom.one("meta", http_equiv="Content-Security-Policy").attrs["content"]
    for policy in (meta, content_security_policy()):
        assert f"style-src 'sha256-{digest}'" in policy
        assert "default-src 'none'" in policy and "script-src" not in policy and "unsafe" not in policy
    assert "frame-ancestors" not in meta  # ignored (and warned about) in a <meta> policy
    headers = response_headers()
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cache-Control"] == "private, no-store"


def test_a_clean_diagnosis_has_no_timeline_and_says_so() -> None:
    clean = diagnose([Source.from_bytes("train.log", b"step 1 loss 2.0\nstep 2 loss 1.9\n")])
    dom = Dom(render_report(clean))
    assert dom.one("h1").text == "No failure found"
    assert dom.all("section", id="timeline") == [] and dom.all("svg", cls="timeline") == []
    assert "status-clean" in dom.one("body").classes


def test_an_unrecognized_failure_shows_its_first_error_line() -> None:
    data = hostile(status="unrecognized", signature=None, fix=[])
    dom = Dom(render_report(data))
    assert dom.one("h1").text == "Unrecognized failure"
    assert dom.all("h2")[0].text == "First error line"
    assert "First error line" in dom.one("g", cls="column", data_event="1").text


def test_served_page_names_the_diagnosis_and_when_its_link_expires(example: Diagnosis) -> None:
    info = ReportInfo(
        generated_at=datetime(2026, 11, 29, 4, 0, tzinfo=UTC),
        diagnosis_id="abc123",
        origin="job llama, from /denpex",
        expires_at=datetime(2026, 12, 6, 4, 0, tzinfo=UTC),
    )
    footer = Dom(render_report(example, info)).one("footer").text
    assert "abc123" in footer and "job llama, from /denpex" in footer
    assert "until 2026-12-06 04:00 UTC" in footer and "never the log" in footer
