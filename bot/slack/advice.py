"""The advice's one line at the top of a diagnosis message: restart, restart without a host, stop.

Hosts and reasons can come from a log, so the line is escaped like every other log text.
"""

from __future__ import annotations

from typing import Any

from bot.slack import blocks as bk
from bot.slack.blocks import escape
from signatures.advice import Advice, Decision

EMOJI = {
    Decision.RESTART: ":arrow_forward:",
    Decision.RESTART_EXCLUDING: ":twisted_rightwards_arrows:",
    Decision.STOP: ":octagonal_sign:",
    Decision.INVESTIGATE: ":mag:",
}
BLOCK_ID = "denpex_advice"


def advice_section(advice: Advice) -> dict[str, Any]:
    """``🔀 *Restart without gpu-node-07: uncorrectable ECC error* (90% sure)``, then what history
    added on its own lines."""
    text = f"{EMOJI[advice.decision]} *{escape(advice.line)}* _({round(advice.confidence * 100)}% sure)_"
    for note in advice.history:
        text += f"\n:repeat: {escape(note)}"
    return bk.section(text, block_id=BLOCK_ID)
