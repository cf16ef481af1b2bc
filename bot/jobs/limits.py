"""The bounds on one job: downloads, the engine's time and the text it may read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerLimits:
    """Bounds on one job."""

    max_log_bytes: int = 200 * 1024 * 1024  # all of a job's downloads together
    job_timeout_s: float = 120.0  # the engine's run, per job
    max_logs: int = 20
    # What the engine may read after decompression (archives expand).
    max_text_bytes: int = 4 * 1024 * 1024 * 1024
