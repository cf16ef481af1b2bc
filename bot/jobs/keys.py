"""Every Redis key and stream name Denpex uses, in one place.

All names hang under one prefix (``denpex`` by default) so tests and several deployments can
share a server. Expiries are set where the keys are written; comments here say how long each
lives and why.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from signatures.redact import redact

DEFAULT_PREFIX = "denpex"
GROUP = "workers"  # the one consumer group every worker joins


@dataclass(frozen=True)
class Keys:
    """Key names under one prefix."""

    prefix: str = DEFAULT_PREFIX

    @property
    def jobs(self) -> str:
        """Stream of jobs; trimmed only below the oldest unacknowledged entry."""
        return f"{self.prefix}:jobs"

    @property
    def dead(self) -> str:
        """Stream of jobs that failed too many deliveries (MAXLEN-bounded: nothing waits on it)."""
        return f"{self.prefix}:jobs:dead"

    @property
    def group(self) -> str:
        """The consumer group name."""
        return GROUP

    def dedupe(self, dedupe_key: str) -> str:
        """SET NX EX marker: one job per Slack event, file or webhook job id (expires in a day)."""
        return f"{self.prefix}:dedupe:{_safe(dedupe_key)}"

    def job_progress(self, job_id: str) -> str:
        """Hash of what a job already posted (parent ts, reply ts), so a retried job never
        posts twice; expires with the dedupe window."""
        return f"{self.prefix}:job:{job_id}"

    def diagnosis(self, diagnosis_id: str) -> str:
        """Hash: redacted diagnosis JSON, where it was posted, the job's source (retention TTL)."""
        return f"{self.prefix}:diag:{diagnosis_id}"

    def thread(self, channel: str, thread_ts: str) -> str:
        """String: the diagnosis id answered in this Slack thread (retention TTL)."""
        return f"{self.prefix}:thread:{channel}:{thread_ts}"

    def history(self, channel: str) -> str:
        """List of diagnosis ids in a channel, newest first, bounded (retention TTL)."""
        return f"{self.prefix}:history:{channel}"

    def occurrences(self, fingerprint: str, channel: str | None = None) -> str:
        """Sorted set of diagnosis ids scored by time, per signature fingerprint, workspace-wide
        or per channel (retention TTL)."""
        scope = f"channel:{channel}" if channel else "all"
        return f"{self.prefix}:seen:{scope}:{fingerprint}"

    def feedback(self, diagnosis_id: str) -> str:
        """Hash user -> JSON {verdict, at}: one verdict per user per diagnosis (retention TTL)."""
        return f"{self.prefix}:feedback:{diagnosis_id}"

    def thread_logs(self, channel: str, thread_ts: str) -> str:
        """List of JSON log references of a thread (Slack file ids, redacted pasted text), so a
        re-diagnosis can fetch every log of the thread again (retention TTL)."""
        return f"{self.prefix}:threadlogs:{channel}:{thread_ts}"

    def thread_asked(self, channel: str, thread_ts: str) -> str:
        """Set of missing facts already asked in a thread, never asked twice (retention TTL)."""
        return f"{self.prefix}:threadasked:{channel}:{thread_ts}"

    def allowance(self, day: str, scope: str, ident: str) -> str:
        """Counter of new diagnoses of one user, channel or webhook key on one UTC day
        (``YYYYMMDD``); expires an hour after that day ends."""
        return f"{self.prefix}:allowance:{day}:{scope}:{_safe(ident)}"

    def signature_stats(self, signature_id: str) -> str:
        """Hash of counters per signature: diagnoses, confirmed, disputed (kept, no TTL)."""
        return f"{self.prefix}:sigstats:{signature_id}"

    def job_runs(self, job_key: str) -> str:
        """Sorted set of diagnosis ids of one job name's runs, scored by time, for the advice's
        repeat rule (retention TTL)."""
        return f"{self.prefix}:runs:{_safe(job_key)}"

    def host_failures(self, host: str) -> str:
        """Sorted set of diagnosis ids with a bad-host (node) failure on this host, scored by time,
        for the advice's host rule (retention TTL)."""
        return f"{self.prefix}:hostfail:{_safe(host)}"

    def scheduler_job(self, job_id: str) -> str:
        """String: the diagnosis id of a scheduler's job id (webhook ``job_id``), for
        ``GET /jobs/<job_id>`` (retention TTL)."""
        return f"{self.prefix}:schedjob:{_safe(job_id)}"


def _safe(part: str) -> str:
    # Dedupe keys come from outside (webhook job ids); keep key names short and printable, and
    # never let a secret-looking id into a key name (key names are in the append-only file too).
    if len(part) <= 120 and part.isprintable() and " " not in part and redact(part) == part:
        return part
    return "h:" + hashlib.sha256(part.encode()).hexdigest()
