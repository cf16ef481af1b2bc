"""Ranks of a line read from the lines around it: the rest of its statement, its neighbours'
tags, the tagged line above an untagged traceback, the record that opens its traceback."""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.episodes import continues
from signatures.hits import Hit
from signatures.lines import unwrap
from signatures.processtags import TagModel
from signatures.tracebacks import FRAME, HEADER, TRACEBACK_TITLE, exception_name


def tag_above(hit: Hit, tags: TagModel | None) -> int | None:
    # An untagged line of a tagged log (a traceback's end, a message's continuation) is the
    # process's whose tagged line is nearest above it in the same block: across untagged lines
    # of a traceback or continuation only, up to a blank line or another untagged statement.
    if tags is None or hit.facts.tagged or not (hit.view.in_traceback or _inside_block(hit.text)):
        return None  # a statement of its own: the lines above alone prove nothing
    for text in reversed(hit.before):
        if (facts := unwrap(text)).tagged:
            return facts.rank
        if (rank := tags.read(text).rank) is not None:
            return rank
        if not text.strip() or not _inside_block(text):
            return None
    return None


def header_rank(hit: Hit) -> int | None:
    # A traceback logged as one record (ParlAI's "rank:  3 | <time> CRITICAL | Traceback ...")
    # is the process's that the record's head names: its frames and exception line are untagged.
    # Logged as a record of its own just above the title ("<time> - ERROR - Rank[2] failed.", then
    # "Traceback ..."), the record that introduces the traceback names it the same way.
    if hit.facts.tagged or not hit.view.in_traceback:
        return None
    for k, text in enumerate(reversed(hit.before), 1):
        at = text.find(TRACEBACK_TITLE)
        if at > 0:
            return unwrap(text[:at]).rank
        if at == 0:
            opener = next((t for t in reversed(hit.before[:-k]) if t.strip()), "")
            return _failing_record_rank(opener)
        if not text.strip() or not _inside_block(text):
            return None
    # The title is further up than the lines a hit keeps: the traceback's reading kept its opener
    kept = hit.view.opener
    if kept is None:
        return None
    at = kept.find(TRACEBACK_TITLE)
    return unwrap(kept[:at]).rank if at > 0 else _failing_record_rank(kept)


_FAILING_LEVEL = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")


def _failing_record_rank(text: str) -> int | None:
    # The record that opens a traceback states the failure at an error level; a record of another
    # kind above a plain title ("rank:  5 | checkpoint saved") is another record, not its opener.
    facts = unwrap(text)
    failing = facts.level in ("E", "F", "C") or _FAILING_LEVEL.search(text[:120])  # in the record's head
    return facts.rank if text and failing and not _inside_block(text) else None


def _inside_block(text: str) -> bool:
    # A traceback's own lines or a message's indented continuation, never a statement of its own.
    head = text.rstrip("\r\n")
    if head[:1].isspace() or HEADER.match(head.lstrip()) or FRAME.match(head.lstrip()):
        return True
    return head.lstrip().startswith(
        ("frame #", "During handling", "The above exception", "Exception raised from")
    )


CONTINUATION_REACH = 6  # lines below an error that may still be its message


def statement_rank(hit: Hit) -> int | None:
    """A rank the rest of the line's statement names: the wrapped first half above, or the
    message's continuation below (lines with no head of their own, up to a blank line)."""
    if hit.before and continues(hit.before[-1], hit.text):
        facts = unwrap(hit.before[-1])
        if facts.rank is not None:
            return facts.rank
    if hit.facts.tagged or hit.facts.time is not None:
        return None  # a tagged or stamped line's message ends with it; what follows is new lines
    named: set[int] = set()
    for text in hit.after[:CONTINUATION_REACH]:
        facts = unwrap(text)
        if not text.strip() or facts.message != text.rstrip("\r\n") or _new_statement(facts.message):
            break
        if facts.rank is not None:
            named.add(facts.rank)
    # One rank named is the speaker's; a list of several ("Timed out task names:") names peers.
    return named.pop() if len(named) == 1 else None


_TOOL_HEAD = re.compile(r"^[\w.-]+: ")


def _new_statement(message: str) -> bool:
    # A traceback, a frame, another exception, a tool's own line ("srun: error: ...") or a
    # launcher's box starts something else.
    head = message.lstrip()
    if exception_name(head) is not None or HEADER.match(head) or FRAME.match(head) or _TOOL_HEAD.match(head):
        return True
    return head.startswith(("frame #", "During handling", "The above exception", "[", "="))


def nearby_rank(before: Sequence[str], after: Sequence[str], tags: TagModel | None = None) -> int | None:
    """The rank of an untagged line, when the lines around it all carry one and the same rank.

    A rank often prints its exception once bare and then again as a `[rank0]:` traceback; in an
    interleaved log, neighbours of several ranks make this return None. Only process tags count
    (a launcher's, or one learned from the log): a neighbour that mentions a rank in its words
    (srun's "task 14: Exited") is another report.
    """
    below = {r for line in after if (r := _tag_rank(line, tags)) is not None}
    above = {r for line in before if (r := _tag_rank(line, tags)) is not None}
    # The lines below must be that rank re-printing it; lines above alone prove nothing.
    if len(below) == 1 and above <= below:
        return below.pop()
    return None


def _tag_rank(line: str, tags: TagModel | None) -> int | None:
    if tags is not None and (rank := tags.read(line).rank) is not None:
        return rank
    facts = unwrap(line)
    return facts.rank if facts.tagged else None
