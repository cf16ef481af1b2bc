"""A shape scanned by its pattern (library.SCANNED_BY_PATTERN) finds the lines it found when it
was scanned by its literals: a line is found when it holds a literal and matches the pattern,
whichever of the two flagged the chunk."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signatures import library as library_module
from signatures.engine import default_library
from signatures.hits import read_text
from signatures.library import SCANNED_BY_PATTERN, Library

pytest.importorskip("hyperscan")

# One line of each way the shape states an exception, each found whichever scan form is used.
STATED = [
    "<class 'foo.BarError'>",
    'TypeError("f() got an unexpected keyword")',
    "future: <Task finished name='t' coro=<main()> exception=RuntimeError('x')>",
    "[rank3]: raised torch.cuda.OutOfMemoryError: CUDA out of memory",
]
# Those lines, pieces of them and near misses ("check ValueError: none"), put together at random.
PIECES = st.sampled_from(
    [
        *STATED,
        "Error: ",
        "ValueError: x",
        "Exception: ",
        "torch.",
        "foo_bar.",
        "Baz",
        "Error('",
        'Exception("',
        "<class '",
        "KeyError",
        "'>",
        "<Task finished ",
        " exception=",
        "future: ",
        "[rank3]:",
        "step 5 check ",
        " ",
    ]
)
LINES = st.lists(st.lists(PIECES, min_size=1, max_size=4).map("".join), min_size=1, max_size=30)


@pytest.fixture(scope="module")
def libraries() -> tuple[Library, Library]:
    """The bundled library, and the same signatures with every shape scanned by its literals."""
    current = default_library()
    saved = library_module.SCANNED_BY_PATTERN
    library_module.SCANNED_BY_PATTERN = frozenset()
    try:
        by_literals = Library(current.signatures)
        by_literals.compile()
    finally:
        library_module.SCANNED_BY_PATTERN = saved
    return current, by_literals


def _shape_pid(library: Library, name: str) -> int:
    return next(m.pid for m in library.matchers if m.shape is not None and m.shape.name == name)


def _found(library: Library, text: str) -> list[tuple[int, int, str]]:
    scan = read_text(library, "x.log", 0, iter([text.encode()]))
    return sorted((hit.line, hit.matcher.pid, hit.text) for hit in scan.hits)


def test_the_bundled_library_scans_a_shape_by_its_pattern(libraries: tuple[Library, Library]) -> None:
    current, by_literals = libraries
    assert SCANNED_BY_PATTERN
    for name in SCANNED_BY_PATTERN:
        matcher = current.matchers[_shape_pid(current, name)]
        assert matcher.shape is not None and matcher.shape.pattern is not None
        assert current.scan_patterns[matcher.pid].regex == matcher.shape.pattern
        assert by_literals.scan_patterns[matcher.pid].regex != matcher.shape.pattern


@settings(max_examples=200, deadline=None)
@given(LINES)
def test_a_shape_scanned_by_its_pattern_finds_the_lines_its_literals_found(
    libraries: tuple[Library, Library], lines: list[str]
) -> None:
    current, by_literals = libraries
    text = "\n".join(lines) + "\n"
    assert _found(current, text) == _found(by_literals, text)


@pytest.mark.parametrize("line", STATED)
def test_each_stated_exception_is_found_by_either_form(libraries: tuple[Library, Library], line: str) -> None:
    current, by_literals = libraries
    pid = _shape_pid(current, "reported-exception")
    text = f"step 5 check ValueError: none\n{line}\nfine\n"
    found = _found(current, text)
    assert (2, pid, line) in found
    assert found == _found(by_literals, text)


def test_a_benign_mention_flags_no_chunk_for_the_shape(libraries: tuple[Library, Library]) -> None:
    # What the change is for: "check ValueError: none" holds the literal "Error: ", not the pattern.
    current, by_literals = libraries
    pid = _shape_pid(current, "reported-exception")
    chunk = b"[rank3]: step 5 check ValueError: none, continuing\n" * 10
    assert pid not in current.scanner.scan(chunk)
    assert pid in by_literals.scanner.scan(chunk)
