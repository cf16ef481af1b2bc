"""The bulk scanner's form of a fingerprint regex (``patterns.scan_form``): unanchored, it may find
more lines than the verifier keeps, never fewer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signatures.engine import default_library
from signatures.patterns import scan_form


@pytest.mark.parametrize(
    ("regex", "scan"),
    [
        (r"^[\w./:-]{1,200} \[missing ranks: [0-9]+\]$", r"[\w./:-] \[missing ranks: [0-9]+\]\r?$"),
        (r"\S+ failed: (?P<why>.+)", r"\S failed: (.+)"),
        (r"[a-z]{3,9}Error: boom", r"[a-z]{3}Error: boom"),
        (r".*? watchdog caught", r" watchdog caught"),
        (r"[^\]]? timed out", r" timed out"),
    ],
)
def test_an_opening_repeat_is_cut_to_its_fewest(regex: str, scan: str) -> None:
    assert scan_form(regex) == scan


@pytest.mark.parametrize(
    "regex",
    [r"\w+", r"[0-9]{4} steps", r"\d+|x", r"\w*(?:ab)?", r"(?:\w+) failed", r"\[rank\d+\]: x"],
)
def test_a_repeat_that_is_the_pattern_a_branch_or_exact_is_kept(regex: str) -> None:
    assert scan_form(regex) == regex


LEADS = st.sampled_from([r"[\w./:-]{1,200}", r"\S+", r".*?", r"[a-z]{2,5}", r"\d{0,3}", r"[^ ]*"])
TAILS = st.sampled_from([r" \[missing ranks: [0-9]+\]", r"Error: (?:boom|bang)", r"-\d failed", r"x"])
TEXT = st.text(alphabet="ab zx/.:-[]0123456789Error:missingranksboomfailed", max_size=60)


@settings(max_examples=300, deadline=None)
@given(LEADS, TAILS, TEXT)
def test_the_scan_finds_every_line_the_pattern_finds(lead: str, tail: str, text: str) -> None:
    regex = lead + tail
    if re.search(regex, text):
        assert re.search(scan_form(regex), text), (regex, scan_form(regex), text)


def test_the_library_scans_for_a_superset_of_each_fingerprint() -> None:
    # Every sample line a fingerprint finds, the form the scanner searches finds too.
    library = default_library()
    checked, missed = 0, []
    for sig in library.signatures:
        lines = [line for sample in sig.positive for line in sample.log.splitlines() if sample.line in line]
        for line in lines:
            for fp in sig.fingerprints:
                flags = re.IGNORECASE if fp.ignore_case else 0
                if fp.regex is None or not re.search(fp.regex, line, flags | re.MULTILINE):
                    continue
                checked += 1
                if not re.search(scan_form(fp.regex), line, flags | re.MULTILINE):
                    missed.append((sig.id, line))
    assert checked > 100 and missed == []
