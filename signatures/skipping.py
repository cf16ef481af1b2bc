"""Reading what can be read: one unreadable input (a PNG in a zip of an output folder, a binary
among rank logs, a hostile dump) is skipped with a note instead of stopping the diagnosis.

The error that would have stopped it is kept; when nothing at all could be read, it is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from signatures.errors import InputError
from signatures.hits import TextScan


@dataclass
class Skips:
    """The inputs left out, each as ``name: reason``, and the first error met."""

    notes: list[str] = field(default_factory=list)
    first: InputError | None = None

    def add(self, exc: InputError) -> None:
        """Note ``exc`` (its message names the input and says why)."""
        self.notes.append(str(exc))
        self.first = self.first or exc


def read_each(
    texts: Iterator[tuple[str, Iterator[bytes]]],
    read: Callable[[str, Iterator[bytes]], TextScan],
    skips: Skips | None,
) -> list[TextScan]:
    """``read`` every text of one source; with ``skips``, an unreadable text or source is noted
    there and the rest is still read. Without it, the first error is raised as before."""
    if skips is None:
        return [read(name, chunks) for name, chunks in texts]
    scans: list[TextScan] = []
    try:
        for name, chunks in texts:
            try:
                scans.append(read(name, chunks))
            except InputError as exc:  # this text only: a zip's other members still count
                skips.add(exc)
    except InputError as exc:  # the source itself (a corrupt archive, a missing file)
        skips.add(exc)
    return scans
