""" "What I still need": only the facts the evidence does not already hold.

Every fact the engine or a signature asks for can name detectors (``unless`` in a signature's
``missing_facts``, or the environment keys of ``unless_env``); when each of them finds the fact
in the logs, the question is not asked. The detectors:

- ``torch``, ``cuda``, ``nccl``, ``driver``, ``gpu``, ``python``, ``triton``, ``world_size``,
  ``nnodes``: the version or value is stated in the log (collect_env, nvidia-smi, NCCL's banner);
- ``last_reason``: Dynamo printed the `last reason:` of a recompilation;
- ``step``: a step or iteration number is in the log;
- ``xid``: the kernel's `NVRM: Xid` lines are in the log;
- ``traceback``: the initiating line ends a traceback whose frames are in the log, or leads one;
- ``other_ranks``: output of more than one rank (or more than one log) is in the evidence;
- ``all_ranks``: every rank of the job's world size shows up in the evidence;
- ``host``: the host of the initiating line is known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from signatures.explain import rank_list
from signatures.hits import TextScan
from signatures.lines import unwrap
from signatures.ranking import TIER_BENIGN, TIER_DOWNSTREAM, TIER_UNKNOWN, TIER_WRAPPER, Candidate
from signatures.spec import DETECTORS as DETECTOR_NAMES
from signatures.spec import Signature
from signatures.tracebacks import TRACEBACK_TITLE

COLLECT_ENV = (
    "Attach the output of `python -m torch.utils.collect_env` from a failing node "
    "(torch, CUDA, NCCL and driver versions)."
)
CLEAN_MISSING = (
    "If the job did fail, attach the end of every rank's log (the launcher's output and each "
    "rank's stderr): this log shows no error.",
)
NO_SIGNATURE = "No signature knows this error: attach the full traceback and the lines just before it."
MAX_MISSING = 4


@dataclass(frozen=True)
class Evidence:
    """What the logs hold, for the detectors to look at."""

    facts: dict[str, str]  # environment facts and evidence-only facts (last_reason, step, xid)
    top: Candidate
    ranks_seen: frozenset[int]
    texts: int
    host_known: bool
    local_rank_only: int | None = None  # the line names this local rank and no global rank

    @property
    def world(self) -> int | None:
        value = self.facts.get("world_size", "")
        return int(value) if value.isdigit() else None


def _all_ranks(e: Evidence) -> bool:
    world = e.world
    return world is not None and world <= 4096 and set(range(world)) <= e.ranks_seen


DETECTORS: dict[str, Callable[[Evidence], bool]] = {
    "last_reason": lambda e: "last_reason" in e.facts,
    "step": lambda e: "step" in e.facts,
    "xid": lambda e: "xid" in e.facts,
    "traceback": lambda e: e.top.hit.view.in_traceback or any(TRACEBACK_TITLE in x for x in e.top.hit.after),
    "other_ranks": lambda e: len(e.ranks_seen) > 1 or e.texts > 1,
    "all_ranks": _all_ranks,
    "host": lambda e: e.host_known,
}
assert set(DETECTORS) == DETECTOR_NAMES, "spec.DETECTORS names the detectors a signature may use"


def holds(name: str, e: Evidence) -> bool:
    """Whether the evidence already holds the fact ``name`` (a detector or an environment key)."""
    detector = DETECTORS.get(name)
    return detector(e) if detector is not None else name in e.facts


def ranks_seen(scans: Sequence[TextScan]) -> frozenset[int]:
    """Every rank some line of the evidence is tagged with: failures, structure and progress lines."""
    seen = {r for s in scans for h in s.hits if (r := h.rank) is not None}
    seen |= {x.rank for s in scans for x in s.sightings if x.rank is not None}
    seen |= {r for s in scans for _, text in s.progress if (r := unwrap(text).rank) is not None}
    seen |= {r for s in scans if (r := s.name_rank) is not None}
    return frozenset(seen)


def missing_facts(
    e: Evidence, ranked: Sequence[Candidate], reporting: Sequence[int], launcher_rank: int | None
) -> list[str]:
    """The questions worth asking, most useful first, at most MAX_MISSING."""
    top = e.top
    out: list[str] = []
    if top.tier == TIER_DOWNSTREAM and launcher_rank is not None:
        out.append(
            f"The launcher says rank {launcher_rank} failed first, but its error is not in the logs "
            f"given: attach rank {launcher_rank}'s log."
        )
    elif top.tier in (TIER_DOWNSTREAM, TIER_WRAPPER) and not holds("all_ranks", e):
        out.append(_consequences_only(e, top, reporting))
    if e.local_rank_only is not None and top.tier < TIER_BENIGN:
        out.append(
            f"The failing line names local rank {e.local_rank_only} only: attach the launcher's failure "
            "table (ChildFailedError) or say which node it ran on, so the global rank can be read."
        )
    if top.signature is not None:
        out += _signature_asks(top.signature, e)
    versions_known = holds("torch", e) and holds("cuda", e)
    if top.tier != TIER_BENIGN and not versions_known and not any("collect_env" in x for x in out):
        out.append(COLLECT_ENV)
    if top.signature is None and top.tier <= TIER_UNKNOWN and not holds("traceback", e):
        out.insert(0, NO_SIGNATURE)
    return out[:MAX_MISSING]


def _signature_asks(sig: Signature, e: Evidence) -> list[str]:
    asks = []
    for fact in sig.missing_facts:
        needs = (*fact.unless_env, *fact.unless)
        if needs and all(holds(k, e) for k in needs):
            continue
        asks.append(fact.ask)
    return asks


def _consequences_only(e: Evidence, top: Candidate, reporting: Sequence[int]) -> str:
    world = e.world
    silent = [r for r in range(world) if r not in reporting] if world and world <= 4096 else []
    named = top.hit.groups.get("rank")
    if top.tier == TIER_WRAPPER and named:
        return (
            f"The launcher only re-reports a failure of rank {named}: "
            f"attach rank {named}'s own log, which holds the real error."
        )
    if silent and len(silent) <= 16:
        return (
            f"Only consequences were found. Ranks {rank_list(silent)} did not report them: attach "
            f"{'that rank' if len(silent) == 1 else 'those ranks'}' "
            f"log{'s' if len(silent) > 1 else ''}, where the first failure is likely."
        )
    given = "only one log was given" if e.texts == 1 else f"only {e.texts} logs were given"
    return (
        f"Only consequences were found and {given}: attach the logs of every rank (or the "
        "launcher's full output) so the rank that failed first can be found."
    )
