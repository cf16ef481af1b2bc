"""Locating the lines a scan flagged: one Hyperscan pass for a pattern's literals, the same lines
as ``bytes.find`` gives; segments of progress lines read once, with the same sightings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signatures import evidence, hits
from signatures.demote import bulk_locate, needle_lines
from signatures.engine import default_library
from signatures.library import Library, Matcher
from signatures.textscan import TextScan

pytest.importorskip("hyperscan")

NEEDLES = (b"---", b"===", b"###", b"***")
# Bytes that make the literals, near-misses of them, and lines.
# A piece of many matches on one line: past demote.SAME_LINE a finder skips to the next line.
PIECES = st.sampled_from([b"-", b"=", b"#", b"*", b"--", b"##", b"a", b" ", b"\n", b"\r", b"===", b"#" * 80])


@pytest.fixture(scope="module")
def library() -> Library:
    return default_library()


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=120), st.integers(min_value=0, max_value=400))
def test_the_one_pass_finder_gives_the_lines_find_gives(pieces: list[bytes], at: int) -> None:
    chunk = b"".join(pieces) + b"\n"
    first = chunk.rfind(b"\n", 0, min(at, len(chunk))) + 1  # a line start, as the scanner gives
    finder = needle_lines(NEEDLES)
    assert finder is not None
    expected = [list(hits._find_lines(chunk, needle, first)) for needle in NEEDLES]
    assert finder.starts(chunk, first) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=120), st.integers(min_value=0, max_value=400), st.integers(1, 40))
def test_a_finder_stopped_at_a_limit_gives_the_first_lines_find_gives(
    pieces: list[bytes], at: int, limit: int
) -> None:
    chunk = b"".join(pieces) + b"\n"
    first = chunk.rfind(b"\n", 0, min(at, len(chunk))) + 1
    finder = needle_lines(NEEDLES)
    assert finder is not None
    whole = finder.starts(chunk, first)
    cut = finder.starts(chunk, first, limit)
    if sum(map(len, whole)) < limit:
        assert cut == whole
    else:  # each literal's lines a prefix of all of them, and at least ``limit`` lines in all
        assert all(part == lines[: len(part)] for part, lines in zip(cut, whole, strict=True))
        assert sum(map(len, cut)) >= limit


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=120), st.integers(min_value=0, max_value=400))
def test_the_bulk_finder_gives_every_line_with_a_match(pieces: list[bytes], at: int) -> None:
    chunk = b"".join(pieces) + b"\n"
    first = chunk.rfind(b"\n", 0, min(at, len(chunk))) + 1
    bulk = bulk_locate(rb"\#\#\#|(?:-=)+", False)
    assert bulk is not None
    lines, start = [], 0
    for line in chunk.split(b"\n"):
        if start >= first and (b"###" in line or b"-=" in line):
            lines.append(start)
        start += len(line) + 1
    assert bulk.starts(chunk, first) == lines


def _section(library: Library) -> int:
    return next(m.pid for m in library.matchers if m.structure is not None and m.structure.name == "section")


def _bars(epoch: int) -> str:
    bars = "".join(f"\r{p:3d}%|{'#' * (p // 10):<10}| {p}/100" for p in range(0, 101, 20))
    return f"[rank0]:Epoch {epoch}:{bars}"


LINES = [
    _bars(1),
    _bars(2),
    "===== rank 3 output =====",
    "[rank0]:Epoch 3:\r 40%|####      |\r---------- Begin global rank 5 STDERR ----------",
    "\x1b[1m==\x1b[0m= rank 4 output =\x1b[0m==\r 40%|####      |",  # a rule only without colours
    "=== local rank 2 ===\r### rank 6 ###",
    "plain line",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(LINES), min_size=1, max_size=40))
def test_structure_lines_read_with_the_segment_cache_and_filter_as_without(
    library: Library, lines: list[str]
) -> None:
    chunk = ("\n".join(lines) + "\n").encode()
    pid = _section(library)
    starts = hits._located(library.matchers[pid], chunk)

    def sightings(fast: bool) -> list[object]:
        result = TextScan(name="x.log", file_index=0)
        reader = evidence.Reader(result, library)
        matcher = library.matchers[pid]
        for start in starts:
            line_no = chunk.count(b"\n", 0, start) + 1
            if fast:
                reader.line(chunk, start, line_no, [matcher], [], b"")
            else:
                _read_every_segment(reader, chunk, start, line_no, matcher)
        return list(result.sightings)

    assert sightings(True) == sightings(False)


def _read_every_segment(
    reader: evidence.Reader, chunk: bytes, start: int, line_no: int, matcher: Matcher
) -> None:
    """The reference: every segment of the line unwrapped afresh, none skipped."""
    end = chunk.find(b"\n", start)
    data = chunk[start:end]
    raw = data.decode()
    segments = evidence.Segments(data, raw)
    facts = [(segments.texts[i], evidence.unwrap(segments.texts[i])) for i in reversed(segments.kept)]
    reader._match(matcher, chunk, start, end, line_no, raw, iter(facts), None, [], b"")


def test_a_rank_section_among_progress_bars_is_sighted(library: Library) -> None:
    text = "\n".join([_bars(1), *LINES[2:5], _bars(2)]) + "\n"
    chunk = text.encode()
    pid = _section(library)
    result = TextScan(name="x.log", file_index=0)
    reader = evidence.Reader(result, library)
    for start in hits._located(library.matchers[pid], chunk):
        reader.line(chunk, start, chunk.count(b"\n", 0, start) + 1, [library.matchers[pid]], [], b"")
    assert [(s.line, s.rank) for s in result.sightings] == [(2, 3), (3, 5), (4, 4)]


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=0, max_value=99),
    st.sampled_from([*LINES[2:6], "--- rank 7 --- trailing words", "###### worker 3 ######  "]),
    st.booleans(),
)
def test_a_rule_among_many_progress_segments_is_read_as_without_the_scan(
    library: Library, at: int, rule: str, colour: bool
) -> None:
    # Past MANY_SEGMENTS, an ASCII line's segments are found by Hyperscan: the same sightings.
    bars = [f"{i % 100:3d}%|{'#' * (i % 10):<10}| {i}/100" for i in range(100)]
    bars.insert(at, rule)
    if colour:
        bars.insert(at // 2, "\x1b[1m===\x1b[0m rank 9 ===")
    chunk = ("\r".join(bars) + "\n").encode()
    pid = _section(library)
    matcher = library.matchers[pid]
    fast = evidence.Reader(TextScan(name="x.log", file_index=0), library)
    fast.line(chunk, 0, 1, [matcher], [], b"")
    slow = evidence.Reader(TextScan(name="x.log", file_index=0), library)
    _read_every_segment(slow, chunk, 0, 1, matcher)
    assert fast.result.sightings == slow.result.sightings


RULES = st.sampled_from(["---", "=====", "###", "******", "-" * 20])
WORDS = st.sampled_from(["", " ", " Begin ", " End of ", " output of ", " STDERR "])
RANK_WORDS = st.sampled_from(["rank", "Rank", "RANK", "global rank ", "process ", "Worker", "task:"])


@settings(max_examples=200, deadline=None)
@given(RULES, WORDS, RANK_WORDS, st.integers(min_value=0, max_value=4095), WORDS, RULES)
def test_every_rule_the_section_verifier_reads_is_flagged_by_its_scan(
    library: Library, left: str, words: str, rank_word: str, rank: int, tail: str, right: str
) -> None:
    line = f"{left}{words}{rank_word}{rank}{tail}{right}"
    matcher = library.matchers[_section(library)]
    assert matcher.structure is not None and matcher.structure.verify.match(line)
    assert matcher.locate.search(line.encode())


def test_the_section_scan_flags_no_progress_bar(library: Library) -> None:
    # "###" is in every bar drawn with "#": flagging them read each bar line for nothing.
    matcher = library.matchers[_section(library)]
    for bar in (_bars(1), " 40%|####      | 4/10 [00:01<00:02]", "Epoch 3: 100%|##########| 9/9 loss=0.1"):
        assert not matcher.locate.search(bar.encode()), bar
    assert matcher.locate.search(b"\x1b[1m==\x1b[0m= rank 4 output =\x1b[0m==")
