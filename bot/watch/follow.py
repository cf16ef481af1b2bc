"""Following log files as they grow, like ``tail -F``: rotation, truncation, files that appear later.

Each file is read from its start (the diagnosis wants the whole run), then only what is appended;
with ``from_end`` the files already there when watching starts are read from their last line on
(attaching to a run whose log is already many GB). The file stays open, so the end of a file
rotated away is still read before its successor.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

READ_MAX = 1 << 20  # bytes read from one file per poll: no file starves the others
TAIL_BACK = 64 << 10  # with from_end, how far back to look for the start of the unfinished line


@dataclass(frozen=True)
class Piece:
    """Bytes appended to a followed log; ``restarted``: a new file (rotation) or the same file cut
    short (truncation) begins with them, so the old file's unfinished last line is complete."""

    name: str
    data: bytes
    restarted: bool = False


@dataclass
class _Open:
    fd: int
    identity: tuple[int, int]  # (device, inode): a rotated file is a new inode at the same path
    offset: int = 0
    restarted: bool = False


@dataclass
class Follower:
    """The files named by ``patterns`` (paths or glob patterns), now and as they appear."""

    patterns: list[str]
    read_max: int = READ_MAX
    from_end: bool = False
    files: dict[str, _Open] = field(default_factory=dict)
    _polled: bool = False

    def poll(self) -> list[Piece]:
        """What was appended to every followed file since the last poll (at most ``read_max`` each)."""
        for name in self._names():
            if name not in self.files:
                state = self._open(name, restarted=False)
                if state is not None and self.from_end and not self._polled:
                    state.offset = _last_line_start(state.fd)
        self._polled = True
        pieces = []
        for name in list(self.files):
            piece = self._read(name)
            if piece is not None:
                pieces.append(piece)
        return pieces

    def close(self) -> None:
        """Close every open file."""
        for state in self.files.values():
            os.close(state.fd)
        self.files.clear()

    def _names(self) -> list[str]:
        names: list[str] = []
        for pattern in self.patterns:
            if glob.has_magic(pattern):
                names.extend(sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)))
            elif os.path.isfile(pattern):
                names.append(pattern)  # a plain path that does not exist yet is waited for
        return list(dict.fromkeys(names))

    def _open(self, name: str, *, restarted: bool) -> _Open | None:
        try:
            fd = os.open(name, os.O_RDONLY)
        except OSError:
            return None  # gone between listing and opening: next poll
        st = os.fstat(fd)
        state = _Open(fd, (st.st_dev, st.st_ino), restarted=restarted)
        self.files[name] = state
        return state

    def _read(self, name: str) -> Piece | None:
        state = self.files[name]
        data = os.pread(state.fd, self.read_max, state.offset)
        if data:
            state.offset += len(data)
            piece = Piece(name, data, state.restarted)
            state.restarted = False
            return piece
        # At the end of what is open: is the path now another file, or this one cut short?
        try:
            st = os.stat(name)
        except FileNotFoundError:
            return None  # rotated away, the next not created yet: keep the old one open
        if (st.st_dev, st.st_ino) != state.identity:
            os.close(state.fd)
            del self.files[name]
            self._open(name, restarted=True)
        elif st.st_size < state.offset:
            state.offset = 0
            state.restarted = True
        return None


def _last_line_start(fd: int) -> int:
    """The offset where the file's last line starts: its end when it ends in a newline, else the
    line being written (read whole rather than cut). A last line longer than ``TAIL_BACK`` is
    skipped to the end."""
    size = os.fstat(fd).st_size
    start = max(0, size - TAIL_BACK)
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    if cut >= 0:
        return start + cut + 1
    return 0 if start == 0 else size
