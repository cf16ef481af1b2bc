"""Where a watch's reports go: JSON lines on standard output, a Denpex server's webhook, or both."""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from bot.ops.webhook_client import WebhookError, endpoint, post_signed
from bot.watch.answer import FAILING, FINAL
from bot.watch.job import JobInfo
from signatures import Diagnosis

CONTEXT = 3  # context lines around the initiating line, as `denpex diagnose --json` by default
TRIES = 4  # a report is tried this often, 1, 2, 4 s apart, before it is given up (and said so)
# What the Slack message's header says after "Job <name>": the job is still running, except at the end.
HEADER_STATUS = {
    "degraded": "degraded (still running)",
    "failure": "failing (still running)",
    "cascade": "failing on more ranks (still running)",
}


class Sink(Protocol):
    def report(self, event: str, d: Diagnosis, exit_code: int | None) -> None:
        """Report ``d`` as ``event`` (``exit_code``: the watched process', on the final one)."""
        ...

    def close(self) -> None:
        """Finish: every report made is out."""
        ...


def as_json(event: str, d: Diagnosis, exit_code: int | None) -> dict[str, Any]:
    """``denpex diagnose --json``'s object, with ``event`` (and ``exit_code`` on the final one)."""
    data = {"event": event, **d.to_dict()}
    if data["initiating"] is not None:
        data["initiating"]["before"] = data["initiating"]["before"][-CONTEXT:]
        data["initiating"]["after"] = data["initiating"]["after"][:CONTEXT]
    if event == FINAL:
        data["exit_code"] = exit_code
    return data


@dataclass
class JsonLines:
    """One JSON object per line, flushed at once (a pipe reader sees each report as it happens)."""

    out: TextIO

    def report(self, event: str, d: Diagnosis, exit_code: int | None) -> None:
        """Print the report as one line."""
        self.out.write(json.dumps(as_json(event, d, exit_code), ensure_ascii=False) + "\n")
        self.out.flush()

    def close(self) -> None:
        pass


class Webhook:
    """Signed reports to ``POST /webhooks/job-failure``, sent in order by a thread of their own, so
    that a slow server never holds up reading the logs."""

    def __init__(self, url: str, secret: str, job: JobInfo, channel: str | None = None) -> None:
        self.endpoint = endpoint(url)
        self.secret = secret
        self.job = job
        self.channel = channel
        self.sent = 0
        self._seq = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._send_all, name="denpex-watch-webhook", daemon=True)
        self._thread.start()

    def report(self, event: str, d: Diagnosis, exit_code: int | None) -> None:
        """Queue the report for sending (a run that ended well is not sent)."""
        if event == FINAL and exit_code in (0, None) and d.status not in FAILING:
            return  # a run that ended well is no news for the failures channel
        self._seq += 1
        status = HEADER_STATUS.get(event) or ("failed" if exit_code or d.status in FAILING else "ended")
        payload = {
            "job_id": self.job.event_id(event, self._seq),
            "job_name": self.job.job_name,
            "cluster": self.job.cluster,
            "user": self.job.user,
            "status": status,
            "exit_code": exit_code,
            "channel": self.channel,
            "diagnosis": d.to_dict(context=True),
        }
        self._queue.put({k: v for k, v in payload.items() if v is not None})

    def close(self, timeout: float = 60.0) -> None:
        """Send what is queued (waiting up to ``timeout`` seconds), then stop."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _send_all(self) -> None:
        while (payload := self._queue.get()) is not None:
            for attempt in range(TRIES):
                try:
                    post_signed(self.endpoint, self.secret, payload, user_agent="denpex-watch")
                    self.sent += 1
                    break
                except WebhookError as exc:
                    if attempt + 1 == TRIES or not exc.again:
                        print(f"denpex watch: report {payload['job_id']} not sent: {exc}", file=sys.stderr)
                        break
                    time.sleep(2**attempt)

