"""The advice where people read it: the top of the Slack message and the report page."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bot.pages.report import render_report
from bot.slack.advice import BLOCK_ID
from bot.slack.render import render_diagnosis
from signatures import Diagnosis, diagnose
from signatures.advice import Advice, Decision
from signatures.spec import RestartClass

ROOT = Path(__file__).resolve().parent.parent
NODE_FAILURE = ROOT / "tests" / "corpus" / "extra2b" / "extra2b-070.log"
HEALTHY = ROOT / "tests" / "healthy" / "torchrun-ddp.log"


def node_failure() -> Diagnosis:
    return diagnose([NODE_FAILURE])


def test_slack_puts_the_advice_right_under_the_headline() -> None:
    blocks = render_diagnosis(node_failure()).blocks
    assert blocks[0]["type"] == "header"
    assert blocks[1]["block_id"] == BLOCK_ID
    text = blocks[1]["text"]["text"]
    assert text.startswith(":twisted_rightwards_arrows: *Restart without worker-1: Slurm lost the node")
    assert text.endswith("_(90% sure)_")


def test_slack_escapes_a_host_taken_from_a_log_and_shows_history() -> None:
    advice = Advice(
        Decision.RESTART_EXCLUDING,
        RestartClass.NODE,
        "bad GPU",
        0.9,
        exclude_hosts=("<!channel>",),
        history=("3rd failure on <!channel> this week",),
    )
    message = render_diagnosis(replace(node_failure(), advice=advice))
    text = json.dumps(message.blocks)
    assert "<!channel>" not in text
    assert "Restart without &lt;!channel&gt;: bad GPU" in text
    assert ":repeat: 3rd failure on &lt;!channel&gt; this week" in text


def test_slack_shows_no_advice_for_a_run_that_did_not_fail() -> None:
    d = diagnose([HEALTHY])
    assert d.advice is None
    assert all(b.get("block_id") != BLOCK_ID for b in render_diagnosis(d).blocks)


def test_the_report_page_says_what_to_do_next() -> None:
    page = render_report(node_failure())
    assert (
        '<p class="advice" id="advice"><strong>What to do next:</strong> Restart without worker-1: '
        "Slurm lost the node under the job; the code is not at fault</p>"
    ) in page
    assert 'id="advice"' not in render_report(diagnose([HEALTHY]))
