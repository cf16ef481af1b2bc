"""Block Kit rendering: content, escaping and Slack's size limits."""

from __future__ import annotations

import json
from typing import Any

from bot.slack.blocks import MAX_BLOCKS, MAX_HEADER, MAX_SECTION
from bot.slack.render import (
    ACTION_CORRECT,
    ACTION_EVIDENCE,
    ACTION_EXPLAIN,
    ACTION_WRONG,
    escape,
    render_choices,
    render_diagnosis,
    render_error,
    render_evidence,
    render_headline,
    render_parent,
)
from signatures.diagnosis import Diagnosis, DownstreamGroup, Evidence, SignatureRef, Status

NCCL = SignatureRef("nccl-watchdog-timeout", "NCCL watchdog timeout", "distributed", "downstream")
OOM = SignatureRef("cuda-oom", "CUDA out of memory", "gpu-memory", "initiating")


def failure(**over: Any) -> Diagnosis:
    init = Evidence(
        file="rank12.log",
        line=4021,
        text="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        rank=12,
        host="node-07",
        time="2024-05-01T10:22:31",
        before=("step 900 loss 2.1", "step 901 loss 2.0", "allocating activations"),
        after=("Traceback (most recent call last):",),
    )
    fields: dict[str, Any] = dict(
        status=Status.FAILURE,
        signature=OOM,
        confidence=0.92,
        initiating=init,
        downstream=(
            DownstreamGroup(
                NCCL,
                "downstream",
                63,
                tuple(r for r in range(64) if r != 12),
                Evidence("rank0.log", 88, "Watchdog caught collective operation timeout"),
            ),
        ),
        summary="Rank 12 ran out of GPU memory; the others waited for it.",
        root_causes=("Batch too large for 40 GB cards",),
        fix=({"step": "Lower the micro-batch", "command": "--micro-batch-size 2"},),
        decision_path=("Capture the evidence: nvidia-smi", "Run one known-good control"),
        missing_facts=("Which GPU model and memory size?",),
        files=("rank12.log", "rank0.log"),
        lines_read=12000,
    )
    fields.update(over)
    return Diagnosis(**fields)


def texts(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def check_limits(blocks: list[dict[str, Any]]) -> None:
    assert 0 < len(blocks) <= MAX_BLOCKS
    for b in blocks:
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= MAX_HEADER
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= MAX_SECTION


def test_failure_message_has_headline_evidence_downstream_fix_and_buttons() -> None:
    msg = render_diagnosis(failure())
    check_limits(msg.blocks)
    assert msg.blocks[0]["type"] == "header"
    assert "CUDA out of memory" in msg.blocks[0]["text"]["text"]
    body = texts(msg.blocks)
    assert "gpu-memory" in body and "92%" in body
    assert "`rank12.log:4021` · rank 12 · host node-07" in body
    assert "63 ranks then hit NCCL watchdog timeout" in body
    assert "--micro-batch-size 2" in body
    assert "Which GPU model" in body
    actions = msg.blocks[-1]
    assert actions["type"] == "actions"
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == [ACTION_EVIDENCE, ACTION_CORRECT, ACTION_WRONG, ACTION_EXPLAIN]
    assert "CUDA out of memory" in msg.text
    # Everything fit: no evidence file is attached to the thread.
    assert msg.file_text is None


def test_log_text_is_escaped_so_it_cannot_ping() -> None:
    evil = Evidence("a.log", 1, "<!channel> boom <@U123> & <https://x|y>", before=("<!here>",))
    msg = render_diagnosis(failure(initiating=evil))
    body = texts(msg.blocks) + msg.text
    assert "<!channel>" not in body and "<@U123>" not in body and "<!here>" not in body
    assert "&lt;!channel&gt;" in body
    assert escape("a & b") == "a &amp; b"


def test_huge_evidence_stays_within_limits_and_offers_a_file() -> None:
    long_line = "x" * 10_000
    ev = Evidence("big.log", 5, long_line, before=tuple("y" * 500 for _ in range(40)))
    d = failure(
        initiating=ev,
        root_causes=tuple("cause " * 200 for _ in range(30)),
        missing_facts=tuple(f"fact {i}?" for i in range(80)),
        summary="s" * 9000,
    )
    msg = render_diagnosis(d)
    check_limits(msg.blocks)
    assert len(json.dumps(msg.blocks)) < 40_000
    assert msg.file_text is not None and long_line in msg.file_text
    assert msg.blocks[-1]["type"] == "actions"


def test_unrecognized_and_clean_are_said_plainly() -> None:
    first = Evidence("job.out", 7, "RuntimeError: something odd")
    unrec = render_diagnosis(Diagnosis(Status.UNRECOGNIZED, None, 0.0, first, files=("job.out",)))
    assert "Unrecognized failure" in unrec.blocks[0]["text"]["text"]
    assert "RuntimeError: something odd" in texts(unrec.blocks)
    assert "attach" in texts(unrec.blocks).lower()
    clean = render_diagnosis(Diagnosis(Status.CLEAN, None, 0.0, None, lines_read=500))
    assert "No failure found" in clean.blocks[0]["text"]["text"]
    assert "500 lines" in texts(clean.blocks)
    assert ACTION_EXPLAIN not in texts(clean.blocks)


def test_job_meta_adds_recurrence_and_change_notes() -> None:
    msg = render_diagnosis(
        failure(), job_meta={"recurrence": "3rd time this week", "changed": "rank 12 <first>"}
    )
    body = texts(msg.blocks)
    assert "3rd time this week" in body
    assert "rank 12 &lt;first&gt;" in body


def test_error_parent_headline_evidence_and_choices() -> None:
    err = render_error("File too large: 900 MB (limit 200 MB) <@U1>")
    assert "900 MB" in err.text and "<@U1>" not in err.text
    assert "Diagnosing job 42" in render_parent("Diagnosing job 42").text
    head = render_headline(failure(), "Diagnosing job 42")
    assert "CUDA out of memory" in head.text and len(head.text) < 4000
    ev = render_evidence(failure())
    check_limits(ev.blocks)
    assert "allocating activations" in texts(ev.blocks)
    choices = render_choices("I can answer:", [(f"q{i}", f"v{i}") for i in range(12)])
    buttons = [e for b in choices.blocks if b["type"] == "actions" for e in b["elements"]]
    assert len(buttons) == 12
    assert len({b["action_id"] for b in buttons}) == 12


def test_more_lines_of_the_initiating_failure_are_called_repeats_not_consequences() -> None:
    from bot.slack.render import downstream_summary
    from signatures import Diagnosis, DownstreamGroup, Evidence, SignatureRef, Status

    oom = SignatureRef("cuda-oom-allocator", "CUDA out of memory", "gpu-memory", "initiating")
    timeout = SignatureRef(
        "nccl-watchdog-collective-timeout", "NCCL watchdog timeout", "distributed", "downstream"
    )
    first = Evidence(file="a.log", line=3, text="x")
    d = Diagnosis(
        status=Status.FAILURE,
        signature=oom,
        confidence=0.9,
        initiating=first,
        downstream=(
            DownstreamGroup(
                signature=timeout, role="downstream", count=63, ranks=tuple(range(1, 64)), first=first
            ),
            DownstreamGroup(signature=oom, role="initiating", count=2, ranks=(5, 7), first=first),
        ),
    )
    lines = downstream_summary(d)
    assert lines[0] == "63 ranks then hit NCCL watchdog timeout"
    assert lines[1] == "the same failure was printed 2 more times (ranks 5, 7)"
