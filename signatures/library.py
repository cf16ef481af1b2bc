"""The compiled library: every fingerprint of every signature, plus the engine's own patterns,
as one multi-pattern scanner and one per-line verifier per pattern.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from signatures.environment import FACTS, FactPattern
from signatures.loader import load_signatures
from signatures.patterns import literal_to_regex, scan_form
from signatures.scan import ScanCompileError, Scanner, ScanPattern, make_scanner
from signatures.shapes import SHAPES, Shape
from signatures.spec import Fingerprint, Problem, Signature, SignatureError
from signatures.structure import STRUCTURE, StructurePattern
from signatures.tracebacks import EXCEPTION_LINE


class Kind(StrEnum):
    SIGNATURE = "signature"
    EXCEPTION = "exception"  # a Python exception line no signature claims
    SHAPE = "shape"  # a line that states a failure by its shape (signatures/shapes.py)
    STRUCTURE = "structure"  # a line that tells who is who (signatures/structure.py)
    FACT = "fact"  # an environment fact


# The engine's own patterns: what an error looks like when no signature knows it.
_EXCEPTION_SCAN = (
    r"(?:Error|Exception|Exit|Interrupt|Failure|Fault)(?:\([\w.]{1,120}\))?"  # Ray's RayTaskError(KeyError):
    r"(?: \(see above for traceback\))?(?::|[ \t]*\r?$)"  # "MemoryError " as pasted
    # an exception class of any name in an exceptions module: triton.runtime.errors.OutOfResources:
    r"|\.(?:exc|errors?|exceptions?)\.[A-Z][A-Za-z0-9]+: "
)
_EXCEPTION_NEEDLES = (
    b"Error",
    b"Exception",
    b"Exit",
    b"Interrupt",
    b"Failure",
    b"Fault",
    b".exc.",
    b".error",
    b".exception",
)

# Shapes scanned by their pattern, not their literals: the lines a shape finds are those that
# hold a literal and match the pattern, so either flags every chunk that has one. Literals are
# cheaper to scan, but reported-exception's ("Error: ") are on every line of a log whose benign
# messages name an exception ("check ValueError: none"), where its pattern (a module path before
# the name) is on none: its lines were located in every chunk for nothing (dense input of
# bench/scan.py: 0.045 s of 0.47). Measured per shape, the others' patterns cost the scan more
# than their literals do (all shapes: +0.03 s per 100 MB of an ordinary log).
SCANNED_BY_PATTERN = frozenset({"reported-exception"})

# How many verified hits of one pattern one text records before it stops locating more.
CAP_SIGNATURE = 2048
CAP_BENIGN = 64
CAP_GENERIC = 512
CAP_STRUCTURE = 4096


@dataclass(frozen=True)
class Matcher:
    pid: int
    kind: Kind
    signature: Signature | None
    # Compiled on first use (most patterns are never found in a given log): start-up stays short.
    verify_source: re.Pattern[str] | tuple[str, int]
    locate_source: tuple[bytes, int]
    excludes: tuple[re.Pattern[str], ...]
    cap: int
    fact: FactPattern | None = None
    shape: Shape | None = None
    structure: StructurePattern | None = None
    needles: tuple[bytes, ...] = ()  # literals to locate lines with, when the regex would be slow

    @cached_property
    def verify(self) -> re.Pattern[str]:
        """Checks a line's unwrapped message."""
        source = self.verify_source
        return source if isinstance(source, re.Pattern) else re.compile(*source)

    @cached_property
    def locate(self) -> re.Pattern[bytes]:
        """The scan form over raw bytes (multi-line): finds the lines that may match."""
        return re.compile(*self.locate_source)


@dataclass(frozen=True)
class FrameRule:
    signature: Signature
    pattern: re.Pattern[str]


def _verify_source(fp: Fingerprint) -> tuple[str, int]:
    flags = re.IGNORECASE if fp.ignore_case else 0
    if fp.literal is not None:
        return literal_to_regex(fp.literal), flags
    assert fp.regex is not None
    return fp.regex, flags


def _verify_regex(fp: Fingerprint) -> re.Pattern[str]:
    return re.compile(*_verify_source(fp))


def _scan_regex(fp: Fingerprint) -> str:
    if fp.literal is not None:
        return literal_to_regex(fp.literal)
    assert fp.regex is not None
    return scan_form(fp.regex)


def _locate(regex: str, ignore_case: bool) -> tuple[bytes, int]:
    return regex.encode("utf-8"), re.MULTILINE | (re.IGNORECASE if ignore_case else 0)


