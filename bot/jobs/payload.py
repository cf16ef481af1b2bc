"""What can be read of a stream entry's payload even when it is not a valid job."""

from __future__ import annotations

import json
import uuid

from handlers.jobs import Job


def source_of(payload: str) -> str:
    """The job's source for metrics labels, else "unknown"."""
    return _field(payload, "source", 16) or "unknown"


def job_id_of(payload: str) -> str | None:
    """The job id for log lines, even when the payload does not parse as a Job."""
    return _field(payload, "id", 64)


def _field(payload: str, key: str, max_len: int) -> str | None:
    try:
        value = json.loads(payload).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and len(value) <= max_len else None


def salvage(payload: str) -> Job | None:
    """A Job good enough for an error reply, from a payload that is not a valid job."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = {k: data.get(k) for k in ("channel", "thread_ts", "response_url", "id")}
    if not all(v is None or isinstance(v, str) for v in fields.values()):
        return None
    if not (fields["channel"] or fields["response_url"]):
        return None
    return Job(
        source="slash",
        dedupe_key="unreadable",
        channel=fields["channel"],
        thread_ts=fields["thread_ts"],
        response_url=fields["response_url"],
        id=fields["id"] or uuid.uuid4().hex,
    )
