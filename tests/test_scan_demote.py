"""Demoted and hot patterns (signatures/demote.py): found in bulk, never at the cost of a line."""

from __future__ import annotations

import pytest

from signatures import diagnose, hits
from signatures.demote import DEMOTE_AFTER, bulk_lines, bulk_regex
from signatures.diagnosis import Status
from signatures.engine import default_library
from signatures.library import Library
from signatures.lines import unwrap
from signatures.sources import Source
from signatures.tracebacks import EXCEPTION_LINE

pytest.importorskip("hyperscan")

LINES = [
    "ValueError: bad shape",
    "[rank3]: ValueError: bad shape",
    "[rank3]:[2026-11-29 03:00:01] [INFO] [x.py:3] ValueError: x",
    "[default0]:[rank1]: torch.distributed.DistBackendError: NCCL error",
    "gpu-node-001:4000:4100 [3] NCCL INFO RuntimeError: nope",
    "2024-09-11 17:52:18,030 - ERROR - KeyError: 'x'",
    "[E1129 23:59:01.123456 ProcessGroupNCCL.cpp:616] RuntimeError: boom",
    "node003: [rank: 1] triton.runtime.errors.OutOfResources: out of resource",
    "INFO:root:  [worker 3] **ZeroDivisionError**",
    "vllm-1  | ERROR 02-28 17:42:17 [core.py:1006] EngineDeadError:",
    "[rank3]: step 5 check ValueError: none, continuing",
    "   KeyboardInterrupt",
    "> [pod/trainer-0/main] OSError: [Errno 28] No space left on device",
]


@pytest.mark.parametrize("line", LINES)
def test_the_bulk_form_finds_every_line_the_verifier_accepts(line: str) -> None:
    bulk = bulk_lines(EXCEPTION_LINE.pattern, False)
    assert bulk is not None
    data = f"noise line\n{line}\nmore noise\n".encode()
    found = bulk.starts(data, 0)
    if EXCEPTION_LINE.search(unwrap(line).message):
        assert found == [len("noise line\n")]


def test_the_lines_above_are_mostly_ones_the_verifier_accepts() -> None:
    accepted = [line for line in LINES if EXCEPTION_LINE.search(unwrap(line).message)]
    assert len(accepted) >= len(LINES) - 3


def test_the_bulk_form_rejects_a_mention_mid_line() -> None:
    bulk = bulk_lines(EXCEPTION_LINE.pattern, False)
    assert bulk is not None
    assert bulk.starts(b"[rank3]:[2026-11-29 03:00:01] step 5 check ValueError: none, continuing\n", 0) == []


def test_patterns_that_cannot_be_demoted_are_left_alone() -> None:
    assert bulk_regex("ValueError: x") is None  # not anchored
    assert bulk_regex("^a|b") is None  # an alternative is not anchored
    assert bulk_regex("^(?:^|x)y") is None  # a second anchor


@pytest.fixture(scope="module")
def library() -> Library:
    return default_library()


@pytest.mark.parametrize("where", [0.3, 0.7, 1.0])
def test_errors_after_demotion_are_still_found(library: Library, where: float) -> None:
    # Many chunks of rejected mentions: the exception pattern is demoted after the first chunk.
    n = 150_000
    assert n > 10 * DEMOTE_AFTER
    lines = [
        f"[rank{i % 8}]:[2026-11-29 03:00:{i % 60:02d}] step {i} check ValueError: none" for i in range(n)
    ]
    at = int(n * where)
    lines.insert(at, "[rank5]:[2026-11-29 03:00:00] WidgetCacheError: the widget cache lost shard 7")
    d = diagnose([Source.from_text("dense.log", "\n".join(lines) + "\n")], library=library)
    assert d.status is Status.UNRECOGNIZED
    assert d.initiating is not None and "WidgetCacheError" in d.initiating.text
    assert d.initiating.line == at + 1


@pytest.mark.parametrize(
    "line,with_needles",
    [("check ValueError: none, continuing", True), ("rank      : 37 (local_rank: 5)", False)],
)
def test_a_pattern_switched_to_hyperscan_mid_chunk_finds_the_same_lines(
    library: Library, monkeypatch: pytest.MonkeyPatch, line: str, with_needles: bool
) -> None:
    # A pattern flagging more than SWITCH_LINES lines of a chunk is located by Hyperscan from there.
    matcher = next(
        m for m in library.matchers if bool(m.needles) == with_needles and m.locate.search(line.encode())
    )
    lines = [f"[rank{i % 8}]: step {i} " + (line if i % 3 else "fine") for i in range(3 * hits.SWITCH_LINES)]
    chunk = ("\n".join(lines) + "\n").encode()
    flagged = 2 * hits.SWITCH_LINES
    hot: dict[int, int] = {}
    switched = hits._located(matcher, chunk, 0, hot)
    assert hot[matcher.pid] > hits.HOT_LINES  # it did switch
    monkeypatch.setattr(hits, "SWITCH_LINES", 10**9)
    stepped = hits._located(matcher, chunk, 0, {})
    assert len(stepped) == flagged
    assert switched == stepped
    # Without a bulk form to switch to, the literals' lines are all found all the same.
    monkeypatch.setattr(hits, "SWITCH_LINES", 64)
    monkeypatch.setattr(hits, "_bulk_locator", lambda matcher: None)
    assert hits._located(matcher, chunk, 0, {}) == stepped


@pytest.mark.parametrize("where", ["start", "end"])
def test_a_line_of_megabytes_is_located_by_hyperscan_with_the_same_lines(
    library: Library, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    line = "check ValueError: none, continuing"
    matcher = next(m for m in library.matchers if m.needles and m.locate.search(line.encode()))
    hit = "torch.cuda.OutOfMemoryError: CUDA out of memory"
    bar = "".join(f"\r{i % 100:3d}%|### | {i}/99999" for i in range(4000))
    long_line = {"start": hit + bar, "end": bar + "\r" + hit}[where]
    assert len(long_line) > hits.LONG_LINE
    chunk = f"a line\n{long_line}\n[rank1]: {hit}\nlast line\n".encode()
    fast = hits._located(matcher, chunk, 0, {})
    monkeypatch.setattr(hits, "LONG_LINE", 10**9)
    slow = hits._located(matcher, chunk, 0, {})
    assert fast == slow
    assert len("a line\n") in slow


def test_segments_of_a_long_line_are_found_by_hyperscan_as_by_re(
    library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    from signatures import evidence

    hit = "torch.cuda.OutOfMemoryError: CUDA out of memory"
    matcher = next(m for m in library.matchers if m.needles and m.locate.search(hit.encode()))
    segments = [f"{i % 100:3d}%|### | {i}/99999" if i % 700 else hit for i in range(1, 3000)]
    data = "\r".join(segments).encode()
    fast = evidence.Segments(data, data.decode())._matching(matcher)
    monkeypatch.setattr(evidence, "bulk_locate", lambda pattern, ignore_case: None)
    slow = evidence.Segments(data, data.decode())._matching(matcher)
    assert fast == slow == [i for i in range(len(segments)) if segments[i] == hit]
