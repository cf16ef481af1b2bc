"""What reading one text yields: its verified hits, counts, facts and sightings."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import cast

from signatures.library import Library, Matcher
from signatures.lines import LineFacts
from signatures.rankwords import in_subgroup
from signatures.structure import Sighting
from signatures.tracebacks import TracebackView


@dataclass
class Hit:
    """A verified match of one pattern on one line."""

    matcher: Matcher
    file_index: int
    file: str
    line: int
    text: str
    facts: LineFacts
    groups: dict[str, str]
    view: TracebackView
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def rank(self) -> int | None:
        """The global rank the line names (a fingerprint's group, a prefix or the message).

        A process group's own line ("[PG ID 6 ... Rank 1]") names ranks within that group: then
        only a prefix ("[rank10]:") names the global one."""
        value = self.groups.get("rank")
        if value is None or not value.isdigit() or in_subgroup(self.facts.message):
            return self.facts.rank
        return int(value)

    @property
    def local_rank(self) -> int | None:
        """The launcher's per-node index of the process, when the line names one."""
        value = self.groups.get("local_rank")
        return int(value) if value is not None and value.isdigit() else self.facts.local_rank

    @property
    def host(self) -> str | None:
        return self.groups.get("host") or self.facts.host


@dataclass
class TextScan:
    """What one text held: its hits, size and environment facts."""

    name: str
    file_index: int
    name_rank: int | None = None  # the rank the file's name gives, when it gives one
    lines: int = 0
    bytes: int = 0
    hits: list[Hit] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)  # verified hits per pattern, past caps too
    facts: dict[str, str] = field(default_factory=dict)
    progress: list[tuple[int, str]] = field(default_factory=list)  # the newest progress lines kept
    has_text: bool = False  # any character but white space
    sightings: list[Sighting] = field(default_factory=list)  # lines that tell who is who
    # Generic hits past a pattern's cap: the newest are kept, since a run fails at its end.
    tail: dict[int, deque[Hit]] = field(default_factory=dict)
    # (line number, text) of the text's last lines: a dying run's last words (lastwords.py)
    last_lines: list[tuple[int, str]] = field(default_factory=list)

    def renumber(self, file_index: int) -> None:
        """Give this text its place among all texts of a diagnosis."""
        self.file_index = file_index
        for hit in self.hits:
            hit.file_index = file_index
        self.sightings = [replace(s, file_index=file_index) for s in self.sightings]

    def detach(self) -> None:
        """Replace matchers by their ids, so the scan pickles small across processes."""
        for hit in self.hits:
            hit.matcher = cast(Matcher, hit.matcher.pid)

    def attach(self, library: Library) -> None:
        for hit in self.hits:
            hit.matcher = library.matchers[cast(int, hit.matcher)]
