"""One YAML document validated into a ``Signature``, problems recorded instead of raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from signatures.patterns import PatternProblem, check_pattern
from signatures.spec import (
    CATEGORIES,
    DETECTORS,
    FRAMEWORKS,
    ID_RE,
    RESTART_REASON_MAX,
    DecisionPath,
    Fingerprint,
    FixStep,
    FollowUp,
    Merge,
    MissingFact,
    NegativeSample,
    Outcome,
    PositiveSample,
    Problem,
    Restart,
    RestartClass,
    Role,
    Severity,
    Signature,
    Symptom,
    default_restart,
)

# Field name -> (required, kind). Kinds are checked by SignatureReader below.
_TOP_FIELDS: dict[str, tuple[bool, str]] = {
    "id": (True, "str"),
    "title": (True, "str"),
    "category": (True, "str"),
    "tags": (True, "strlist"),
    "severity": (True, "str"),
    "role": (True, "str"),
    "priority": (False, "int"),
    "outcome": (False, "str"),
    "fingerprints": (True, "list"),
    "excludes": (False, "list"),
    "traceback_frames": (False, "strlist"),
    "summary": (True, "str"),
    "mechanism": (True, "str"),
    "observed": (True, "strlist"),
    "symptoms": (True, "list"),
    "affected": (True, "strlist"),
    "root_causes": (True, "strlist"),
    "confirm": (True, "strlist"),
    "fix": (True, "list"),
    "prevention": (True, "strlist"),
    "decision_path": (True, "map"),
    "missing_facts": (True, "list"),
    "follow_ups": (True, "list"),
    "related": (True, "strlist"),
    "references": (True, "strlist"),
    "merges": (False, "list"),
    "restart": (False, "map"),  # required on initiating signatures: see _restart
    "samples": (True, "map"),
}
_FINGERPRINT_FIELDS = {"literal", "regex", "ignore_case", "versions", "note"}
_FIX_FIELDS = {"step", "command", "why"}
_DECISION_FIELDS = {
    "evidence",
    "first_failure",
    "control",
    "follows_workload",
    "follows_node",
    "disappears",
}
_MISSING_FIELDS = {"ask", "when", "unless_env", "unless"}
_FOLLOW_UP_FIELDS = {"question", "answer", "intent"}
_POSITIVE_FIELDS = {"log", "line", "source", "diagnosis", "framework", "versions"}
_NEGATIVE_FIELDS = {"log", "why"}
_RESTART_FIELDS = {"class", "reason"}


class SignatureReader:
    """Reads one YAML document into a Signature, recording problems instead of raising."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems

    def problem(self, field_name: str, reason: str) -> None:
        self.problems.append(Problem(self.file, field_name, reason))

    def _str(self, value: Any, where: str, *, required: bool = True) -> str:
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value.strip()):
            self.problem(where, "must be a non-empty string")
            return ""
        return value

    def _strlist(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem(where, "must be a list of strings")
            return ()
        return tuple(value)

    def _map(self, value: Any, where: str, allowed: set[str], required: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.problem(where, "must be a mapping")
            return {}
        for key in value:
            if key not in allowed:
                self.problem(f"{where}.{key}", "unknown field")
        for key in sorted(required - value.keys()):
            self.problem(f"{where}.{key}", "missing required field")
        return value

    def fingerprint(self, value: Any, where: str) -> Fingerprint | None:
        raw = self._map(value, where, _FINGERPRINT_FIELDS, set())
        if not raw:
            return None
        literal, regex = raw.get("literal"), raw.get("regex")
        if (literal is None) == (regex is None):
            self.problem(where, "needs exactly one of 'literal' or 'regex'")
            return None
        ignore_case = raw.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            self.problem(f"{where}.ignore_case", "must be true or false")
            ignore_case = False
        fp = Fingerprint(
            literal=self._str(literal, f"{where}.literal") if literal is not None else None,
            regex=self._str(regex, f"{where}.regex") if regex is not None else None,
            ignore_case=ignore_case,
            versions=self._str(raw.get("versions"), f"{where}.versions", required=False) or None,
            note=self._str(raw.get("note"), f"{where}.note", required=False) or None,
        )
        if fp.regex:
            problem: PatternProblem | None = check_pattern(fp.regex)
            if problem is not None:
                self.problem(f"{where}.regex", problem.reason)
                return None
        if fp.literal is not None and "\n" in fp.literal:
            self.problem(f"{where}.literal", "must be on one line")
            return None
        return fp

    def read(self, doc: Any) -> Signature | None:
        if not isinstance(doc, dict):
            self.problem("(document)", "must be a mapping of signature fields")
            return None
        before = len(self.problems)
        for key in doc:
            if key not in _TOP_FIELDS:
                self.problem(str(key), "unknown field")
        for key, (required, _) in _TOP_FIELDS.items():
            if required and key not in doc:
                self.problem(key, "missing required field")
        if len(self.problems) > before and any(
            p.reason == "missing required field" for p in self.problems[before:]
        ):
            return None

        sig_id = self._str(doc["id"], "id")
        if sig_id and not ID_RE.match(sig_id):
            self.problem("id", "must be lower-case words joined by '-'")
        if sig_id and Path(self.file).stem != sig_id:
            self.problem("id", f"must match the file name ({Path(self.file).stem!r})")
        category = self._str(doc["category"], "category")
        if category and category not in CATEGORIES:
            self.problem("category", f"unknown category {category!r}; one of {', '.join(CATEGORIES)}")
        if category and Path(self.file).parent.name != category:
            self.problem("category", f"file must live in library/{category}/")
        try:
            severity = Severity(doc["severity"])
        except ValueError:
            self.problem("severity", f"one of {', '.join(s.value for s in Severity)}")
            severity = Severity.INFO
        try:
            role = Role(doc["role"])
        except ValueError:
            self.problem("role", f"one of {', '.join(r.value for r in Role)}")
            role = Role.INITIATING
        restart = self._restart(doc.get("restart"), role)
        priority = doc.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            self.problem("priority", "must be an integer")
            priority = 0

        try:
            outcome = Outcome(doc.get("outcome", Outcome.FAILURE.value))
        except ValueError:
            self.problem("outcome", f"one of {', '.join(o.value for o in Outcome)}")
            outcome = Outcome.FAILURE

        fingerprints = self._fingerprints(doc["fingerprints"], "fingerprints", required=True)
        excludes = self._fingerprints(doc.get("excludes", []), "excludes", required=False)
        frames = self._strlist(doc.get("traceback_frames", []), "traceback_frames")
        for i, frame in enumerate(frames):
            frame_problem = check_pattern(frame)
            if frame_problem is not None:
                self.problem(f"traceback_frames[{i}]", frame_problem.reason)

        symptoms = tuple(
            Symptom(
                symptom=self._str(m.get("symptom"), f"symptoms[{i}].symptom"),
                cause=self._str(m.get("cause"), f"symptoms[{i}].cause"),
            )
            for i, item in enumerate(self._list(doc["symptoms"], "symptoms"))
            if (m := self._map(item, f"symptoms[{i}]", {"symptom", "cause"}, {"symptom", "cause"}))
        )
        fix = tuple(
            FixStep(
                step=self._str(m.get("step"), f"fix[{i}].step"),
                command=self._str(m.get("command"), f"fix[{i}].command", required=False) or None,
                why=self._str(m.get("why"), f"fix[{i}].why", required=False) or None,
            )
            for i, item in enumerate(self._list(doc["fix"], "fix", nonempty=True))
            if (m := self._map(item, f"fix[{i}]", _FIX_FIELDS, {"step"}))
        )
        dp = self._map(doc["decision_path"], "decision_path", _DECISION_FIELDS, _DECISION_FIELDS)
        decision_path = DecisionPath(
            **{k: self._str(dp.get(k), f"decision_path.{k}") for k in sorted(_DECISION_FIELDS)}
        )
        missing = tuple(
            MissingFact(
                ask=self._str(m.get("ask"), f"missing_facts[{i}].ask"),
                when=self._str(m.get("when"), f"missing_facts[{i}].when"),
                unless_env=self._strlist(m.get("unless_env", []), f"missing_facts[{i}].unless_env"),
                unless=self._detectors(m.get("unless", []), f"missing_facts[{i}].unless"),
            )
            for i, item in enumerate(self._list(doc["missing_facts"], "missing_facts"))
            if (m := self._map(item, f"missing_facts[{i}]", _MISSING_FIELDS, {"ask", "when"}))
        )
        follow_ups = tuple(
            FollowUp(
                question=self._str(m.get("question"), f"follow_ups[{i}].question"),
                answer=self._str(m.get("answer"), f"follow_ups[{i}].answer"),
                intent=self._str(m.get("intent"), f"follow_ups[{i}].intent", required=False) or None,
            )
            for i, item in enumerate(self._list(doc["follow_ups"], "follow_ups"))
            if (m := self._map(item, f"follow_ups[{i}]", _FOLLOW_UP_FIELDS, {"question", "answer"}))
        )
        merges = tuple(
            Merge(
                cls=self._str(m.get("class"), f"merges[{i}].class"),
                reason=self._str(m.get("reason"), f"merges[{i}].reason"),
            )
            for i, item in enumerate(self._list(doc.get("merges", []), "merges"))
            if (m := self._map(item, f"merges[{i}]", {"class", "reason"}, {"class", "reason"}))
        )
        samples = self._map(doc["samples"], "samples", {"positive", "negative"}, {"positive", "negative"})
        positive = tuple(
            PositiveSample(
                log=self._str(m.get("log"), f"samples.positive[{i}].log"),
                line=self._str(m.get("line"), f"samples.positive[{i}].line"),
                source=self._str(m.get("source"), f"samples.positive[{i}].source"),
                diagnosis=self._str(m.get("diagnosis"), f"samples.positive[{i}].diagnosis", required=False)
                or None,
                framework=self._framework(m.get("framework"), f"samples.positive[{i}].framework"),
                versions=self._str(m.get("versions"), f"samples.positive[{i}].versions", required=False)
                or None,
            )
            for i, item in enumerate(self._list(samples.get("positive"), "samples.positive", nonempty=True))
            if (m := self._map(item, f"samples.positive[{i}]", _POSITIVE_FIELDS, {"log", "line", "source"}))
        )
        negative = tuple(
            NegativeSample(
                log=self._str(m.get("log"), f"samples.negative[{i}].log"),
                why=self._str(m.get("why"), f"samples.negative[{i}].why"),
            )
            for i, item in enumerate(self._list(samples.get("negative"), "samples.negative", nonempty=True))
            if (m := self._map(item, f"samples.negative[{i}]", _NEGATIVE_FIELDS, {"log", "why"}))
        )
        for i, sample in enumerate(positive):
            if sample.line and sample.log and sample.line not in sample.log:
                self.problem(f"samples.positive[{i}].line", "is not a substring of the sample's log")

        if len(self.problems) > before:
            return None
        return Signature(
            id=sig_id,
            title=self._str(doc["title"], "title"),
            category=category,
            tags=self._strlist(doc["tags"], "tags"),
            severity=severity,
            role=role,
            priority=priority,
            outcome=outcome,
            fingerprints=fingerprints,
            excludes=excludes,
            traceback_frames=frames,
            summary=self._str(doc["summary"], "summary"),
            mechanism=self._str(doc["mechanism"], "mechanism"),
            observed=self._strlist(doc["observed"], "observed"),
            symptoms=symptoms,
            affected=self._strlist(doc["affected"], "affected"),
            root_causes=self._strlist(doc["root_causes"], "root_causes"),
            confirm=self._strlist(doc["confirm"], "confirm"),
            fix=fix,
            prevention=self._strlist(doc["prevention"], "prevention"),
            decision_path=decision_path,
            missing_facts=missing,
            follow_ups=follow_ups,
            related=self._strlist(doc["related"], "related"),
            references=self._strlist(doc["references"], "references"),
            merges=merges,
            restart=restart,
            positive=positive,
            negative=negative,
            path=self.file,
        )

    def _restart(self, value: Any, role: Role) -> Restart:
        # An initiating signature names the cause, so it must say what a restart would do; the
        # others only re-report a cause printed elsewhere and default to unknown.
        if value is None:
            if role is Role.INITIATING:
                self.problem("restart", "required on initiating signatures: {class, reason}")
            return default_restart(role)
        raw = self._map(value, "restart", _RESTART_FIELDS, _RESTART_FIELDS)
        try:
            cls = RestartClass(str(raw.get("class")))
        except ValueError:
            if "class" in raw:
                self.problem("restart.class", f"one of {', '.join(c.value for c in RestartClass)}")
            cls = RestartClass.UNKNOWN
        reason = self._str(raw.get("reason"), "restart.reason") if "reason" in raw else ""
        if "\n" in reason.strip() or len(reason) > RESTART_REASON_MAX:
            self.problem("restart.reason", f"must be one line of at most {RESTART_REASON_MAX} characters")
        return Restart(cls, " ".join(reason.split()))

    def _framework(self, value: Any, where: str) -> str | None:
        name = self._str(value, where, required=False)
        if name and name not in FRAMEWORKS:
            self.problem(where, f"unknown framework {name!r}; one of {', '.join(FRAMEWORKS)}")
        return name or None

    def _detectors(self, value: Any, where: str) -> tuple[str, ...]:
        names = self._strlist(value, where)
        for name in names:
            if name not in DETECTORS:
                self.problem(where, f"unknown detector {name!r}; one of {', '.join(sorted(DETECTORS))}")
        return names

    def _list(self, value: Any, where: str, *, nonempty: bool = False) -> list[Any]:
        if not isinstance(value, list):
            self.problem(where, "must be a list")
            return []
        if nonempty and not value:
            self.problem(where, "must not be empty")
        return value

    def _fingerprints(self, value: Any, where: str, *, required: bool) -> tuple[Fingerprint, ...]:
        items = self._list(value, where, nonempty=required)
        found = [self.fingerprint(item, f"{where}[{i}]") for i, item in enumerate(items)]
        return tuple(fp for fp in found if fp is not None)
