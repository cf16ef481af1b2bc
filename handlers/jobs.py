"""The jobs every way in puts on the queue: typed, versioned JSON (never pickle)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

JOB_VERSION: Final = 1
SUPPORTED_VERSIONS: Final = frozenset({1})

LOG_KINDS: Final = frozenset({"slack_file", "inline", "url"})
JOB_SOURCES: Final = frozenset({"slash", "file", "webhook", "thread", "report"})
# Kinds the worker knows out of the box; others are dispatched to registered handlers.
KIND_DIAGNOSE: Final = "diagnose"
KIND_FOLLOWUP: Final = "followup"
KIND_FEEDBACK: Final = "feedback"


class JobFormatError(ValueError):
    """A job payload that is not valid JSON or lacks a required field."""


class UnknownJobVersion(JobFormatError):
    """A job payload written by a version of Denpex this one cannot read."""

    def __init__(self, version: object) -> None:
        super().__init__(
            f"job payload version {version!r} is not supported "
            f"(this worker reads {sorted(SUPPORTED_VERSIONS)})"
        )
        self.version = version


@dataclass(frozen=True)
class LogRef:
    """Where one log is: a Slack file, text carried in the job, or a URL to fetch."""

    kind: str  # "slack_file" | "inline" | "url"
    name: str
    file_id: str | None = None
    url: str | None = None
    size: int | None = None  # bytes, when the sender knows it
    text: str | None = None  # only for kind "inline"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "kind": self.kind,
            "name": self.name,
            "file_id": self.file_id,
            "url": self.url,
            "size": self.size,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: Any) -> LogRef:
        """Rebuild from the JSON form, checking every field."""
        if not isinstance(data, dict):
            raise JobFormatError("a log reference must be an object")
        kind = _str(data, "kind")
        if kind not in LOG_KINDS:
            raise JobFormatError(f"unknown log kind {kind!r}")
        size = data.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
            raise JobFormatError("log size must be an integer")
        return cls(
            kind=kind,
            name=_str(data, "name"),
            file_id=_opt_str(data, "file_id"),
            url=_opt_str(data, "url"),
            size=size,
            text=_opt_str(data, "text"),
        )


@dataclass(frozen=True)
class Job:
    """One unit of work: diagnose these logs and answer in this Slack thread."""

    source: str  # "slash" | "file" | "webhook" | "thread" | "report"
    dedupe_key: str  # Slack event_id, Slack file id, webhook job_id: one job per fact
    channel: str | None = None
    thread_ts: str | None = None  # None: post a parent message (``header``) first
    logs: list[LogRef] = field(default_factory=list)
    user: str | None = None
    response_url: str | None = None
    header: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    precomputed: dict[str, Any] | None = None  # a Diagnosis.to_dict() computed elsewhere
    kind: str = KIND_DIAGNOSE
    text: str | None = None  # a follow-up question
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    version: int = JOB_VERSION
    created_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with the version first."""
        return {
            "version": self.version,
            "id": self.id,
            "kind": self.kind,
            "source": self.source,
            "dedupe_key": self.dedupe_key,
            "channel": self.channel,
            "thread_ts": self.thread_ts,
            "logs": [log.to_dict() for log in self.logs],
            "user": self.user,
            "response_url": self.response_url,
            "header": self.header,
            "meta": dict(self.meta),
            "precomputed": self.precomputed,
            "text": self.text,
            "created_at": self.created_at,
        }

    def to_json(self) -> str:
        """Serialise for the queue."""
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Job:
        """Parse a queued payload; raises ``UnknownJobVersion`` or ``JobFormatError``."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise JobFormatError(f"job payload is not JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> Job:
        """Rebuild from the JSON form, checking the version before anything else."""
        if not isinstance(data, dict):
            raise JobFormatError("job payload must be a JSON object")
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise UnknownJobVersion(version)
        if version not in SUPPORTED_VERSIONS:
            raise UnknownJobVersion(version)
        source = _str(data, "source")
        if source not in JOB_SOURCES:
            raise JobFormatError(f"unknown job source {source!r}")
        logs = data.get("logs", [])
        if not isinstance(logs, list):
            raise JobFormatError("job logs must be a list")
        meta = data.get("meta") or {}
        if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
        ):
            raise JobFormatError("job meta must map strings to strings")
        precomputed = data.get("precomputed")
        if precomputed is not None and not isinstance(precomputed, dict):
            raise JobFormatError("job precomputed must be an object")
        created_at = data.get("created_at", time.time())
        if not isinstance(created_at, int | float) or isinstance(created_at, bool):
            raise JobFormatError("job created_at must be a number")
        return cls(
            source=source,
            dedupe_key=_str(data, "dedupe_key"),
            channel=_opt_str(data, "channel"),
            thread_ts=_opt_str(data, "thread_ts"),
            logs=[LogRef.from_dict(log) for log in logs],
            user=_opt_str(data, "user"),
            response_url=_opt_str(data, "response_url"),
            header=_opt_str(data, "header"),
            meta=dict(meta),
            precomputed=precomputed,
            kind=_str(data, "kind") if "kind" in data else KIND_DIAGNOSE,
            text=_opt_str(data, "text"),
            id=_str(data, "id"),
            version=version,
            created_at=float(created_at),
        )


def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise JobFormatError(f"job field {key!r} must be a non-empty string")
    return value


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise JobFormatError(f"job field {key!r} must be a string or null")
    return value
