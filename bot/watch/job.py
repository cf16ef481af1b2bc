"""Which job is being watched, from the scheduler's environment: Slurm, Kubernetes, torchrun."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

_NOT_ID = re.compile(r"[^A-Za-z0-9._:@/+=-]")
MAX_BASE = 160  # room for the ":failure-12" suffix within the webhook's 200 characters


@dataclass(frozen=True)
class JobInfo:
    """The job's id (the webhook's idempotency key), and what the report shows of it."""

    job_id: str
    job_name: str | None = None
    cluster: str | None = None
    user: str | None = None

    def event_id(self, event: str, seq: int) -> str:
        """The id of one report: the job's own for the final one, so that a scheduler's epilog
        reporting the same job later is a duplicate; ``<job>:<event>-<n>`` for the others."""
        return self.job_id if event == "final" else f"{self.job_id}:{event}-{seq}"


def from_environment(env: Mapping[str, str] | None = None, *, job_id: str | None = None) -> JobInfo:
    """The job's id and name from ``env`` (default: this process'), an explicit ``job_id`` first.

    Slurm's id is prefixed with the cluster, as the Slurm epilog does, so both name the job alike.
    """
    env = os.environ if env is None else env
    user = env.get("USER") or env.get("SLURM_JOB_USER")
    cluster = env.get("DENPEX_CLUSTER") or env.get("SLURM_CLUSTER_NAME")
    name = env.get("DENPEX_JOB_NAME")
    chosen = job_id or env.get("DENPEX_JOB_ID")
    if env.get("SLURM_JOB_ID"):
        cluster = cluster or "slurm"
        name = name or env.get("SLURM_JOB_NAME")
        array = env.get("SLURM_ARRAY_TASK_ID")
        slurm_id = env.get("SLURM_ARRAY_JOB_ID", "") + f"_{array}" if array else env["SLURM_JOB_ID"]
        chosen = chosen or f"{cluster}-{slurm_id}"
    elif env.get("KUBERNETES_SERVICE_HOST"):
        # A Job's pods carry its name in a label; the sidecar passes it (downward API) when set.
        name = name or env.get("JOB_NAME") or env.get("HOSTNAME")
        chosen = chosen or f"k8s-{env.get('POD_NAMESPACE', 'default')}-{env.get('HOSTNAME', 'pod')}"
    if env.get("TORCHELASTIC_RUN_ID") and env.get("TORCHELASTIC_RUN_ID") != "none":
        chosen = chosen or f"torchrun-{env['TORCHELASTIC_RUN_ID']}"
    chosen = chosen or f"watch-{socket.gethostname()}-{os.getpid()}-{int(time.time())}"
    return JobInfo(_clean(chosen), name, cluster, user)


def _clean(raw: str) -> str:
    cleaned = _NOT_ID.sub("-", raw).lstrip("._:@/+=-") or "job"
    return cleaned[:MAX_BASE]
