"""The rules that pick the initiating failure, in one place.

1. Role first: an initiating failure (a known initiating signature, or an exception that ends a
   traceback, or a bare exception line a later traceback ends in again: echoes.py; a TensorFlow
   op's failed status that a later failure carries: opfailures.py) beats an
   unknown error without a traceback, which beats a downstream symptom,
   which beats an unknown error printed after a downstream symptom (a consequence of it, such
   as the launcher's exception when a killed worker took the trainer down), which beats a
   wrapper's re-report, which beats a benign warning.
2. Then time: timestamps when both lines have them (of the same kind; within one file only when
   they differ by more than SAME_MOMENT_S), else the order of the text: line order within a
   file, the order the files were given across files.
3. Then specificity: a known signature beats an unknown error, and higher ``priority`` wins.
Several signatures on one line: the line takes the best of them by the same role order and
priority. Before ordering, the noise rules demote what did not stop the run: an error the process
trained or carried on past, a known failure in an info-level record (or a warning survived), an
exception being handled when another was raised, an entry of torchrun's failure table listed
under `Failures:` above its `Root Cause (first observed failure)` (also in a paste that starts
inside that list), the root-cause entry of another agent's table whose `time` is later (several
nodes); of one entry its `exitcode :` line states the failure (failtable.py); what a process
prints after saying it received SIGTERM or SIGINT (its tear-down; a scheduler's verdict excepted);
a Slurm STEP line beside its JOB line of the same cancellation (the JOB line states it); a
scheduler's stop (time limit, cancellation) after a failure a process stated; what failed before
the run said it finished as meant, and the same failure again after that (stops.py);
and episodes.py, details.py, bursts.py and reports.py pick which line of a several-line failure
states it (a signal box's field that names the signal, a logged traceback's exception line, a
report's stated detail). Frame rules name an
exception by the frames where it was raised, up to the nearest installed package's. Every rule
here has a test in tests/test_ranking.py (episodes: test_episodes.py; reports: test_reports.py;
bursts, levels, stops after a stated failure: test_bursts.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from signatures.bursts import move_announcements_to_detail, move_to_restatements, move_to_warned_causes
from signatures.candidate import (
    TIER_BENIGN,
    TIER_DEATH,
    TIER_DEGRADED,
    TIER_DOWNSTREAM,
    TIER_INITIATING,
    TIER_LATE_UNKNOWN,
    TIER_UNKNOWN,
    TIER_WRAPPER,
    Candidate,
)
from signatures.details import move_to_stated_detail
from signatures.echoes import vouch_for_echoes
from signatures.episodes import (
    SURVIVABLE_SHAPES,
    box_lines,
    carried_on,
    drop_wrapped_halves,
    keep_thrown_statements,
    move_introductions,
    move_to_box_leads,
    move_to_captured_output,
    says_the_same,
    stack_of_quiet_record,
)
from signatures.failtable import read_failure_tables
from signatures.hits import Hit
from signatures.kernelasserts import yield_to_late_assertions
from signatures.leads import promote_episode_leads
from signatures.library import Kind, Library
from signatures.lines import time_key, unwrap
from signatures.nativestacks import move_to_stack_owners
from signatures.ncclwarn import nccl_fell_back
from signatures.nonfinite import read_non_finite_metrics
from signatures.opfailures import read_op_failures
from signatures.pendinglists import name_diverged_lists
from signatures.printedfirst import move_to_printed_first
from signatures.progress import Progress
from signatures.quotedtracebacks import yield_to_quoted_exceptions
from signatures.reports import (
    abort_follows_its_error,
    exit_follows_its_crash,
    join_same_instant_reports,
    move_to_coded_detail,
    move_to_first_root_error,
    move_to_unwound_warnings,
    quiet_traceback_records,
    restore_quoted_causes,
    yield_carriers,
    yield_report_banners,
)
from signatures.shapecheck import PY_WARNING
from signatures.shapes import ShapeKind
from signatures.spec import Outcome, Signature
from signatures.stops import (
    demote_step_beside_job,
    demote_teardown,
    read_finishes,
    yield_reactions_to_kills,
    yield_stops_to_stated_failures,
)
from signatures.tracebacks import exception_name, handled_below, recovered

_ROLE_TIER = {
    "initiating": TIER_INITIATING,
    "downstream": TIER_DOWNSTREAM,
    "wrapper": TIER_WRAPPER,
    "benign": TIER_BENIGN,
}


def candidates(
    hits: Iterable[Hit],
    library: Library,
    progress: Progress | None = None,
    stops: Iterable[tuple[int, int]] = (),
    finishes: Iterable[tuple[int, int]] = (),
) -> list[Candidate]:
    """Collapse hits to one candidate per line, applying traceback, frame and handling rules.
    ``stops`` are the (file, line) where a process says it received a stop signal, ``finishes``
    where the run says it finished as meant."""
    by_line: dict[tuple[int, int], list[Hit]] = {}
    for hit in hits:
        if hit.matcher.kind is Kind.FACT:
            continue
        by_line.setdefault((hit.file_index, hit.line), []).append(hit)
    out: list[Candidate] = []
    for line_hits in by_line.values():
        signed = [h for h in line_hits if h.matcher.signature is not None]
        if signed:
            best = min(signed, key=_line_rank)
            sig = best.matcher.signature
            assert sig is not None
            cand = Candidate(best, sig, _tier(sig))
            if _logged_and_handled(best) or _a_quiet_record(best, progress) or _survived_by_record(best):
                cand.tier = TIER_BENIGN
        else:
            hit = min(line_hits, key=_shape_rank)
            kind = hit.matcher.shape.kind if hit.matcher.shape is not None else ShapeKind.ERROR
            if hit.matcher.kind is Kind.EXCEPTION and hit.view.in_traceback and not handled_below(hit.after):
                tier = TIER_INITIATING
            else:
                tier = _SHAPE_TIER[kind]
            if hit.view.ignored or recovered(hit.after):
                tier = TIER_BENIGN  # handled: "Exception ignored in ...", or retried right after
            elif (
                kind is not ShapeKind.DEGRADATION
                and progress
                and progress.went_on(hit.file_index, hit.line, hit.rank)
                and not (tier == TIER_INITIATING and hit.view.from_module)  # stdout flushed as it exits
            ):
                tier = TIER_BENIGN  # handled: the process trained on after it
            cand = Candidate(hit, None, tier)
            framed = _by_frames(hit, library)
            if framed is not None and tier == TIER_INITIATING:
                cand = Candidate(hit, framed, _tier(framed), via_frames=True)
        cand.line, cand.text = cand.hit.line, cand.hit.text
        shapes = [h.matcher.shape for h in line_hits if h.matcher.shape is not None]
        cand.shapes = frozenset(x.name for x in shapes)
        cand.death = any(x.kind is ShapeKind.DEATH for x in shapes)
        _move_to_assert(cand)
        out.append(cand)
    out = drop_wrapped_halves(move_introductions(move_to_stack_owners(out)))
    move_to_box_leads(out)
    yield_to_late_assertions(out)
    move_to_printed_first(out)
    yield_to_quoted_exceptions(out)
    yield_report_banners(out)
    yield_carriers(out)
    move_to_coded_detail(out)
    join_same_instant_reports(out)
    abort_follows_its_error(out)
    exit_follows_its_crash(out)
    restore_quoted_causes(out)
    quiet_traceback_records(out)
    out = move_to_first_root_error(move_to_unwound_warnings(out))
    out = keep_thrown_statements(move_to_captured_output(move_to_stated_detail(out)))
    out = move_announcements_to_detail(move_to_restatements(out))
    move_to_warned_causes(out)
    promote_episode_leads(out)
    vouch_for_echoes(out)
    read_op_failures(out)
    _demote_survived_errors(out)
    _demote_survived_warnings(out)
    read_non_finite_metrics(out, progress)
    _demote_late_unknowns(out)
    read_failure_tables(out)
    demote_teardown(out, list(stops))
    read_finishes(out, list(finishes))
    demote_step_beside_job(out)
    yield_stops_to_stated_failures(out, time_order)
    yield_reactions_to_kills(out)
    name_diverged_lists(out, library)
    return out


def _demote_survived_errors(cands: list[Candidate]) -> None:
    # An error record after which the process printed ordinary output, and after which nothing
    # failed anywhere, was survived (TensorFlow's "Unable to register cuDNN factory" at start-up).
    lines = {(c.hit.file_index, c.line) for c in cands}
    for c in sorted(cands, key=lambda c: (c.hit.file_index, -c.line)):  # the latest first
        shape = c.hit.matcher.shape
        if c.signature is not None or c.tier != TIER_UNKNOWN or shape is None:
            continue
        if shape.name not in SURVIVABLE_SHAPES or c.death or not carried_on(c, lines):
            continue
        later = [x for x in cands if x is not c and x.tier < TIER_BENIGN and time_order(c, x) < 0]
        if not later:
            c.tier = TIER_BENIGN


def _demote_late_unknowns(cands: list[Candidate]) -> None:
    downstream = [c for c in cands if c.signature is not None and c.tier == TIER_DOWNSTREAM]
    if not downstream:
        return
    for c in cands:
        unknown = c.signature is None and c.tier in (TIER_INITIATING, TIER_UNKNOWN, TIER_DEGRADED, TIER_DEATH)
        # A scheduler's verdict explains the deaths around it; it is no consequence of them. Nor
        # is a launcher's report that another process died first (Open MPI's box naming rank 0
        # after rank 1's "Horovod has been shut down").
        late = any(time_order(d, c) < 0 for d in downstream)
        if unknown and late and "scheduler-verdict" not in c.shapes and not _other_death(c, downstream):
            c.tier = TIER_LATE_UNKNOWN


def _other_death(c: Candidate, downstream: list[Candidate]) -> bool:
    ranks = {n for t in box_lines(c.hit) if (n := unwrap(t).rank) is not None} if c.death else set()
    return len(ranks) == 1 and not ranks & {d.hit.rank for d in downstream}


def _logged_and_handled(hit: Hit) -> bool:
    # An error a library logged at warning or info level and then worked around ("assuming every
    # input is mutated", "falling back to eager") did not stop the run.
    return hit.facts.level in ("W", "I", "D") and recovered(hit.after, lines=6)


_REPORTED = re.compile(r"<class '[\w.]+'>|\b[A-Z]\w*(?:Error|Exception)\b")
_WARNING_LEAD = re.compile(r"^\W{0,4}(?:Warning|WARNING|WARN)\b")


def _a_quiet_record(hit: Hit, progress: Progress | None) -> bool:
    # A record logged at info or debug level states no failure, whatever words it holds (JAX logs
    # each optional backend it fails to open, "Unable to initialize backend 'tpu'", at INFO); one
    # logged as a warning states none when the process trained on past it.
    # A degradation is logged at info as a matter of course, and TensorFlow reports the exception
    # that stops a run at INFO ("Error reported to Coordinator: <class '...Error'>").
    sig = hit.matcher.signature
    if sig is None or sig.role.value != "initiating" or sig.outcome is Outcome.DEGRADATION:
        return False
    if hit.facts.level in ("I", "D"):
        return _REPORTED.search(hit.facts.message) is None
    return warned(hit) and progress is not None and progress.went_on(hit.file_index, hit.line, hit.rank)


def _survived_by_record(hit: Hit) -> bool:
    # A C++ stack printed under an info record is part of it; an NCCL warning the same process
    # went on from with ordinary INFO lines was worked around (an IB device it fell back from).
    return stack_of_quiet_record(hit) or nccl_fell_back(hit.text, hit.after)


def warned(hit: Hit) -> bool:
    """The line is a record logged as a warning (by its head, or a leading "Warning:")."""
    return hit.facts.level == "W" or _WARNING_LEAD.match(hit.facts.message) is not None


def _demote_survived_warnings(cands: list[Candidate]) -> None:
    # A known failure logged as a warning, after which the same process printed ordinary output,
    # was survived: "Warning: Failed to set NUMA affinity: libnuma.so: cannot open shared object".
    # (A degradation is a warning the run carries on from by nature: it stays.)
    lines = {(c.hit.file_index, c.line) for c in cands}
    for c in sorted(cands, key=lambda c: (c.hit.file_index, -c.line)):  # latest first: a later warning
        sig = c.signature  # survived is no failure the earlier one stated
        if sig is None or sig.outcome is Outcome.DEGRADATION or c.tier != TIER_INITIATING:
            continue
        if (warned(c.hit) and carried_on(c, lines)) or _went_on_from_warning(c, cands, lines):
            c.tier = TIER_BENIGN


def _went_on_from_warning(c: Candidate, cands: list[Candidate], lines: set[tuple[int, int]]) -> bool:
    # The warnings module prints and returns, by design (a warning made an error is raised, with a
    # traceback, not printed in this form): its source line and one ordinary line of the process
    # after it show the process went on, and what fails later states the failure; unless it says
    # the warning's words again ("UserWarning: CUDA initialization: Unexpected error from
    # cudaGetDeviceCount()", then "RuntimeError: Unexpected error from cudaGetDeviceCount()"): then
    # the warning stated it first. With nothing failing later, the warning is all the log says.
    if PY_WARNING.match(c.hit.facts.message) is None or not carried_on(c, lines, 2, within=3):
        return False
    later = [x for x in cands if x.hit.file_index == c.hit.file_index and x.line > c.line]
    failed = [x for x in later if x.tier <= TIER_DEATH][:WARNING_ECHOES_READ]
    return bool(failed) and not any(says_the_same(c, x) for x in failed)


WARNING_ECHOES_READ = 20  # failures after a warning read for its words (each comparison is quadratic)


_SHAPE_TIER = {
    ShapeKind.ERROR: TIER_UNKNOWN,
    ShapeKind.DEGRADATION: TIER_DEGRADED,
    ShapeKind.DEATH: TIER_DEATH,
}


def _shape_rank(hit: Hit) -> int:
    # What a line states, best first: a Python exception, another error, a degradation, a death.
    if hit.matcher.kind is Kind.EXCEPTION:
        return 0
    shape = hit.matcher.shape
    return _SHAPE_TIER[shape.kind] if shape is not None else TIER_UNKNOWN


def _line_rank(hit: Hit) -> tuple[int, int]:
    sig = hit.matcher.signature
    return (_tier(sig), -sig.priority if sig else 0)


def _tier(sig: Signature | None) -> int:
    return TIER_UNKNOWN if sig is None else _ROLE_TIER[sig.role.value]


_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")


def _by_frames(hit: Hit, library: Library) -> Signature | None:
    """The signature whose traceback_frames match where this exception was raised: the frames
    from the deepest up to the deepest one of an installed package (the library that raised it;
    frames above it only passed the call through, as a compiler's wrapper around user code)."""
    for frame in reversed(hit.view.frames):
        for rule in library.frame_rules:
            if rule.pattern.search(frame):
                return rule.signature
        if _INSTALLED.search(frame):
            return None
    return None


def _move_to_assert(cand: Candidate) -> None:
    # A bare `AssertionError:` (or one whose message is only a repr) is stated by the `assert`
    # statement Python echoes just above it: that line names the failed condition.
    view = cand.hit.view
    if view.assert_offset is None or view.assert_text is None:
        return
    message = cand.hit.facts.message
    if exception_name(message) != "AssertionError":
        return
    rest = message.split(":", 1)[1].strip() if ":" in message else ""
    if rest and not rest.endswith(("(", "[", "{")):
        return
    cand.line = cand.hit.line - view.assert_offset
    cand.text = view.assert_text


def _compare(a: Candidate, b: Candidate) -> int:
    if a.tier != b.tier:
        return -1 if a.tier < b.tier else 1
    if a.yields != b.yields:
        return 1 if a.yields else -1
    if a.tier == TIER_WRAPPER and a.death != b.death:
        return -1 if a.death else 1  # the launcher's report of how a worker died beats its cleanup
    order = time_order(a, b)
    if order:
        return order
    sa, sb = a.signature is not None, b.signature is not None
    if sa != sb:
        return -1 if sa else 1
    if a.priority != b.priority:
        return -1 if a.priority > b.priority else 1
    return 0


# Within one file, lines printed within this many seconds of each other keep their file order:
# ranks report the same event with jitter, and buffered output reorders them by that much.
SAME_MOMENT_S = 5.0


def time_order(a: Candidate, b: Candidate) -> int:
    """-1 when ``a`` was printed before ``b``, 1 after, 0 when nothing tells (rule 2)."""
    ha, hb = a.hit, b.hit
    by_time = _by_timestamps(ha.facts.time, hb.facts.time, same_file=ha.file_index == hb.file_index)
    if by_time:
        return by_time
    if ha.file_index != hb.file_index:
        return -1 if ha.file_index < hb.file_index else 1
    if a.line != b.line:
        return -1 if a.line < b.line else 1
    return 0


def _by_timestamps(a: str | None, b: str | None, *, same_file: bool) -> int:
    """-1/1 when the timestamps order two lines, 0 when they cannot or should not."""
    ta, tb = time_key(a), time_key(b)
    if ta is None or tb is None or ta[0] != tb[0] or ta[1] == tb[1]:
        return 0
    # Across files any difference counts; within a file only a clear one overrides line order.
    if same_file and abs(ta[1] - tb[1]) <= SAME_MOMENT_S:
        return 0
    return -1 if ta[1] < tb[1] else 1


def ordered(cands: list[Candidate]) -> list[Candidate]:
    """Candidates best first: the head is the initiating failure."""
    return sorted(cands, key=functools.cmp_to_key(_compare))