class Library:
    """Signatures compiled for scanning. Build once per process; reuse for every diagnosis."""

    def __init__(
        self, signatures: Sequence[Signature], *, backend: str | None = None, root: Path | None = None
    ) -> None:
        self.root = root  # where it was loaded from (None: the bundled library)
        self.signatures = list(signatures)
        self.by_id = {s.id: s for s in self.signatures}
        self.backend = backend
        matchers: list[Matcher] = []
        scan_patterns: list[ScanPattern] = []
        owners: list[tuple[str, str]] = []  # (file, field) of each pattern, for errors

        def add(
            kind: Kind,
            sig: Signature | None,
            scan: str,
            verify: re.Pattern[str] | tuple[str, int],
            ignore_case: bool,
            excludes: tuple[re.Pattern[str], ...],
            cap: int,
            owner: tuple[str, str],
            fact: FactPattern | None = None,
            shape: Shape | None = None,
            structure: StructurePattern | None = None,
        ) -> None:
            pid = len(matchers)
            locate = _locate(scan, ignore_case)
            needles = (
                shape.needles if shape is not None else structure.needles if structure is not None else ()
            )
            if kind is Kind.EXCEPTION:
                needles = _EXCEPTION_NEEDLES
            matchers.append(
                Matcher(pid, kind, sig, verify, locate, excludes, cap, fact, shape, structure, needles)
            )
            # A matcher with literals is scanned for them alone: a set of literals costs the bulk
            # scanner next to nothing, and each line they find is checked with ``scan`` after.
            if needles and not (shape is not None and shape.name in SCANNED_BY_PATTERN):
                scan, ignore_case = "|".join(re.escape(n.decode("ascii")) for n in needles), False
            scan_patterns.append(ScanPattern(pid, scan, ignore_case))
            owners.append(owner)

        for sig in self.signatures:
            excludes = tuple(_verify_regex(fp) for fp in sig.excludes)
            cap = CAP_BENIGN if sig.role.value == "benign" else CAP_SIGNATURE
            for i, fp in enumerate(sig.fingerprints):
                add(
                    Kind.SIGNATURE,
                    sig,
                    _scan_regex(fp),
                    _verify_source(fp),
                    fp.ignore_case,
                    excludes,
                    cap,
                    (sig.path, f"fingerprints[{i}]"),
                )
        add(
            Kind.EXCEPTION,
            None,
            _EXCEPTION_SCAN,
            EXCEPTION_LINE,
            False,
            (),
            CAP_GENERIC,
            ("(engine)", "exception"),
        )
        for shape in SHAPES:
            add(
                Kind.SHAPE,
                None,
                shape.scan,
                shape.verify,
                shape.ignore_case,
                (),
                CAP_GENERIC,
                ("(engine)", f"shape {shape.name}"),
                shape=shape,
            )
        for pattern in STRUCTURE:
            add(
                Kind.STRUCTURE,
                None,
                pattern.scan,
                pattern.verify,
                False,
                (),
                CAP_STRUCTURE,
                ("(engine)", f"structure {pattern.name}"),
                structure=pattern,
            )
        for fact in FACTS:
            add(Kind.FACT, None, fact.scan, fact.verify, False, (), 1, ("(engine)", f"fact {fact.key}"), fact)
        self.matchers = matchers
        self.scan_patterns = scan_patterns
        self._owners = owners
        self.frame_rules = [
            FrameRule(sig, re.compile(rx)) for sig in self.signatures for rx in sig.traceback_frames
        ]
        self._scanner: Scanner | None = None

    @classmethod
    def load(cls, root: Path | None = None, *, backend: str | None = None) -> Library:
        """Load, validate and compile; every problem is reported at once as a SignatureError."""
        library = cls(load_signatures(root), backend=backend, root=root)
        library.compile()
        return library

    def without_initiating(self) -> Library:
        """This library with its initiating signatures left out: what the engine finds by shape alone.

        Downstream, wrapper and benign signatures stay, so the noise model is the same; used by
        ``bench/accuracy.py --generic-only`` to measure the engine without wording knowledge.
        """
        kept = [s for s in self.signatures if s.role.value != "initiating"]
        library = Library(kept, backend=self.backend, root=self.root)
        library.compile()
        return library

    @property
    def scanner(self) -> Scanner:
        if self._scanner is None:
            self.compile()
        assert self._scanner is not None
        return self._scanner

    def compile(self) -> None:
        """Build the multi-pattern scanner; patterns the backend refuses become SignatureErrors."""
        try:
            self._scanner = make_scanner(self.scan_patterns, self.backend)
        except ScanCompileError as exc:
            raise SignatureError(self._backend_problems(exc)) from None

    def _backend_problems(self, first: ScanCompileError) -> list[Problem]:
        # Find every pattern the backend refuses by compiling them one at a time (error path only).
        problems = []
        for pattern, (file, field) in zip(self.scan_patterns, self._owners, strict=True):
            try:
                make_scanner([pattern], self.backend)
            except ScanCompileError as exc:
                problems.append(Problem(file, field, exc.reason))
        return problems or [Problem("(library)", "(scanner)", first.reason)]
