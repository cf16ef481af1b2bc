"""The labelled corpus cases, and how one diagnosis of a case is graded.

``tests/test_corpus.py`` asserts every grade and ``bench/accuracy.py`` sums them, so both judge
a case the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from signatures import Diagnosis, Source, Status, default_library, diagnose, redact
from signatures.spec import Outcome
from tests.corpus.embed import embed

CORPUS = Path(__file__).resolve().parent
LABEL_FILES = sorted(CORPUS.glob("*/labels-*.yaml"))
MODES = ("raw", "embedded")
FIRST_SIGHT = CORPUS / "firstsight"  # batches scored before the library learns them; tests skip it


@dataclass(frozen=True)
class Case:
    id: str
    path: Path
    expected_class: str
    initiating_line: str | None
    initiating_rank: int | None
    source: str
    why: str
    # The rank follows only from the log being one process's (a world of one): embedded among
    # another run's ranks, the log no longer shows it, so the embedded grade does not ask for it.
    rank_needs_whole_log: bool = False

    @property
    def is_failure(self) -> bool:
        return self.expected_class != "none"

    @property
    def is_other(self) -> bool:
        return self.expected_class.startswith("other:")

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @property
    def line_no(self) -> int | None:
        """1-based number of the first line holding ``initiating_line``."""
        if self.initiating_line is None:
            return None
        needle = self.initiating_line.encode("utf-8")
        for n, line in enumerate(self.data.split(b"\n"), start=1):
            if needle in line:
                return n
        raise ValueError(f"{self.id}: initiating_line is not in {self.path.name}")


def batch_label_files(name: str) -> list[Path]:
    """The label files of one batch: ``tests/corpus/NAME/`` or ``tests/corpus/firstsight/NAME/``."""
    for folder in (CORPUS / name, FIRST_SIGHT / name):
        files = sorted(folder.glob("labels-*.yaml"))
        if files:
            return files
    raise FileNotFoundError(f"no labels-*.yaml in {CORPUS / name} or {FIRST_SIGHT / name}")


@cache
def load_cases(label_files: tuple[Path, ...] | None = None) -> tuple[Case, ...]:
    """Every labelled case of ``label_files`` (default: the whole corpus), in file order."""
    cases = []
    for labels in label_files if label_files is not None else LABEL_FILES:
        for entry in yaml.safe_load(labels.read_text(encoding="utf-8")):
            cases.append(
                Case(
                    id=entry["id"],
                    path=labels.parent / entry["file"],
                    expected_class=str(entry["expected_class"]),
                    initiating_line=entry.get("initiating_line"),
                    initiating_rank=entry.get("initiating_rank"),
                    source=entry.get("source", ""),
                    why=entry.get("why", ""),
                    rank_needs_whole_log=bool(entry.get("rank_needs_whole_log", False)),
                )
            )
    return tuple(cases)


@cache
def class_map() -> dict[str, list[str] | None]:
    """expected_class -> the signature ids that count as right (None: any, for other:*)."""
    data: dict[str, list[str] | None] = yaml.safe_load((CORPUS / "class_map.yaml").read_text("utf-8"))
    return data


# A several-line failure report (Open MPI's signal box, torchrun's table entry, a record and its
# detail) states one failure over a few lines; labels and engine may pick different lines of it.
# Reported beside the exact figure, never in its place.
NEAR_LINES = 3


@dataclass
class Grade:
    """How one diagnosis of one case fared; a None check does not apply to the case."""

    case: Case
    mode: str
    line_found: bool | None = None
    line_near: bool | None = None  # within NEAR_LINES of the labelled line: the same statement's box
    rank_right: bool | None = None
    signature_right: bool | None = None
    clean_right: bool | None = None
    problems: list[str] = field(default_factory=list)
    got: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def run_case(case: Case, mode: str, run: Callable[[Source], Diagnosis] | None = None) -> Grade:
    """Diagnose ``case`` as pasted (raw) or inside healthy output (embedded) and grade it."""
    data, offset = case.data, 0
    if mode == "embedded":
        embedded = embed(case.data, healthy_end=not case.is_failure)
        data, offset = embedded.data, embedded.offset
    source = Source.from_bytes(case.path.name, data)
    diagnosis = run(source) if run else diagnose([source])
    return grade(case, mode, diagnosis, offset)


def grade(case: Case, mode: str, diagnosis: Diagnosis, offset: int = 0) -> Grade:
    """Compare ``diagnosis`` with the labels of ``case``."""
    g = Grade(case=case, mode=mode)
    init = diagnosis.initiating
    g.got = {
        "status": diagnosis.status.value,
        "signature": diagnosis.signature.id if diagnosis.signature else None,
        "line": init.line if init else None,
        "rank": init.rank if init else None,
        "text": init.text[:160] if init else None,
    }
    if not case.is_failure:
        g.clean_right = diagnosis.status is Status.CLEAN
        if not g.clean_right:
            g.problems.append(f"status is {diagnosis.status.value}, expected clean")
        return g

    assert case.initiating_line is not None
    expected_line = offset + (case.line_no or 0)
    if init is None:
        g.line_found = g.line_near = False
        g.problems.append("no initiating line")
    else:
        holds = case.initiating_line in init.text or redact(case.initiating_line) in init.text
        g.line_found = holds and init.line == expected_line
        g.line_near = abs(init.line - expected_line) <= NEAR_LINES
        if not holds:
            g.problems.append(f"initiating text does not contain the labelled line: {init.text[:160]!r}")
        if init.line != expected_line:
            g.problems.append(f"initiating line is {init.line}, expected {expected_line}")
    if case.initiating_rank is not None and not (case.rank_needs_whole_log and mode == "embedded"):
        g.rank_right = init is not None and init.rank == case.initiating_rank
        if not g.rank_right:
            g.problems.append(f"rank is {init.rank if init else None}, expected {case.initiating_rank}")

    allowed = allowed_ids(case.expected_class)
    sig = diagnosis.signature
    if allowed == []:
        g.signature_right = False
        g.problems.append(f"class {case.expected_class} is not in class_map.yaml")
        return g
    if allowed is None:
        if diagnosis.status is Status.CLEAN:
            g.problems.append("status is clean, expected a failure (any signature or unrecognized)")
        return g
    g.signature_right = sig is not None and sig.id in allowed
    if not g.signature_right:
        g.problems.append(f"signature is {sig.id if sig else None}, expected one of {allowed}")
    benign_only = all(_role(i) == "benign" for i in allowed)
    # A problem a run can keep going with is a crash or a degradation, as the log shows.
    degrades = any(_degrades(i) for i in allowed)
    fine = diagnosis.status is Status.FAILURE or (degrades and diagnosis.status is Status.DEGRADED)
    if not fine and not (benign_only and diagnosis.status is Status.CLEAN):
        g.signature_right = False
        g.problems.append(f"status is {diagnosis.status.value}, expected failure")
    return g


def allowed_ids(expected_class: str) -> list[str] | None:
    """Ids right for a class: the map's, else any for other:*, else the id of the same name."""
    mapped = class_map()
    if expected_class in mapped:
        return mapped[expected_class]
    if expected_class.startswith("other:"):
        return None
    return [expected_class] if expected_class in default_library().by_id else []


def _degrades(signature_id: str) -> bool:
    sig = default_library().by_id.get(signature_id)
    return sig is not None and sig.outcome is Outcome.DEGRADATION


def _role(signature_id: str) -> str | None:
    sig = default_library().by_id.get(signature_id)
    return str(sig.role) if sig else None
