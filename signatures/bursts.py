"""Which line of one burst of one process states its failure, when the process states it twice.

A process that fails often says so twice in a row: first what it noticed, then what it was
("DataLoader reader thread raised an exception!" then "DataLoader reader thread failed((Unavailable)
Memory map failed ...)"; "Exception (either an error or timeout) detected by watchdog at work: 32,
last enqueued ... 31." then "Timeout at NCCL work: 32, last enqueued ... 31."). Two failure lines
are one burst of one process when they are at most BURST_GAP lines apart, name the same rank and
level (where both show one) and (when both are timed) the same second. The later one restates the
earlier when it tells the same failure in other words: it keeps the earlier one's subject (its
first words) and says more, or it keeps its facts (its last words) under another lead. The
restatement states the failure: it is what the process found the failure to be. A line that
repeats the earlier one, quotes it whole (a re-raise that adds only a wrapper) or quotes its cause
after a colon restates nothing: the earlier one stands.

A statement that only announces a failure (a few words, no cause: "Rank[2] failed.") gives way
to what follows it: the exception of the traceback it opens (ranking.py), or its detail line.
"""

from __future__ import annotations

import itertools
import re

from signatures.candidate import TIER_BENIGN, Candidate
from signatures.lines import time_key, unwrap

BURST_GAP = 2  # lines apart that two statements of one process are one burst
SUBJECT_WORDS = 3  # leading words two statements share when they have one subject
MORE_WORDS = 3  # words a restatement of the same subject adds at least (its cause), beyond a new value
FACT_WORDS = 5  # trailing words two statements share when they tell the same facts
SAME_SECOND_S = 1.0
_DIGITS = re.compile(r"\d+")  # other values in the same words: a repeat
_TAGS = re.compile(r"^(?:\s*\[[^\]\n]{1,60}\])+\s*")  # "[PG ID 2 PG GUID 3 Rank 3] " is no words
# a logging head of single fields between dashes: "- lmdeploy - ERROR - model_agent.py:489 - "
_DASHED_HEAD = re.compile(r"^-?\s*(?:[\w.:/]+ +- +){2,}")


def move_to_restatements(cands: list[Candidate]) -> list[Candidate]:
    """Of two statements of one burst of one process, a restatement states the failure."""
    lines = sorted(
        (c for c in cands if c.line == c.hit.line and c.tier < TIER_BENIGN and not c.death),
        key=lambda c: (c.hit.file_index, c.line),
    )
    gone: set[int] = set()
    for a, b in itertools.pairwise(lines):
        if id(a) in gone or not (_one_burst(a, b) and restates(_words(a), _words(b))):
            continue
        if a.signature is not None and b.signature is None:
            # the restatement is the detail of a known failure: it names what the earlier line knew
            a.line, a.text = b.line, b.text
            gone.add(id(b))
        elif a.signature is None or b.signature is None or a.signature is b.signature:
            b.tier = min(a.tier, b.tier)
            gone.add(id(a))
    return [c for c in cands if id(c) not in gone]


def move_announcements_to_detail(cands: list[Candidate]) -> list[Candidate]:
    """An error record that only announces a failure ("Container failed !!!") and whose next line,
    with no head of its own, goes on about the same subject ("Container rank 0 status failed cmd
    [...] code -6 ...") is stated by that line: the announcement's detail (a death it reports, an
    exit code, joins the announcement's statement). A statement that ends by introducing an
    exception ("Aborting and saving the final best model. Encountered exception:") gives way to
    the exception on its next line (``KeyError("[E900] Could not run ...")``)."""
    at = {(c.hit.file_index, c.line): c for c in cands}
    gone: set[int] = set()
    for c in cands:
        below = at.get((c.hit.file_index, c.line + 1))
        if _introduces_exception(c, below):
            c.line, c.text = c.line + 1, c.hit.after[0]
            if below is not None:
                c.tier = min(c.tier, below.tier)
                gone.add(id(below))
            continue
        if c.signature is not None or c.line != c.hit.line or c.tier >= TIER_BENIGN or not announces_only(c):
            continue
        if not c.hit.after or (below is not None and (below.signature is not None or below.tier < c.tier)):
            continue
        text = c.hit.after[0]
        facts = unwrap(text)
        if facts.level is not None or facts.time is not None or not text.strip():
            continue
        subject, detail = _words(c).split(), facts.message.split()
        if len(detail) > len(subject) and detail[0].lower() == subject[0].lower():
            c.line, c.text = c.line + 1, text
            if below is not None:
                gone.add(id(below))
    return [c for c in cands if id(c) not in gone]


def _introduces_exception(c: Candidate, below: Candidate | None) -> bool:
    # an unknown statement ending in a colon, over an exception line of the same process: the
    # exception is what it introduced (a known one stands on its own, and the statement with it)
    if c.signature is not None or c.line != c.hit.line or c.tier >= TIER_BENIGN or not c.hit.after:
        return False
    if not c.hit.facts.message.rstrip().endswith(":"):
        return False
    if below is not None and (below.signature is not None or below.line != below.hit.line):
        return False
    facts = unwrap(c.hit.after[0])
    return facts.rank == c.hit.facts.rank and _EXCEPTION_OPENS.match(facts.message) is not None


