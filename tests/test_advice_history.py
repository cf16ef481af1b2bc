"""The advice's history rules (bot/kinds/advising.py), each on its own, through the worker on a
real Redis: earlier runs are real corpus diagnoses reported as a scheduler would (job meta)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.jobs.runs import RunHistory
from bot.kinds.advising import with_history
from handlers.jobs import Job
from signatures import Diagnosis, Source, diagnose
from signatures.advice import Decision
from tests.conftest import WorkerStack
from tests.corpus.cases import load_cases

pytestmark = pytest.mark.redis
CASES = {c.id: c for c in load_cases()}
IB_ERROR = "extra-034"  # nccl-ib-transport-error: transient
NODE_FAILURE = "extra2b-070"  # slurm-node-failure on worker-1
TIME_LIMIT = "extra2b-009"  # slurm-time-limit: transient, decided by the scheduler
TRITON = "tc-dev-013"  # dynamo-graph-break-unsupported: deterministic


def corpus(case_id: str) -> Diagnosis:
    case = CASES[case_id]
    return diagnose([Source.from_bytes(case.path.name, case.data)])


async def report(stack: WorkerStack, case_id: str, job_id: str, **meta: str) -> dict[str, Any]:
    """Run one reported job through the worker; the advice it was stored with."""
    job = Job(
        source="webhook",
        dedupe_key=f"webhook:{job_id}",
        channel="C1",
        thread_ts=f"17.{job_id}",
        precomputed=corpus(case_id).to_dict(),
        meta={"job_id": job_id, **meta},
    )
    assert await stack.queue.enqueue(job)
    assert await stack.worker().drain() == 1
    stored = await stack.store.get(job.id)
    assert stored is not None
    advice: dict[str, Any] = stored.diagnosis["advice"]
    return advice


async def test_h1_the_same_transient_failure_twice_in_a_row_stops(stack: WorkerStack) -> None:
    first = await report(stack, IB_ERROR, "4001", job_name="llama-pretrain", cluster="prod")
    assert first["decision"] == "restart"
    second = await report(stack, IB_ERROR, "4002", job_name="llama-pretrain", cluster="prod")
    assert second["decision"] == "stop"
    assert second["reason"].startswith(
        "InfiniBand/RoCE completion error in NCCL ended the previous run of llama-pretrain too"
    )
    [reply] = [m for m in stack.slack.messages if m.thread_ts == "17.4002"]
    advice_text = reply.blocks[1]["text"]["text"]  # right under the headline
    assert "Do not restart: InfiniBand/RoCE completion error in NCCL ended the previous run" in advice_text


async def test_h1_only_the_same_job_name_and_cluster_count(stack: WorkerStack) -> None:
    await report(stack, IB_ERROR, "4101", job_name="llama-pretrain", cluster="prod")
    other_job = await report(stack, IB_ERROR, "4102", job_name="bert-finetune", cluster="prod")
    other_cluster = await report(stack, IB_ERROR, "4103", job_name="llama-pretrain", cluster="dev")
    assert other_job["decision"] == other_cluster["decision"] == "restart"


async def test_h1_a_different_failure_in_between_breaks_the_row(stack: WorkerStack) -> None:
    await report(stack, IB_ERROR, "4201", job_name="llama")
    await report(stack, TRITON, "4202", job_name="llama")
    assert (await report(stack, IB_ERROR, "4203", job_name="llama"))["decision"] == "restart"


async def test_h1_a_scheduler_policy_failure_may_repeat(stack: WorkerStack) -> None:
    await report(stack, TIME_LIMIT, "4301", job_name="long-run")
    again = await report(stack, TIME_LIMIT, "4302", job_name="long-run")
    assert again["decision"] == "restart" and again["class"] == "transient"


async def test_h1_needs_a_job_name(stack: WorkerStack) -> None:
    await report(stack, IB_ERROR, "4401")
    assert (await report(stack, IB_ERROR, "4402"))["decision"] == "restart"


async def test_h2_a_host_failing_across_jobs_is_counted(stack: WorkerStack) -> None:
    first = await report(stack, NODE_FAILURE, "4501", job_name="a")
    assert first["decision"] == "restart-excluding" and first["history"] == []
    await report(stack, NODE_FAILURE, "4502", job_name="b")
    third = await report(stack, NODE_FAILURE, "4503", job_name="c")
    assert third["exclude_hosts"] == ["worker-1"]
    assert third["history"] == [
        "3rd slurm-node-failure on worker-1 this week: drain it and check its hardware"
    ]


async def test_h3_a_retried_job_is_not_its_own_history(stack: WorkerStack) -> None:
    d = corpus(IB_ERROR)
    meta = {"job_name": "llama", "job_id": "4601"}
    await stack.store.save(
        "diag-1", d.to_dict(), job=Job(source="webhook", dedupe_key="x"), channel="C1", thread_ts=None
    )
    await RunHistory(stack.store).record("diag-1", meta=meta)
    again = await with_history(stack.store, d, "diag-1", meta)
    assert again.advice and again.advice.decision is Decision.RESTART
    other = await with_history(stack.store, d, "diag-2", meta)
    assert other.advice and other.advice.decision is Decision.STOP


async def test_a_scheduler_job_id_finds_its_diagnosis(stack: WorkerStack) -> None:
    await report(stack, NODE_FAILURE, "4701", job_name="a")
    found = await RunHistory(stack.store).diagnosis_for_job("4701")
    stored = await stack.store.get(found or "")
    assert stored is not None and stored.meta and stored.meta["job_id"] == "4701"
    assert await RunHistory(stack.store).diagnosis_for_job("no-such-job") is None


async def test_h0_a_failure_sent_without_advice_gets_the_engines(stack: WorkerStack) -> None:
    d = corpus(NODE_FAILURE)
    older = d.to_dict()
    del older["advice"]  # what a sender older than advice posts
    job = Job(
        source="webhook", dedupe_key="webhook:4801", channel="C1", thread_ts="17.4801", precomputed=older
    )
    assert await stack.queue.enqueue(job)
    assert await stack.worker().drain() == 1
    stored = await stack.store.get(job.id)
    assert stored is not None and d.advice is not None
    assert stored.diagnosis["advice"] == d.advice.to_dict()
