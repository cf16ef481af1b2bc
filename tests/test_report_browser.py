"""The report in a real browser: headless Chromium (Debian's ``chromium`` package) loads the page
the CLI wrote and the page the server serves behind the Slack button, and we check the DOM it
built, its console (no Content-Security-Policy violation: the inline stylesheet is allowed, and
there is no script to block), and a screenshot.

Skipped, saying so, where no Chromium is installed; ``.ci/run`` installs it.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from bot.cli.main import main
from tests.report_dom import Dom
from tests.slack_requests import Denpex, redis_for_app
from tests.test_report_page import EXAMPLE
from tests.test_report_served import diagnose_in_slack, local, served

__all__ = ["redis_for_app", "served"]  # fixtures

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no headless Chromium here: install Debian's chromium package (apt-get install chromium); "
    ".ci/run does",
)
# Without a network, Chromium stalls on its own connection attempts unless told not to make them.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",  # the page's console messages, CSP violations among them
    "--v=0",
)
TIMEOUT_S = 120
SIZE = (1280, 2000)


def command(profile: Path, *args: str) -> list[str]:
    assert CHROMIUM is not None
    profile.mkdir()  # a new, empty profile for every run: nothing carried over between tests
    return [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args]


def chromium(tmp_path: Path, name: str, *args: str) -> tuple[str, str]:
    done = subprocess.run(
        command(tmp_path / f"profile-{name}", *args), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


async def chromium_async(tmp_path: Path, name: str, *args: str) -> tuple[str, str]:
    """The same, without blocking the event loop (the app under test serves the page on it)."""
    proc = await asyncio.create_subprocess_exec(
        *command(tmp_path / f"profile-{name}", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode(), err.decode(errors="replace")


def console(stderr: str) -> list[str]:
    """The page's console messages in Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def assert_the_incident_is_on_the_page(dom: Dom) -> None:
    assert "Triton compilation failed" in dom.one(id="initiating-line").text
    rows = [e.attrs["data-rank"] for e in dom.all("g", cls="rank-row")]
    assert sorted(r for r in rows if r != "none") == sorted(str(r) for r in range(64))
    assert dom.one("text", cls="first-label").text == "first failure · rank 12"
    commands = [e.text for e in dom.all("pre", cls="cmd")]
    assert commands and commands[0].startswith("pip install --force-reinstall torch==")


def test_the_cli_page_in_chromium(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "report.html"
    assert main(["diagnose", str(EXAMPLE), "--html", str(page)]) == 0
    capsys.readouterr()
    dom_text, log = chromium(tmp_path, "dom", "--dump-dom", page.as_uri())
    dom = Dom(dom_text)
    assert_the_incident_is_on_the_page(dom)
    assert dom.all("script") == []
    shot = tmp_path / "report.png"
    _, shot_log = chromium(
        tmp_path, "shot", f"--screenshot={shot}", f"--window-size={SIZE[0]},{SIZE[1]}", page.as_uri()
    )
    assert png_size(shot) == SIZE
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one
    assert [m for m in console(log + shot_log) if "Content Security Policy" in m] == []


async def test_the_served_page_behind_the_slack_button_in_chromium(served: Denpex, tmp_path: Path) -> None:
    button = await diagnose_in_slack(served)
    url = str(served.server.make_url(local(button["url"])))
    dom_text, log = await chromium_async(tmp_path, "served", "--dump-dom", url)
    assert_the_incident_is_on_the_page(Dom(dom_text))
    # The header's policy (with frame-ancestors) allows the page's stylesheet: nothing refused.
    assert [m for m in console(log) if "Content Security Policy" in m] == []
