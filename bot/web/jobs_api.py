"""``GET /jobs/{job_id}``: the stored diagnosis and advice of a job a scheduler reported.

A Slurm epilog or a Kubernetes controller asks this after ``POST /webhooks/job-failure`` to act
on the server's advice, which has the history rules the sender cannot apply alone.

Signed like the webhook, with the same secret, headers and five-minute window:
``X-Denpex-Timestamp`` (Unix seconds) and ``X-Denpex-Signature: v1=<hex>``, the HMAC-SHA256 of
``v1:{timestamp}:GET /jobs/{job_id}`` (the method and path, with the job id as sent in the report,
stand where the webhook's body does). Answers: 200 ``{job_id, diagnosis, advice}``; 401 for a
missing or bad signature or a stale timestamp; 404 for a job never reported, not diagnosed yet,
or past retention; 503 with ``Retry-After`` when the webhook secret is unset or Redis is away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from redis.exceptions import RedisError

from bot.jobs.runs import RunHistory
from bot.jobs.store import Store
from bot.ops.settings import Settings
from handlers.webhook import (
    DEFAULT_KEY_ID,
    JOB_ID_RE,
    KEY_ID_HEADER,
    MAX_SKEW_S,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature_valid,
)

log = logging.getLogger(__name__)

# Any character after /jobs/: scheduler job ids may hold '/', and the signature covers them all.
ROUTE = "/jobs/{job_id:.+}"
RETRY_AFTER_S = 5


def signed_text(job_id: str) -> bytes:
    """What a GET of ``job_id`` signs in place of a body: ``GET /jobs/{job_id}``."""
    return f"GET /jobs/{job_id}".encode()


def mount_jobs_api(app: web.Application, settings: Settings, *, store: Store) -> None:
    """Serve ``GET /jobs/{job_id}`` with the webhook's secret."""
    secrets = {DEFAULT_KEY_ID: settings.webhook_secret} if settings.webhook_secret else {}
    app.router.add_get(ROUTE, jobs_handler(secrets, store))


def jobs_handler(
    secrets: Mapping[str, str], store: Store, *, clock: Callable[[], float] = time.time
) -> Callable[[web.Request], Any]:
    """The request handler of ``ROUTE``."""
    history = RunHistory(store)

    async def job(request: web.Request) -> web.Response:
        if not secrets:
            return _answer(503, {"error": "disabled: DENPEX_WEBHOOK_SECRET is not set"})
        job_id = request.match_info["job_id"]
        refusal = _refusal(request, job_id, secrets, clock())
        if refusal:
            log.info("GET /jobs refused: %s", refusal)
            return _answer(401, {"error": refusal})
        if not JOB_ID_RE.fullmatch(job_id):
            return _answer(404, {"error": "no such job"})
        try:
            diagnosis_id = await history.diagnosis_for_job(job_id)
            stored = await store.get(diagnosis_id) if diagnosis_id else None
        except (RedisError, OSError) as exc:  # Redis away: the caller retries, nothing is lost
            log.warning("GET /jobs/%s: the store is unreachable: %s", job_id, exc)
            return _answer(503, {"error": "the store is unreachable; retry later"}, retry_after=RETRY_AFTER_S)
        except ValueError as exc:  # a stored entry that is not JSON: say so, never a 500
            log.error("GET /jobs/%s: the stored diagnosis cannot be read: %r", job_id, exc)
            return _answer(503, {"error": "the stored diagnosis cannot be read"})
        if stored is None:
            return _answer(
                404, {"error": "no diagnosis for this job (not reported, not done yet, or expired)"}
            )
        diagnosis = stored.diagnosis
        return _answer(200, {"job_id": job_id, "diagnosis": diagnosis, "advice": diagnosis.get("advice")})

    return job


def _refusal(request: web.Request, job_id: str, secrets: Mapping[str, str], now: float) -> str | None:
    secret = secrets.get(request.headers.get(KEY_ID_HEADER, DEFAULT_KEY_ID))
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not timestamp or not signature:
        return f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}"
    if not (timestamp.isascii() and timestamp.isdigit()):
        return f"{TIMESTAMP_HEADER} must be Unix seconds"
    if abs(now - int(timestamp)) > MAX_SKEW_S:
        return f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_S // 60} minutes from the server's clock"
    if (
        secret is None
        or not signature.isascii()
        or not signature_valid(secret, timestamp, signed_text(job_id), signature)
    ):
        return "bad signature"
    return None


def _answer(status: int, data: dict[str, Any], *, retry_after: int | None = None) -> web.Response:
    headers = {"Cache-Control": "no-store"}
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    return web.json_response(data, status=status, headers=headers)