# A line that opens with an exception: "KeyError: 'x'", a repr "KeyError("[E900] ...", "ValueError('.
_EXCEPTION_OPENS = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?:: |\(['\"])")


def restates(upper: str, lower: str) -> bool:
    """``lower`` tells the failure ``upper`` told, in other words: the same subject and more, or
    the same facts under another lead (never a repeat, nor a quotation of the whole)."""
    nu, nl = _DIGITS.sub("#", upper), _DIGITS.sub("#", lower)
    if not upper or not lower or nu in nl or nl in nu:
        return False  # a repeat (other threads, other values), or a quotation
    wu, wl = upper.split(), lower.split()
    shared = 0  # trailing words both say
    while shared < min(len(wu), len(wl)) and wu[-1 - shared] == wl[-1 - shared]:
        shared += 1
    if shared >= min(len(wu), len(wl)) - 1:
        return False  # one says the other whole, under at most an exception's name: a quotation
    if shared and wu[-shared - 1].endswith(":") and wl[-shared - 1].endswith(":"):
        return False  # both end in the same clause after a colon: the later quotes the earlier's cause
    subject = (
        len(wu) > SUBJECT_WORDS
        and wu[:SUBJECT_WORDS] == wl[:SUBJECT_WORDS]
        and len(wl) >= len(wu) + MORE_WORDS
    )
    facts = len(wu) > FACT_WORDS and len(wl) > FACT_WORDS and wu[-FACT_WORDS:] == wl[-FACT_WORDS:]
    return subject or (facts and wu[:2] != wl[:2])


VAGUE_WORDS = 3  # words of a statement that only announces a failure ("Rank[2] failed.")
_CAUSE = re.compile(r"[:(=]")  # a colon, a parenthesis or a value: the statement says what failed


def announces_only(c: Candidate) -> bool:
    """The statement says that something failed and nothing of what: a few words, no cause."""
    words = _words(c)
    return 0 < len(words.split()) <= VAGUE_WORDS and _CAUSE.search(words) is None


# a head token left in the message: a level word or letter (bare, starred, barred: "** FATAL **",
# "CRITICAL|trainer|", "E:"), a bracketed tag, punctuation
_HEAD_TOKEN = re.compile(
    r"^(?:[\W_]+|\[[^\]]*\]:?|<[^>]*>:?|[^\s|]*\|\S*|[\d:.,T-]+"
    r"|(?:ERROR|CRITICAL|FATAL|WARNING|WARN|INFO|DEBUG|[EFCWID]):?)$"
)


def _words(c: Candidate) -> str:
    text = c.hit.facts.message
    for _ in range(4):  # heads nest: "** FATAL ** [grp 4 member 2] ..."
        tokens = _DASHED_HEAD.sub("", _TAGS.sub("", text)).split()
        while tokens and _HEAD_TOKEN.match(tokens[0]):
            tokens.pop(0)
        text = " ".join(tokens)
    return text


def _one_burst(a: Candidate, b: Candidate) -> bool:
    ha, hb = a.hit, b.hit
    if ha.file_index != hb.file_index or not 0 < b.line - a.line <= BURST_GAP:
        return False
    levels = {ha.facts.level, hb.facts.level} - {None}
    if ha.rank != hb.rank or len(levels) > 1:
        return False
    ta, tb = time_key(ha.facts.time), time_key(hb.facts.time)
    if ta is not None and tb is not None and ta[0] == tb[0] and abs(ta[1] - tb[1]) > SAME_SECOND_S:
        return False
    # nothing but blank lines between: the burst is not interrupted by other output
    return all(not t.strip() for t in ha.after[: b.line - a.line - 1])


WARNED_WORDS = 4  # trailing words a warning and the failing record below it share: the same cause


def move_to_warned_causes(cands: list[Candidate]) -> None:
    """A warning record just above a failing record of the same process that ends in the same
    cause stated it first: glog's `W ... elementwise_add raises an exception thrust::system_error,
    parallel_for failed: invalid configuration argument`, then `F ... std::exception caught,
    parallel_for failed: invalid configuration argument`. The evidence moves up to the warning."""
    for c in cands:
        facts = c.hit.facts
        if c.line != c.hit.line or c.death or facts.level not in ("E", "F", "C") or not c.hit.before:
            continue
        above = unwrap(c.hit.before[-1])
        if above.level != "W" or (above.pid, above.rank) != (facts.pid, facts.rank):
            continue
        tail = _DIGITS.sub("#", facts.message).split()[-WARNED_WORDS:]
        if len(tail) == WARNED_WORDS and _DIGITS.sub("#", above.message).split()[-WARNED_WORDS:] == tail:
            c.line, c.text = c.line - 1, c.hit.before[-1]
