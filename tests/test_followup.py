"""Follow-up questions: intent matching over many phrasings, and answers from the right field."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from bot.slack.answers import Recurrence, answer
from bot.slack.intents import INTENTS, match_intent, menu
from signatures import default_library
from signatures.diagnosis import Diagnosis, DownstreamGroup, Evidence, SignatureRef, Status

# (question as people type it, the intent it asks about). None of these is an example phrasing
# in bot/slack/answers.py, and some carry typos on purpose.
PHRASINGS: list[tuple[str, str]] = [
    ("how do I fix this?", "fix"),
    ("what should we change to get the run working", "fix"),
    ("is there a workaround", "fix"),
    ("what flag do I need to set?", "fix"),
    ("what are the next steps", "fix"),
    ("how can we resolve it", "fix"),
    ("what caused this?", "root_cause"),
    ("why did the training die", "root_cause"),
    ("what is the underlying reason", "root_cause"),
    ("why did rank 3 run out of memory?", "root_cause"),
    ("how did this happen", "root_cause"),
    ("what triggered the crash", "root_cause"),
    ("how can I confirm that", "confirm"),
    ("how would we verify this diagnosis", "confirm"),
    ("what should I check to make sure", "confirm"),
    ("can you give me a checklist", "confirm"),
    ("what should I collect before restarting?", "collect"),
    ("what logs do you need from me", "collect"),
    ("anything to capture before we relaunch", "collect"),
    ("what info should I attach", "collect"),
    ("is this a hardware problem or software?", "hardware_or_software"),
    ("is the GPU bad?", "hardware_or_software"),
    ("could it be a faulty node", "hardware_or_software"),
    ("is it our code or the machine's fault", "hardware_or_software"),
    ("will this happen again?", "recurrence"),
    ("have we seen this before", "recurrence"),
    ("how often does this show up", "recurrence"),
    ("is it deterministic or flaky", "recurrence"),
    ("does this get worse with more GPUs?", "scale"),
    ("would it still fail on a single node", "scale"),
    ("does it depend on scale", "scale"),
    ("what happens at 512 gpus", "scale"),
    ("how do we prevent this in the future", "prevention"),
    ("how can we stop it from happening next time", "prevention"),
    ("what monitoring would catch this early", "prevention"),
    ("any related failures?", "related"),
    ("are there similar errors I should know about", "related"),
    ("is this connected to the other dataloader issue", "related"),
    ("what does this error mean?", "meaning"),
    ("can you explain it in plain english", "meaning"),
    ("what is a watchdog timeout", "meaning"),
    ("never seen this one, what even is it", "meaning"),
    ("which rank failed first?", "which_rank"),
    ("what GPU died", "which_rank"),
    ("which worker crashed", "which_rank"),
    ("who died first", "which_rank"),
    ("when did it start?", "where_started"),
    ("which host was it on", "where_started"),
    ("what time did it break", "where_started"),
    ("where did the failure begin", "where_started"),
    ("what versions were we running?", "environment"),
    ("which pytorch version is this", "environment"),
    ("what cuda version", "environment"),
    ("what does the environment look like", "environment"),
    ("show me the log line", "evidence"),
    ("which line in the log is it", "evidence"),
    ("what's the evidence?", "evidence"),
    ("where in the log did you see that", "evidence"),
    ("is this really the root cause?", "is_root_cause"),
    ("isn't the NCCL timeout the real problem", "is_root_cause"),
    ("why did you pick this line and not the timeout", "is_root_cause"),
    ("are you sure about that", "is_root_cause"),
    ("why did the other ranks fail?", "downstream"),
    ("what happened to the rest of the ranks", "downstream"),
    ("what are all those timeouts", "downstream"),
    ("what happened after that?", "downstream"),
    ("hw or sw?", "hardware_or_software"),
    ("how to fxi this", "fix"),
    ("wat caused it", "root_cause"),
    ("hwo often dose this hapen", "recurrence"),
    ("whcih rank fialed", "which_rank"),
    ("evidense pls", "evidence"),
    ("how do we stop this recurring", "recurrence"),
    ("so what do I do now", "fix"),
    ("what was the first error", "where_started"),
    ("why did you blame rank 12?", "is_root_cause"),
    ("what nccl version was it", "environment"),
]

NOT_QUESTIONS = [
    "ok thanks",
    "restarting now",
    "lol nice",
    "where is the coffee",
    "can we get lunch?",
    "is anyone around?",
]


def test_intent_accuracy_over_the_phrasing_set() -> None:
    intents = Counter(expected for _, expected in PHRASINGS)
    assert len(PHRASINGS) >= 60 and len(intents) >= 12
    misses = [(q, e, match_intent(q)) for q, e in PHRASINGS if match_intent(q) != e]
    accuracy = 1 - len(misses) / len(PHRASINGS)
    print(f"\nintent accuracy: {accuracy:.1%} on {len(PHRASINGS)} phrasings of {len(intents)} intents")
    for miss in misses:
        print("  miss:", miss)
    assert accuracy >= 0.9


@pytest.mark.parametrize("text", NOT_QUESTIONS)
def test_chatter_maps_to_no_intent(text: str) -> None:
    assert match_intent(text) is None


def test_every_intent_has_a_menu_button() -> None:
    values = [value for _, value in menu()]
    assert values == [i.name for i in INTENTS]
    for name in values:
        assert match_intent(f"intent:{name}") == name


SIG = default_library().by_id["cuda-oom-allocator"]
STORED = Diagnosis(
    status=Status.FAILURE,
    signature=SignatureRef(SIG.id, SIG.title, SIG.category, SIG.role.value),
    confidence=0.9,
    initiating=Evidence(
        file="rank12.log",
        line=4021,
        text="[rank12]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        rank=12,
        host="gpu-node-07",
        time="2024-05-01T10:20:06",
        before=("step 101 loss 2.0990",),
        after=("Traceback (most recent call last):",),
    ),
    downstream=(
        DownstreamGroup(
            SignatureRef("nccl-watchdog-collective-timeout", "NCCL watchdog timeout", "", "x"),
            "downstream",
            63,
            tuple(r for r in range(64) if r != 12),
            Evidence("rank0.log", 3, "Watchdog caught collective operation timeout"),
        ),
    ),
    why=("rank 12's OOM is the earliest initiating line; the NCCL timeouts come 10 minutes later",),
    root_causes=("Micro-batch too large for the GPU.",),
    fix=({"step": "Halve the micro-batch.", "command": "--micro-batch-size 2"},),
    decision_path=tuple(SIG.decision_path.steps()),
    checklist=("The OOM line names the GPU and how much was requested.",),
    missing_facts=("Which GPU model (memory size)?",),
    related=("gpu-memory-held-by-other-process",),
    environment={"torch": "2.4.1", "cuda": "12.4"},
    files=("rank12.log", "rank0.log"),
)


def follow_up(intent: str) -> str:
    return next(f.answer for f in SIG.follow_ups if f.intent == intent)


EXPECTED = {
    "fix": ("how do I fix it?", "--micro-batch-size 2"),
    "root_cause": ("what caused it?", "Micro-batch too large for the GPU."),
    "confirm": ("how can I confirm this?", "The OOM line names the GPU"),
    "collect": ("what should I capture before restarting?", SIG.decision_path.evidence),
    "hardware_or_software": ("is it hardware?", follow_up("hardware_or_software")),
    "recurrence": ("will it happen again?", "Seen 3 times in this channel, last on job x-1"),
    "scale": ("does it depend on scale?", SIG.affected[0]),
    "prevention": ("how to prevent it?", SIG.prevention[0]),
    "related": ("anything related?", "gpu-memory-held-by-other-process"),
    "meaning": ("what does this error mean?", SIG.summary),
    "which_rank": ("which rank died?", "Rank 12 failed first"),
    "where_started": ("when did it start?", "on host gpu-node-07 at 2024-05-01T10:20:06"),
    "environment": ("what torch version?", "torch: `2.4.1`"),
    "evidence": ("show me the log line", "step 101 loss 2.0990"),
    "is_root_cause": ("is that really the cause?", "earliest initiating line"),
    "downstream": ("why did the other ranks fail?", "63 ranks then hit NCCL watchdog timeout"),
}


@pytest.mark.parametrize("intent", sorted(EXPECTED))
def test_each_intent_is_answered_from_its_field(intent: str) -> None:
    question, must_contain = EXPECTED[intent]
    got = answer(question, STORED, SIG, recurrence=Recurrence(3, "job x-1"))
    assert got.intent == intent
    unescaped = got.text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert must_contain in unescaped


def strings(value: object) -> list[str]:
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def test_answers_quote_only_what_is_stored() -> None:
    places = [f"{e.file}:{e.line}" for e in (STORED.initiating, STORED.downstream[0].first) if e]
    knowledge = [SIG.summary, SIG.mechanism, *SIG.prevention, *SIG.affected, *SIG.confirm]
    known = "\n".join(strings([STORED.to_dict(), places, knowledge, list(SIG.related)]))
    for question, _ in EXPECTED.values():
        text = answer(question, STORED, SIG).text
        for block in re.findall(r"```(.*?)```", text, flags=re.S):
            for line in block.splitlines():
                assert line in known, (question, line)
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for quoted in re.findall(r"`([^`]+)`", text):
            assert quoted in known, (question, quoted)


def test_log_text_in_answers_is_escaped() -> None:
    evil = Evidence("a.log", 1, "<!channel> RuntimeError <@U1>", rank=0)
    d = Diagnosis(Status.UNRECOGNIZED, None, 0.0, evil)
    for question in ("which rank failed first?", "show me the line", "what does this mean?"):
        text = answer(question, d, None).text
        assert "<!channel>" not in text and "<@U1>" not in text


def test_a_diagnosis_without_facts_says_so_instead_of_inventing() -> None:
    d = Diagnosis(Status.CLEAN, None, 0.0, None)
    assert "No failing line" in answer("which rank failed first?", d, None).text
    assert "no environment facts" in answer("which cuda version?", d, None).text
    assert "No other rank" in answer("what happened to the other ranks?", d, None).text
