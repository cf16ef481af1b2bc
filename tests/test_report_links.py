"""Signed report links, and the settings that configure them."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.ops.settings import SettingsError, load_settings
from bot.pages.links import LinkExpired, LinkForged, ReportLinks, links_from_settings

SECRET = "s" * 40
NOW = 1_800_000_000
LINKS = ReportLinks(SECRET, "https://denpex.example.com/", lifetime_s=7 * 86400)
BASE = {"SLACK_BOT_TOKEN": "xoxb-secret-token", "SLACK_SIGNING_SECRET": "shh-signing"}


def parts(url: str) -> tuple[str, str, str]:
    split = urlsplit(url)
    query = parse_qs(split.query)
    return split.path.rsplit("/", 1)[-1], query["exp"][0], query["sig"][0]


def test_a_link_opens_until_it_expires() -> None:
    url = LINKS.url_for("abc123", now=NOW)
    assert url is not None and url.startswith("https://denpex.example.com/reports/abc123?exp=")
    diagnosis_id, exp, sig = parts(url)
    assert int(exp) == NOW + 7 * 86400
    LINKS.check(diagnosis_id, exp, sig, now=NOW + 7 * 86400 - 1)
    with pytest.raises(LinkExpired):
        LINKS.check(diagnosis_id, exp, sig, now=NOW + 7 * 86400 + 1)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda i, e, s: (i, e, s[:-1] + ("0" if s[-1] != "0" else "1")),  # one character of the signature
        lambda i, e, s: ("abc124", e, s),  # another diagnosis
        lambda i, e, s: (i, str(int(e) + 86400), s),  # a longer life
        lambda i, e, s: (i, e, s.upper()),
        lambda i, e, s: (i, None, s),
        lambda i, e, s: (i, e, None),
        lambda i, e, s: (i, "-1", s),
        lambda i, e, s: ("../etc", e, s),
        lambda i, e, s: (i, "²", s),  # a digit to str.isdigit(), not to int()
        lambda i, e, s: (i, "9" * 5000, s),  # past int()'s digit limit
        lambda i, e, s: (i, e, "é" * 64),  # compare_digest() refuses non-ASCII text
    ],
)
def test_a_changed_link_is_refused(
    tamper: Callable[[str, str, str], tuple[str, str | None, str | None]],
) -> None:
    diagnosis_id, exp, sig = parts(LINKS.url_for("abc123", now=NOW) or "")
    with pytest.raises(LinkForged):
        LINKS.check(*tamper(diagnosis_id, exp, sig), now=NOW)


def test_another_servers_secret_does_not_open_the_link() -> None:
    diagnosis_id, exp, sig = parts(LINKS.url_for("abc123", now=NOW) or "")
    with pytest.raises(LinkForged):
        ReportLinks("t" * 40).check(diagnosis_id, exp, sig, now=NOW)


def test_no_public_url_no_link_and_ids_must_fit_a_url() -> None:
    assert ReportLinks(SECRET).url_for("abc123") is None
    with pytest.raises(ValueError, match="diagnosis id"):
        LINKS.path_for("a/b")


def test_report_settings_default_to_off() -> None:
    s = load_settings(BASE)
    assert s.public_url is None and s.report_secret is None and s.report_link_days == 7
    assert links_from_settings(s) is None


def test_report_settings_build_links() -> None:
    s = load_settings(
        {
            **BASE,
            "DENPEX_PUBLIC_URL": "https://denpex.example.com",
            "DENPEX_REPORT_SECRET": SECRET,
            "DENPEX_REPORT_LINK_DAYS": "2",
        }
    )
    links = links_from_settings(s)
    assert links is not None and links.public_url == "https://denpex.example.com/"
    assert links.lifetime_s == 2 * 86400
    assert SECRET not in repr(s) and "report_secret='***'" in repr(s)
    assert SECRET not in repr(links)


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"DENPEX_PUBLIC_URL": "https://denpex.example.com/"}, "DENPEX_REPORT_SECRET is missing"),
        ({"DENPEX_REPORT_SECRET": "short"}, "DENPEX_REPORT_SECRET is malformed"),
        ({"DENPEX_PUBLIC_URL": "denpex.example.com", "DENPEX_REPORT_SECRET": SECRET}, "DENPEX_PUBLIC_URL"),
        ({"DENPEX_REPORT_LINK_DAYS": "0"}, "DENPEX_REPORT_LINK_DAYS"),
    ],
)
def test_bad_report_settings_are_named(env: dict[str, str], name: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({**BASE, **env})
