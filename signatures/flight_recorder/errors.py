"""Why a flight-recorder dump was refused: each class names one kind of problem."""

from __future__ import annotations

from signatures.errors import InputError, InputTooLarge


class DumpError(InputError):
    """A file that looks like a flight-recorder dump could not be used."""


class UnsafeDump(DumpError):
    """A pickle asked to import or call something; it is refused, never executed."""


class MalformedDump(DumpError):
    """The dump reads, but is not of the shape PyTorch writes (or is nested past the bounds)."""


class DumpTooLarge(DumpError, InputTooLarge):
    """A dump bigger than the per-dump bound."""
