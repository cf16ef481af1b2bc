"""The engine in a process pool, outside the event loop, under a time limit enforced twice:
an alarm inside the child, and a deadline in the parent that kills the pool if the child hangs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.jobs.limits import WorkerLimits
from signatures.errors import InputError

Engine = Callable[[list[tuple[str, str]], int], dict[str, Any]]


class EngineDied(RuntimeError):
    """The engine's process died (a crash in C code, the OOM killer): a transient failure."""


class EnginePool:
    """Runs the engine on downloaded files: ("ok", diagnosis dict), ("input" | "timeout", message)."""

    def __init__(
        self,
        limits: WorkerLimits,
        *,
        max_workers: int = 1,
        executor: concurrent.futures.ProcessPoolExecutor | None = None,
        engine: Engine | None = None,
        kill_grace_s: float = 10.0,
    ) -> None:
        self.limits = limits
        self.max_workers = max(1, max_workers)
        # A module-level function: it is pickled by name into the pool's processes.
        self.engine: Engine = engine or diagnose_files
        self.kill_grace_s = kill_grace_s
        self._pool = executor
        self._own_pool = executor is None

    @property
    def started(self) -> bool:
        """Whether an engine process pool exists (it starts with the first job that needs it)."""
        return self._pool is not None

    async def run(self, files: list[tuple[str, str]]) -> tuple[str, Any]:
        """Diagnose ``files`` ((name, path) pairs) in the pool, within the job time limit."""
        pool = self._executor()
        loop = asyncio.get_running_loop()
        limit = self.limits.job_timeout_s
        future = loop.run_in_executor(pool, run_engine, self.engine, files, limit, self.limits.max_text_bytes)
        try:
            # The child stops itself at ``limit``; this deadline is for a child stuck in C code.
            return await asyncio.wait_for(future, timeout=limit + self.kill_grace_s)
        except TimeoutError:
            self._kill()
            return "timeout", timeout_message(limit)
        except concurrent.futures.process.BrokenProcessPool:
            self._kill()
            raise EngineDied("the diagnosis process died") from None

    def close(self) -> None:
        """Shut the pool down if this object started it."""
        if self._pool is not None and self._own_pool:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a forked child would inherit the event loop and open sockets.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.max_workers, mp_context=multiprocessing.get_context("spawn")
            )
            self._own_pool = True
        return self._pool

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = getattr(pool, "_processes", None) or {}
        for process in list(processes.values()):
            with contextlib.suppress(Exception):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)


# -- runs in the engine's process ------------------------------------------------------------


class _Alarm(Exception):
    pass


def _on_alarm(_signum: int, _frame: object) -> None:
    raise _Alarm


def diagnose_files(files: list[tuple[str, str]], max_text_bytes: int) -> dict[str, Any]:
    """The engine as the worker runs it: (name, path) pairs in, ``Diagnosis.to_dict()`` out."""
    from signatures import Limits, Source, diagnose

    sources = [Source(name=name, path=Path(path)) for name, path in files]
    return diagnose(sources, limits=Limits(max_bytes=max_text_bytes)).to_dict()


def run_engine(
    engine: Engine, files: list[tuple[str, str]], timeout_s: float, max_text_bytes: int
) -> tuple[str, Any]:
    """Run ``engine`` in this (pool) process under an alarm.

    Returns ("ok", diagnosis dict), ("input", message) or ("timeout", message).
    """
    import signatures  # noqa: F401  (imported before the alarm: an interrupted import breaks)

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return "ok", engine(files, max_text_bytes)
    except InputError as exc:
        return "input", str(exc)
    except _Alarm:
        return "timeout", timeout_message(timeout_s)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timeout_message(limit: float) -> str:
    """The reply when the engine ran past the job's time limit."""
    return f"The diagnosis took longer than {limit:g} s and was stopped."
