"""Signed, expiring links to a report: ``{public_url}reports/{id}?exp={unix}&sig={hmac}``.

The signature is HMAC-SHA256 over the diagnosis id and the expiry with the server's secret, so a
link cannot be moved to another diagnosis or made to live longer. Diagnosis ids are random
(uuid4), but the id alone is never what grants access: a forwarded Slack message stops opening
the page when its link expires.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

from bot.ops.settings import Settings

REPORTS_PATH = "reports"  # under the public URL; bot/web/reports.py serves /reports/{id}
DEFAULT_LIFETIME_S = 7 * 24 * 3600
# What a diagnosis id may look like in a URL (diagnoses are stored under their job's uuid4 hex id).
ID_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
# Checked before use: int() of other digits ('²') and compare_digest() of non-ASCII text raise.
EXPIRES_RE = re.compile(r"[0-9]{1,12}")
SIG_RE = re.compile(r"[0-9a-f]{64}")


class LinkError(Exception):
    """A report link that must not open its page; the message says why (for the log)."""


class LinkForged(LinkError):
    """The signature does not match the id and expiry (tampered, or another server's key)."""


class LinkExpired(LinkError):
    """The link was genuine but its lifetime is over."""


@dataclass(frozen=True)
class ReportLinks:
    """Makes and checks report links with one secret."""

    secret: str = field(repr=False)
    public_url: str | None = None  # with a trailing slash; None: links cannot be made
    lifetime_s: int = DEFAULT_LIFETIME_S

    def signature(self, diagnosis_id: str, expires: int) -> str:
        """The hex HMAC of ``id`` and ``expires``; the newline keeps the two fields apart."""
        message = f"{diagnosis_id}\n{expires}".encode()
        return hmac.new(self.secret.encode(), message, hashlib.sha256).hexdigest()

    def path_for(self, diagnosis_id: str, *, now: float | None = None) -> str:
        """``reports/{id}?exp=...&sig=...``, relative to the public URL."""
        if not ID_RE.fullmatch(diagnosis_id):
            raise ValueError(f"not a diagnosis id that fits in a link: {diagnosis_id!r}")
        expires = int(time.time() if now is None else now) + self.lifetime_s
        query = urlencode({"exp": expires, "sig": self.signature(diagnosis_id, expires)})
        return f"{REPORTS_PATH}/{diagnosis_id}?{query}"

    def url_for(self, diagnosis_id: str, *, now: float | None = None) -> str | None:
        """The full link, or None when no public URL is set (nobody could open it)."""
        if not self.public_url:
            return None
        return self.public_url + self.path_for(diagnosis_id, now=now)

    def check(
        self, diagnosis_id: str, expires: str | None, sig: str | None, *, now: float | None = None
    ) -> None:
        """Return if the link is genuine and alive; raise ``LinkForged`` or ``LinkExpired``."""
        if not (
            ID_RE.fullmatch(diagnosis_id)
            and EXPIRES_RE.fullmatch(expires or "")
            and SIG_RE.fullmatch(sig or "")
        ):
            raise LinkForged("the link lacks a well-formed id, expiry or signature")
        assert expires is not None and sig is not None  # matched above
        # Compare first, so an attacker learns nothing from the expiry of a forged link.
        if not hmac.compare_digest(self.signature(diagnosis_id, int(expires)), sig):
            raise LinkForged("the signature does not match")
        if int(expires) < (time.time() if now is None else now):
            raise LinkExpired(f"the link expired at {int(expires)}")


def links_from_settings(settings: Settings) -> ReportLinks | None:
    """Report links as configured, or None without a secret (reports are then not served)."""
    if not settings.report_secret:
        return None
    return ReportLinks(settings.report_secret, settings.public_url, settings.report_link_days * 24 * 3600)
