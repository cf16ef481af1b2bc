"""The process a watch waits for: a command it runs itself, or a running process by its pid."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

READ_SIZE = 1 << 16
QUEUED = 256  # pieces of output waiting for the engine; past this the command waits for us


class Command:
    """A command run beside the watch; with ``capture``, its output (stdout and stderr together)
    is passed on to ``echo`` unchanged and also kept for the engine to read."""

    def __init__(self, argv: Sequence[str], *, capture: bool, echo: BinaryIO) -> None:
        self.name = f"<{os.path.basename(argv[0])} output>"
        pipe = subprocess.PIPE if capture else None
        # Its own stdin and environment; the command is the job, the watch only reads beside it.
        self.proc = subprocess.Popen(list(argv), stdout=pipe, stderr=subprocess.STDOUT if capture else None)
        self.output: queue.Queue[bytes] = queue.Queue(maxsize=QUEUED)
        self._reader: threading.Thread | None = None
        if capture:
            assert self.proc.stdout is not None
            self._reader = threading.Thread(
                target=self._read,
                args=(self.proc.stdout.fileno(), echo),
                name="denpex-watch-output",
                daemon=True,
            )
            self._reader.start()

    def _read(self, fd: int, echo: BinaryIO) -> None:
        while data := os.read(fd, READ_SIZE):
            with contextlib.suppress(OSError, ValueError):  # a closed terminal must not stop the engine
                echo.write(data)
                echo.flush()
            self.output.put(data)

    def take(self) -> list[bytes]:
        """The output read since the last call."""
        pieces = []
        while True:
            try:
                pieces.append(self.output.get_nowait())
            except queue.Empty:
                return pieces

    def ended(self) -> bool:
        """Whether the command exited and all its output was read."""
        if self.proc.poll() is None:
            return False
        if self._reader is not None:
            self._reader.join(timeout=0.1)
            return not self._reader.is_alive()
        return True

    def exit_code(self) -> int:
        """The command's exit code, as a shell reports it (128 + N for a signal N)."""
        code = self.proc.wait()
        return 128 - code if code < 0 else code

    def forward(self, signum: int) -> None:
        """Pass a signal the watch received on to the command (a scheduler stopping the job)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (one we may not signal counts as running; an exited one
    its parent has not reaped yet, a zombie, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc here: existing is all we can know
    return stat[stat.rfind(")") + 2 :][:1] != "Z"  # the state follows the name in parentheses
