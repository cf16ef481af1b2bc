"""A launcher's verdict naming the one process that failed, carried to an untagged failure.

Launchers say which process died in their own words (`mpiexec noticed that process rank 3 with
PID 812 ... exited on signal 11`, `Rank 2 crashed with exit code -7`, `the trainer process with
rank=[3] was aborted`). When the failing line itself carries no rank and nothing nearer names its
process, it is the failed process's when the verdicts below it name exactly one rank: several
ranks named (`ranks 1,3 failed`) leave it unknown, a verdict above it is about an earlier
death, and one on another host or pid than the line's is about another process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A rank (or process) as the subject of a death: the verb follows it closely, and no thread of it
# is the subject instead ("[Rank 1] NCCL watchdog thread terminated with ..."). srun's "task 14:
# Exited" is not one: srun reports each task's exit on a line of its own, one entry of a list a
# paste may have cut, so it never says which task failed first.
_VERDICT = re.compile(
    r"\b(?:rank|process)\b[ =:]*\[?\d+\]?(?P<gap>[^\n]{0,60}?)"
    r"\b(?:exited|exits|crashed|died|(?:was )?aborted|(?:was )?killed|terminated)\b",
    re.IGNORECASE,
)
# A verdict over several processes ("tasks 2-7: Exited", "ranks 1,3 failed"): a list names no one.
_SEVERAL = re.compile(r"\b(?:ranks|tasks|processes)\b[ =:]*\[?\d+\s*[-,]\s*\d+", re.IGNORECASE)
SEVERAL = -1  # the rank recorded for a verdict that names several


def verdict_of(message: str, rank: int | None) -> int | None:
    """The rank a launcher's verdict on a death names (SEVERAL for a list), None if no verdict."""
    if any(w in message for w in ("anks", "asks", "ANKS", "ASKS", "rocesses")) and _SEVERAL.search(message):
        return SEVERAL
    if rank is None:
        return None
    m = _VERDICT.search(message)
    if m is None or "thread" in m.group("gap").lower():
        return None
    return rank


# A launcher's report that a child it started exited non-zero, on a line that names the child by
# its local index (DeepSpeed's "[... '--local_rank=3', ...] exits with return code = 1",
# torchrun's "failed (exitcode: 1) local_rank: 3"): a verdict on that local rank.
_CHILD_EXIT = re.compile(
    r"\bexit(?:s|ed)? with (?:return |exit )?code\s*[=:]?\s*(?!0\b)-?\d+|\(exitcode: (?!0\))-?\d+\)"
)


def child_exited(message: str) -> bool:
    """Whether ``message`` reports a child process exiting with a non-zero code."""
    return "xit" in message and _CHILD_EXIT.search(message) is not None


Verdict = tuple[int, int, str | None, int | None]  # line, rank (or SEVERAL), host, pid


def verdict_rank(verdicts: Sequence[Verdict], line: int, host: str | None, pid: int | None) -> int | None:
    """The one rank the verdicts below ``line`` name; a verdict on another host or pid than the
    line's names some other process."""
    below = {
        rank
        for at, rank, on, its in verdicts
        if at > line and (host is None or on is None or on == host) and (pid is None or its in (None, pid))
    }
    return below.pop() if len(below) == 1 and SEVERAL not in below else None
