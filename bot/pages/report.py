"""The report page: Jinja2 with autoescape over ``view.ReportView``, and the headers it is served with.

The page is one self-contained HTML document: no script, no external assets, the stylesheet
inline. Its Content-Security-Policy allows exactly that stylesheet (by hash) and nothing else, in
a ``<meta>`` tag for a page opened from disk and in the header when served.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from importlib.resources import files
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from bot.pages.drawing import delta_text, short_time
from bot.pages.view import ReportInfo, build_view, ranges
from signatures.diagnosis import Diagnosis

TEMPLATES = "templates"
_TICKS = re.compile(r"`([^`\n]+)`")


def _css() -> str:
    return (files("bot.pages") / TEMPLATES / "report.css").read_text(encoding="utf-8")


@cache
def stylesheet() -> str:
    """The page's CSS, exactly as it is inlined (its hash is in the policy)."""
    return _css()


@cache
def content_security_policy(*, header: bool = True) -> str:
    """No script, no fetches, no frames, no forms: only the inline stylesheet, by its SHA-256.

    ``frame-ancestors`` only works as a header (a ``<meta>`` policy must leave it out).
    """
    digest = base64.b64encode(hashlib.sha256(stylesheet().encode("utf-8")).digest()).decode()
    policy = (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )
    return f"{policy}; frame-ancestors 'none'" if header else policy


def response_headers() -> dict[str, str]:
    """Headers of every page under /reports (the report, and its 403/404 pages)."""
    return {
        "Content-Security-Policy": content_security_policy(),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",  # the signed link must not leak to a linked site
        "Cache-Control": "private, no-store",  # nor stay in a shared cache or the disk cache
        "X-Frame-Options": "DENY",
        "X-Robots-Tag": "noindex, nofollow",
    }


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("bot.pages", TEMPLATES),
        autoescape=True,  # every template, whatever its file name: log text is hostile
        undefined=StrictUndefined,  # a misspelt field fails the tests instead of printing nothing
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    env.filters["px"] = _px
    env.filters["ranges"] = ranges
    env.filters["short_time"] = short_time
    env.filters["delta"] = delta_text
    env.filters["ticks"] = ticks
    return env


def ticks(text: str) -> Markup:
    """Escape ``text``, then show its `backtick` spans as code (the library writes commands so)."""
    return Markup(_TICKS.sub(r"<code>\1</code>", str(escape(text))))


def _px(value: float) -> str:
    """A coordinate with at most one decimal ('12', '12.5')."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _version() -> str:
    try:
        return metadata.version("denpex")
    except metadata.PackageNotFoundError:
        return "(source tree)"


def render_report(d: Diagnosis, info: ReportInfo | None = None) -> str:
    """The whole page for ``d``."""
    info = info or ReportInfo(generated_at=datetime.now(UTC))
    # Always the stored form, so the CLI's page and the served page of one diagnosis are the same.
    d = Diagnosis.from_dict(d.to_dict(context=True))
    template = environment().get_template("report.html.j2")
    return template.render(
        v=build_view(d, info),
        css=Markup(stylesheet()),  # ours, byte for byte what the policy's hash covers
        csp=content_security_policy(header=False),
        version=_version(),
    )


def render_refusal(status: int, title: str, message: str) -> str:
    """The plain page of a refused link (403) or a diagnosis that is gone (404)."""
    template = environment().get_template("refusal.html.j2")
    return template.render(
        status=status,
        title=title,
        message=message,
        css=Markup(stylesheet()),
        csp=content_security_policy(header=False),
    )


def write_report(d: Diagnosis, path: Path, info: ReportInfo | None = None) -> int:
    """Write the page to ``path``; returns its size in bytes."""
    data = render_report(d, info).encode("utf-8")
    path.write_bytes(data)
    return len(data)
