"""History makes the engine's advice sharper (the engine's own rules are in signatures/advice.py).

Rules, one test each in tests/test_advice_history.py (against a real Redis):

H1. When the same signature ended the previous run of the same job (same job name and cluster),
    ``restart`` becomes ``stop``: a failure that repeats is no flake, and another restart would
    burn the allocation. Failures the scheduler itself decides (category ``scheduler``:
    preemption, a time limit) repeat by policy, not because the job is broken: they keep
    ``restart``.
H2. A bad-host (``node``) failure on a host that had others this week, in any job, says how
    many ("3rd cuda-ecc-uncorrectable on gpu-node-07 this week: drain it").
H3. A run is never its own history: a retried job (the same diagnosis id) is left out.
Without a job name H1 does not apply; without a host to exclude H2 does not.
H0 comes first: a failure reported without advice (by a sender older than advice) gets the
engine's advice from this server's library, by its signature id.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.jobs.runs import PastRun, RunHistory, job_key
from bot.jobs.store import Store, ordinal
from signatures.advice import ADVISED_STATUSES, Advice, Decision, advise
from signatures.diagnosis import Diagnosis, SignatureRef
from signatures.loader import load_signatures
from signatures.spec import Restart, RestartClass

POLICY_CATEGORY = "scheduler"  # failures a scheduler's policy decides repeat by design (H1)


@functools.cache
def _restarts() -> dict[str, Restart]:
    # Only the YAML (cached as JSON by the loader): the worker process never compiles the scanner.
    return {s.id: s.restart for s in load_signatures()}


def advised(d: Diagnosis) -> Diagnosis:
    """H0: ``d`` with the engine's advice when a failure arrived without any."""
    if d.advice is not None or d.status.value not in ADVISED_STATUSES:
        return d
    restart = None
    if d.signature is not None:
        unknown = Restart(RestartClass.UNKNOWN, f"{d.signature.id} is not in this server's library")
        restart = _restarts().get(d.signature.id, unknown)
    host = d.initiating.host if d.initiating else None
    return replace(d, advice=advise(restart, status=d.status.value, confidence=d.confidence, host=host))


def repeated(
    advice: Advice, signature: SignatureRef | None, job_name: str | None, previous: PastRun | None
) -> Advice:
    """H1: ``restart`` -> ``stop`` when the previous run of the job ended with the same signature."""
    if advice.decision is not Decision.RESTART or signature is None or previous is None or not job_name:
        return advice
    if previous.signature_id != signature.id or signature.category == POLICY_CATEGORY:
        return advice
    reason = (
        f"{signature.title} ended the previous run of {job_name} too; "
        "a failure that repeats is no flake, and another restart would fail the same way"
    )
    return replace(advice, decision=Decision.STOP, reason=reason)


def bad_host_counts(advice: Advice, earlier: Mapping[str, Sequence[PastRun]], signature_id: str) -> Advice:
    """H2: one sentence per excluded host that failed before this week."""
    notes = []
    for host in advice.exclude_hosts:
        runs = earlier.get(host, ())
        if not runs:
            continue
        ids = Counter([signature_id, *(r.signature_id or "an unrecognized failure" for r in runs)])
        n = sum(ids.values())
        what = next(iter(ids)) if len(ids) == 1 else "bad-host failure"
        mix = "" if len(ids) == 1 else " (" + ", ".join(f"{s} ×{c}" for s, c in ids.most_common()) + ")"
        notes.append(f"{ordinal(n)} {what} on {host} this week{mix}: drain it and check its hardware")
    return replace(advice, history=(*advice.history, *notes)) if notes else advice


async def with_history(store: Store, d: Diagnosis, diagnosis_id: str, meta: Mapping[str, str]) -> Diagnosis:
    """``d`` with its advice refined by the runs before this one (H0-H3); unchanged when it has
    no advice."""
    d = advised(d)
    if d.advice is None:
        return d
    history = RunHistory(store)
    key = job_key(meta)
    previous = await history.previous_run(key, excluding=diagnosis_id) if key else None
    advice = repeated(d.advice, d.signature, meta.get("job_name"), previous)
    if advice.exclude_hosts and d.signature is not None:
        earlier = {h: await history.host_failures(h, excluding=diagnosis_id) for h in advice.exclude_hosts}
        advice = bad_host_counts(advice, earlier, d.signature.id)
    return replace(d, advice=advice)


async def remember(store: Store, d: Diagnosis, diagnosis_id: str, meta: Mapping[str, str]) -> None:
    """Record this run for the next one's history (after it is stored: history reads it back)."""
    hosts = d.advice.exclude_hosts if d.advice and d.advice.decision is Decision.RESTART_EXCLUDING else ()
    await RunHistory(store).record(diagnosis_id, meta=meta, bad_hosts=hosts)
