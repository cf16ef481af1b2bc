"""Expected input problems: each names what was wrong, in words a user can act on."""

from __future__ import annotations


class InputError(Exception):
    """A log could not be read; the message says why, in one line."""


class UnreadableInput(InputError):
    """The file is missing or cannot be opened."""


class BinaryInput(InputError):
    """The input is not text (NUL bytes or mostly non-printable)."""


class CorruptArchive(InputError):
    """A .gz or .zip that cannot be decompressed."""


class InputTooLarge(InputError):
    """The input, or what an archive expands to, passes the size bound."""


class DecompressionBomb(InputTooLarge):
    """An archive member expands far more than logs do (a zip or gzip bomb); names the member."""


class ArchiveTooDeep(InputError):
    """Archives nested deeper than the engine opens."""
