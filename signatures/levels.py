"""Where a log writes each record's level, learned from the log itself.

Loggers put the level in many shapes: `[ERROR]`, `[error]`, `<E>`, `[E]`, `|ERROR|`, `ERROR:`, a
bare ` E ` column, `level=error`, `"level": "error"`. ``lines.py`` reads the heads whose shape
says by itself that a token is the level; a letter or a word in a column of the head could be
anything else. Rather than a list of heads, the place is learned from the log: the head of a
line is its first tokens (a token is a word, or a group in brackets, parentheses, angle brackets
or bars), and a token that is a level word or letter gives a slot (its index in the head and its
shape: `[w]`, `<L>`, `w`, ...). A slot is the log's level column when it holds a level on several
lines, one of them a quiet level (info, warning, debug: a word that only ever says "error" in
one place may be a message's): a record's level is then read from that slot. `level=...` and
`"level": "..."` name themselves.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from signatures.lines import unwrap

_WORDS = {
    "error": "E",
    "err": "E",
    "fatal": "F",
    "critical": "C",
    "crit": "C",
    "warning": "W",
    "warn": "W",
    "info": "I",
    "notice": "I",
    "debug": "D",
    "trace": "D",
}
QUIET = ("I", "W", "D")
FAILING = ("E", "F", "C")
HEAD_TOKENS = 6  # tokens at the start of a line that may be its head
SLOT_LINES = 2  # lines that must show a level in one slot before the slot is believed
_TOKEN = re.compile(r"\[[^\[\]\s]{1,40}\]:?|<[^<>\s]{1,12}>:?|\|[^|\s]{1,12}\|:?|\([^()\s]{1,40}\):?|\S+")
_NAMED = re.compile(r"""(?:^|[\s{,])["']?level["']?\s*[:=]\s*["']?(?P<word>[A-Za-z]{1,8})\b""")
_WRAP = re.compile(r"^(?P<open>[\[<|(]?)(?P<body>[A-Za-z]{1,8})(?P<close>[\]>|)]?):?$")


@dataclass
class LevelModel:
    """The slots (head index, token shape) where this log writes a record's level."""

    slots: set[tuple[int, str]] = field(default_factory=set)

    def level(self, line: str) -> str | None:
        """The level letter of ``line``: from a head ``lines.py`` reads, a learned slot, or ``level=``."""
        facts = unwrap(line.strip())  # a paste indented as a whole keeps its heads
        if facts.level is not None:
            return facts.level
        if (m := _NAMED.search(facts.message[:300])) is not None and m.group("word").lower() in _WORDS:
            return _WORDS[m.group("word").lower()]
        for index, (shape, letter) in _head_levels(facts.message):
            if (index, shape) in self.slots:
                return letter
        return None


def _head_levels(message: str) -> Iterable[tuple[int, tuple[str, str]]]:
    # Each head token that is a level word or an upper-case level letter: (index, (shape, letter)).
    for index, m in enumerate(_TOKEN.finditer(message)):
        if index >= HEAD_TOKENS:
            return
        w = _WRAP.match(m.group())
        if w is None:
            continue
        body = w.group("body")
        wrap = w.group("open") + w.group("close")
        if body.lower() in _WORDS and (body.isupper() or body.islower() or wrap):
            yield index, (wrap + ":word", _WORDS[body.lower()])
        elif len(body) == 1 and body in "IWEFDC":
            yield index, (wrap + ":letter", body)


def learn(lines: Iterable[str]) -> LevelModel:
    """The slots of these lines' heads that hold their level (see the module's docstring)."""
    seen: Counter[tuple[int, str]] = Counter()
    quiet: set[tuple[int, str]] = set()
    for line in set(lines):
        facts = unwrap(line.strip())
        for index, (shape, letter) in _head_levels(facts.message):
            seen[(index, shape)] += 1
            if letter in QUIET:
                quiet.add((index, shape))
    model = LevelModel()
    for slot, count in seen.items():
        if count >= SLOT_LINES and slot in quiet:
            model.slots.add(slot)
    return model
