"""The signature format: the typed, frozen objects a YAML signature is validated into.

``signatures.loader`` reads the files; this module only says what a signature is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum


class Role(StrEnum):
    """Where a matched line sits in a failure's causal chain."""

    INITIATING = "initiating"  # states the real cause
    DOWNSTREAM = "downstream"  # a consequence of an earlier failure, often on another rank
    WRAPPER = "wrapper"  # a launcher or exception re-reporting a child's failure
    BENIGN = "benign"  # a warning that is usually harmless


class RestartClass(StrEnum):
    """What a restart of the job would do, judged from the failure's own mechanism."""

    TRANSIENT = "transient"  # the cause passes (preemption, a network flake): restart from a checkpoint
    NODE = "node"  # one host is bad (ECC, Xid 79): restart without that host
    DETERMINISTIC = "deterministic"  # the same code, data and settings fail the same way: stop
    UNKNOWN = "unknown"  # the signature cannot tell: a person looks first


# A one-line reason reads after "Restart without host-7: " in Slack, so it stays short.
RESTART_REASON_MAX = 200


@dataclass(frozen=True)
class Restart:
    """A signature's restart class and the one-line reason shown with the advice."""

    cls: RestartClass
    reason: str


def default_restart(role: Role) -> Restart:
    """The restart block of a non-initiating signature that states none: it only reports a
    failure printed elsewhere, so the class is unknown."""
    if role is Role.BENIGN:
        return Restart(RestartClass.UNKNOWN, "a warning alone is no reason to stop or restart a job")
    return Restart(
        RestartClass.UNKNOWN,
        f"this {role.value} line only reports a failure printed elsewhere; find that failure first",
    )


class Outcome(StrEnum):
    """What the problem does to the run when it is all that went wrong."""

    FAILURE = "failure"  # the run died or will die of it
    DEGRADATION = "degradation"  # the run keeps going, losing speed, memory or correctness


class Severity(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"


CATEGORIES = (
    "torch-compile",
    "gpu-memory",
    "host-memory",
    "distributed",
    "cuda-runtime",
    "numerics",
    "data-pipeline",
    "environment",
    "storage",
    "scheduler",
    "framework",
)

ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Fingerprint:
    """One way a signature shows up in a log: a literal substring or a regex.

    Literals are case-sensitive unless ``ignore_case``; a space in a literal matches any run of
    spaces or tabs. Regexes are matched against the line with its log prefix (rank tag, glog
    head, timestamp) removed; ``^`` means the start of that message.
    """

    literal: str | None = None
    regex: str | None = None
    ignore_case: bool = False
    versions: str | None = None
    note: str | None = None

    @property
    def text(self) -> str:
        return self.literal if self.literal is not None else (self.regex or "")


@dataclass(frozen=True)
class Symptom:
    symptom: str
    cause: str


@dataclass(frozen=True)
class FixStep:
    step: str
    command: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class DecisionPath:
    """The path an engineer walks to confirm a diagnosis before acting on it."""

    evidence: str
    first_failure: str
    control: str
    follows_workload: str
    follows_node: str
    disappears: str

    def steps(self) -> list[str]:
        return [
            f"Capture the evidence: {self.evidence}",
            f"Find the first preceding failure: {self.first_failure}",
            f"Run one known-good control: {self.control}",
            f"If it follows the workload: {self.follows_workload}",
            f"If it follows the node: {self.follows_node}",
            f"If it disappears: {self.disappears}",
        ]


# Facts the engine can find in the logs by itself (signatures/missing.py holds the detectors).
DETECTORS = frozenset({"last_reason", "step", "xid", "traceback", "other_ranks", "all_ranks", "host"})


@dataclass(frozen=True)
class MissingFact:
    """A fact to ask for, and when: skipped once the logs hold it.

    ``unless_env`` names environment keys (torch, cuda, nccl, ...) and ``unless`` names detectors
    (``DETECTORS``); the question is not asked when every one of them finds its fact.
    """

    ask: str
    when: str
    unless_env: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()


@dataclass(frozen=True)
class FollowUp:
    question: str
    answer: str
    intent: str | None = None


@dataclass(frozen=True)
class Merge:
    """A taxonomy class folded into this signature, and why."""

    cls: str
    reason: str


# The frameworks and tools whose wording a sample can be in; a positive sample's ``framework`` is one
# of these, so docs/signatures.md can say which frameworks and versions a signature has evidence for.
FRAMEWORKS = (
    "torch",
    "torch-compile",
    "triton",
    "cuda",
    "cuda-toolchain",
    "nccl",
    "gloo",
    "jax",
    "xla",  # the XLA runtime under torch_xla (JAX's own XLA wording is "jax")
    "tensorflow",
    "vllm",
    "ray",
    "lightning",
    "transformers",
    "accelerate",
    "deepspeed",
    "megatron",
    "horovod",
    "mpi",
    "python",
    "conda",
    "linux",
    "slurm",
    "lsf",
    "kubernetes",
)


@dataclass(frozen=True)
class PositiveSample:
    log: str
    line: str  # substring of the line that must win
    source: str
    diagnosis: str | None = None  # signature expected to win, when not this one
    framework: str | None = None  # one of FRAMEWORKS: whose wording the line is in
    versions: str | None = None  # the versions of that framework the sample comes from, when known


@dataclass(frozen=True)
class NegativeSample:
    log: str
    why: str


@dataclass(frozen=True)
class Signature:
    id: str
    title: str
    category: str
    tags: tuple[str, ...]
    severity: Severity
    role: Role
    fingerprints: tuple[Fingerprint, ...]
    summary: str
    mechanism: str
    observed: tuple[str, ...]
    symptoms: tuple[Symptom, ...]
    affected: tuple[str, ...]
    root_causes: tuple[str, ...]
    confirm: tuple[str, ...]
    fix: tuple[FixStep, ...]
    prevention: tuple[str, ...]
    decision_path: DecisionPath
    missing_facts: tuple[MissingFact, ...]
    follow_ups: tuple[FollowUp, ...]
    related: tuple[str, ...]
    references: tuple[str, ...]
    positive: tuple[PositiveSample, ...]
    negative: tuple[NegativeSample, ...]
    priority: int = 0
    outcome: Outcome = Outcome.FAILURE
    excludes: tuple[Fingerprint, ...] = ()
    traceback_frames: tuple[str, ...] = ()
    merges: tuple[Merge, ...] = ()
    restart: Restart = Restart(RestartClass.UNKNOWN, "no restart class was given")
    path: str = field(default="", compare=False)


class SignatureError(Exception):
    """A library failed to load; ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = [str(p) for p in problems]
        super().__init__(f"{len(problems)} problem(s) in the signature library:\n" + "\n".join(lines))


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.reason}"
