"""The client half of the signed job-failure webhook, shared by `denpex report` and `denpex watch`."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

from handlers.webhook import PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

TIMEOUT_S = 30.0


class WebhookError(Exception):
    """A report the server refused or could not be reached for; the message says why."""

    def __init__(self, message: str, *, again: bool) -> None:
        super().__init__(message)
        self.again = again  # worth trying again: unreachable, busy (429, 503) or a server error


def endpoint(url: str) -> str:
    """The webhook's URL from a server's base URL (or the webhook's own)."""
    url = url.rstrip("/")
    return url if url.endswith(PATH) else url + PATH


def post_signed(url: str, secret: str, payload: dict[str, Any], *, user_agent: str) -> dict[str, Any]:
    """POST ``payload`` to ``url`` signed with ``secret``; the server's JSON answer, or raise WebhookError."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": user_agent,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(secret, timestamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        again = exc.code == 429 or exc.code >= 500
        raise WebhookError(f"the server answered HTTP {exc.code}: {detail}", again=again) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise WebhookError(f"could not reach {url}: {getattr(exc, 'reason', exc)}", again=True) from None
