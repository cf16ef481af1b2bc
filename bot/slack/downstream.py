"""What followed the initiating failure, one plain sentence per downstream group."""

from __future__ import annotations

from bot.slack.blocks import escape
from signatures.diagnosis import Diagnosis, DownstreamGroup


def downstream_line(group: DownstreamGroup, *, initiating_id: str | None = None) -> str:
    """One sentence for a downstream group: '63 ranks then hit NCCL watchdog timeouts'."""
    if group.signature is not None and group.signature.id == initiating_id:
        where = f" (ranks {', '.join(map(str, group.ranks[:8]))})" if group.ranks else ""
        return f"the same failure was printed {group.count} more time{'s' if group.count != 1 else ''}{where}"
    title = group.signature.title if group.signature else "other errors"
    ranks = len(group.ranks)
    if ranks > 1:
        who = f"{ranks} ranks then hit"
    elif ranks == 1:
        who = f"rank {group.ranks[0]} then hit"
    else:
        lines = f"{'at least ' if group.capped else ''}{group.count} line{'s' if group.count != 1 else ''}"
        who = f"{lines} then reported"
    kind = "" if group.role == "downstream" else f" ({group.role})"
    return f"{who} {escape(title)}{kind}"


def downstream_summary(d: Diagnosis) -> list[str]:
    """Every downstream group as one plain sentence."""
    initiating_id = d.signature.id if d.signature else None
    return [downstream_line(g, initiating_id=initiating_id) for g in d.downstream]
