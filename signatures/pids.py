"""A process id in a line's head, and the rank a line elsewhere in the log binds to it.

Open MPI's signal handler heads its report with `[host:pid]`; mpirun's verdict on the same death
binds that pid to a rank (`process rank 0 with PID 19474 on node n7`), as NCCL's communicator
line binds its `host:pid:tid`. An integer of a head is a pid when such a line names it with the
same host; a number that only looks like torchrun's `[host:local]` role index is checked the same
way, so a pid is never taken for a local rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from signatures.hits import Hit
from signatures.processtags import TagModel

# A signal handler's or logger's head naming host and pid: Open MPI's "[node7:19474] Signal: ...".
HOST_PID = re.compile(r"\[(?P<host>[A-Za-z][\w.-]*):(?P<pid>\d+)(?::\d+)*\]")


def head_pid_rank(
    hit: Hit, by_pid: Mapping[tuple[str | None, int], tuple[int, int]], tags: TagModel | None
) -> tuple[int, str] | None:
    """The rank of the pid in ``hit``'s head, and the head's words for the answer."""
    m = HOST_PID.match(hit.facts.message)
    candidates = [(m.group("host"), int(m.group("pid")))] if m else []
    if hit.local_rank is not None and hit.host:
        candidates.append((hit.host, hit.local_rank))
    bound = tags.rank_of_pid if tags is not None else {}
    for host, pid in candidates:
        known = by_pid.get((host, pid))
        rank = known[0] if known is not None else bound.get((host, pid))
        if rank is not None:
            return rank, f"[{host}:{pid}]"
    return None
