"""The rank of a report's fields: a statement that ends in a colon introduces the lines below it.

A launcher's verdict often names the failed process on field lines under its sentence, printed
under the same head as the sentence (a container's, a logger's):

    ... || RuntimeError: ... exited with non-zero status. The first process to do so was:
    ... || Exit code: 1
    ... || Process name: 1

The sentence and each of its fields are then that process's statement: the one rank the fields
name (read as any line's words are, so a peer or a local rank names none) is the rank of the
sentence and of every field. Several ranks named are a list, and give none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from signatures.lines import unwrap

MAX_FIELDS = 6  # field lines one introducing sentence may carry
_FIELD = re.compile(r"^[A-Z][\w .-]{0,30}: \S")  # "Exit code: 1", "Process name: 1", "Host: n7"
_HEAD_END = " |]:>\t"  # a shared head ends at one of these


def _message_under(head_of: str, line: str) -> str | None:
    # What ``line`` says after the head it shares with ``head_of`` (the same container, logger
    # and time); None when the two share no head and ``line`` has a head of its own.
    same = next((i for i, (a, b) in enumerate(zip(head_of, line, strict=False)) if a != b), None)
    shared = line[: min(len(head_of), len(line)) if same is None else same]
    cut = max(shared.rfind(c) for c in _HEAD_END) + 1 if shared else 0
    rest = line[cut:].rstrip("\r\n")
    if cut == 0 and unwrap(line).message != rest:
        return None
    return rest


def introduced_rank(text: str, before: Sequence[str], after: Sequence[str]) -> int | None:
    """The one rank the fields of the report ``text`` opens (or is a field of) name."""
    lines = [text, *after[:MAX_FIELDS]]
    own = _message_under(after[0], text) if after else None
    if own is None or not own.rstrip().endswith(":"):
        # A field itself: its report's opening sentence is just above, across sibling fields.
        if own is None or not _FIELD.match(own):
            return None
        above = list(reversed(before[-MAX_FIELDS:]))
        for i, prev in enumerate(above):
            said = _message_under(text, prev)
            if said is None or not said.strip():
                return None
            if said.rstrip().endswith(":"):
                lines = [prev, *reversed(above[:i]), *lines]
                break
            if not _FIELD.match(said):
                return None
        else:
            return None
    opener = lines[0]
    named: set[int] = set()
    for line in lines[1:]:
        said = _message_under(opener, line)
        if said is None or not _FIELD.match(said):
            break
        if (rank := unwrap(said).rank) is not None:
            named.add(rank)
    return named.pop() if len(named) == 1 else None
