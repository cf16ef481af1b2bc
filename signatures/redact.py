"""Redaction of secrets in log text, applied before anything leaves the engine.

Logs carry what the job's environment carried: tokens in URLs, `HF_TOKEN=` dumps, AWS keys in a
boto error, a private key a script printed, the user's e-mail. None of it may reach Slack, Redis
or a terminal we print to.

The kinds follow gitleaks and detect-secrets: provider tokens by their format (``ghp_``,
``AKIA``, ``xoxb-``, ...), secrets by their name (``password=``, ``X-Api-Key:``, ``--token x``,
``mysql -pSECRET``), credentials in URLs and connection strings, private-key blocks across lines,
e-mail addresses.

``redact`` runs on evidence lines, log records and whole pasted logs, so it is built for speed.
Each rule has a gate, a pattern every match of the rule also matches; one RE2 set finds which
gates a text (or a 64 KiB chunk of a long one) passes, and only those rules run. The rules' own
patterns start with a literal (a keyword in its lower, Capitalised and UPPER forms), which is
what Python's ``re`` searches fast. Apart from private-key blocks, every rule stays within a line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

MASK = "[REDACTED]"
EMAIL_MASK = "[EMAIL]"
PRIVATE_KEY_MASK = f"{MASK} (private key)"

# A long text is gated and redacted in chunks of about this many characters, cut at line ends.
_CHUNK_CHARS = 64 * 1024
# A mask can expose a new match; masked lines run again until nothing changes (idempotence).
_MAX_PASSES = 4
# Values that name no secret: ``use_auth_token=True``, ``hf_token=None``, ``password=""``.
_NOT_SECRETS = frozenset({"", "true", "false", "none", "null", "nil", "undefined"})
_M = re.escape(MASK)

Span = Callable[[str, re.Match[str]], "tuple[int, int] | None"]


@dataclass(frozen=True)
class _Rule:
    gate: str  # RE2 (and re) syntax: matches wherever one of the patterns can match
    sources: tuple[str, ...]  # the patterns, compiled when the rule first runs (most never do)
    span: Span  # the part of a match to mask, or None to leave the match as it is
    mask: str = MASK

    @functools.cached_property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(source) for source in self.sources)


def _variants(word: str) -> tuple[str, ...]:
    """A keyword as people write it: token, Token, TOKEN."""
    return tuple(dict.fromkeys((word, word.capitalize(), word.upper())))


def _whole(text: str, match: re.Match[str]) -> tuple[int, int]:
    return match.span()


def _group(*names: str) -> Span:
    """Mask the first of ``names`` that took part in the match, unless it holds no secret."""

    def span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
        for name in names:
            value = match.group(name)
            if value is not None:
                if value.lower() in _NOT_SECRETS or value.startswith(MASK):
                    return None
                return match.span(name)
        return None

    return span


# A value after ``name=`` or ``name: ``: JSON-escaped, double- or single-quoted, or bare up to a
# space, quote, comma, ';' or '&'. Every scan stops at a character that starts the next value, so
# a line of a million names costs a million short scans, not a million long ones.
_VALUE = (
    r"(?:\\\"(?P<esc>(?:[^\"\\\n]|\\[^\"\n])*)\\\""
    r"|\"(?P<dq>[^\"\n]*)\""
    r"|'(?P<sq>[^'\n]*)'"
    r"|(?:\\?[\"'])?(?P<bare>[^\s\"'`,;&\\]+))"
)
_value_span = _group("esc", "dq", "sq", "bare")
_ASSIGN = r"(?:\\?[\"'])?[ \t]*(?:=>|:=|[:=])(?!=)[ \t]*"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _named_value_span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """A secret's value after its name; ``name value`` only when the name is an option (``--``)."""
    if match.group("opt") is not None:
        start = match.start()
        while start > 0 and text[start - 1] in _NAME_CHARS:
            start -= 1
        if text[start] != "-":
            return None
    return _value_span(text, match)


def _named(word: str, after: str = "", gate_word: str | None = None) -> _Rule:
    """Secrets by name: a name ending in ``word`` (then ``after``), then its value."""
    gate_word = f"(?i:{gate_word or word})"
    return _Rule(
        rf"{gate_word}(?:\\?[\"'])?[ \t]*[:=]|-[A-Za-z0-9_-]*{gate_word}[ \t]+[^\s-]",
        tuple(
            rf"{variant}{after}(?![A-Za-z0-9_-])(?:{_ASSIGN}|(?P<opt>[ \t]+)(?!-))(?!{_M}){_VALUE}"
            for variant in _variants(word)
        ),
        _named_value_span,
    )


def _token(literal: str, rest: str, gate_rest: str | None = None, *, width: int | None = None) -> _Rule:
    """A secret known by its format: ``literal`` at the start of a word, then ``rest``.

    ``width`` is the literal's length when it is a pattern (``gh[pousr]_``: 4); ``gate_rest`` is
    ``rest`` without look-arounds, which RE2 lacks.
    """
    width = len(literal.replace("\\", "")) if width is None else width
    return _Rule(
        literal + (rest if gate_rest is None else gate_rest),
        (rf"{literal}(?<![A-Za-z0-9_].{{{width}}}){rest}",),
        _whole,
    )


def _email_span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    at = match.start()
    local = _LOCAL_PART.search(text, max(0, at - 64), at)
    if local is None or (local.start() > 0 and _LOCAL_CHAR.match(text, local.start() - 1)):
        return None  # no local part, or one longer than an address may have
    return local.start(), match.end()


def _telegram_span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    start = match.start()
    while start > 0 and match.start() - start <= 16 and "0" <= text[start - 1] <= "9":
        start -= 1
    return (start, match.end()) if 5 <= match.start() - start <= 16 else None


_LOCAL_CHAR = re.compile(r"[\w.%+-]")
_LOCAL_PART = re.compile(r"[\w.%+-]{1,64}\Z")
_KEY_STEMS = ("api", "access", "secret", "private", "account")
# Key names that hold secrets: api_key, AccessKey, X-Api-Key, AccountKey, and ?key= in a URL.
_KEY_AFTER = (
    "(?i:" + "|".join([f"(?<={s}key)|(?<={s}[-_]key)" for s in _KEY_STEMS] + [r"(?<=[?&;]key)"]) + ")"
)
# Tokenizer settings end in "token" and are no secrets: eos_token='</s>', pad_token: <pad>.
_SPECIAL_TOKENS = ("bos", "eos", "pad", "unk", "sep", "cls", "mask", "sos")
_TOKEN_AFTER = "(?i:" + "".join(f"(?<!{name}[_-]token)" for name in _SPECIAL_TOKENS) + ")"
_SIG_AFTER = r"(?i:nature)?(?i:(?<=[?&;]sig)|(?<=[?&;]signature)|(?<=-amz-signature)|(?<=-goog-signature))"
_SCHEMES = r"Bearer|Basic|Token|Digest|Negotiate|NTLM|Bot|OAuth|SSWS|Splunk|ApiKey|Key|AWS4-HMAC-SHA256"


@functools.cache
def _private_key_block() -> re.Pattern[str]:
    # Compiled on first use, not at import: only a text that says "PRIVATE KEY" needs it.
    return re.compile(
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:(?!-----BEGIN)[\s\S]){0,16384}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        # No END line: the rest of the BEGIN line, and the lines after it that look like key material.
        r"|[^\r\n]*(?:\r?\n[ \t]*(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*)?"
        r"[ \t]*(?=\r?\n|$)){0,200})"
    )


# One line of base64 key material on its own: a PEM body line seen without its BEGIN line.
_KEY_BODY_LINE = re.compile(
    r"([ \t]*)(?=[^\n]*[A-Z])(?=[^\n]*[a-z])(?=[^\n]*[0-9])[A-Za-z0-9+/]{40,100}={0,2}[ \t]*(\r?\n?)"
)
_MASKS = re.compile(r"\[(?:REDACTED|EMAIL)\]")

_RULES: tuple[_Rule, ...] = (
    # Credentials in URLs: scheme://user:password@host, scheme://:password@host.
    _Rule(
        r"://[^\s/@:]*:[^\s/?#]*@",
        (rf"://[^\s/@:]*:(?!{_M}@)(?P<pw>[^\s/?#]*)@",),
        _group("pw"),
    ),
    # Whole header values: Authorization (after its scheme), Cookie, Set-Cookie.
    _Rule(
        r"(?i:authorization|cookie)(?:\\?[\"'])?[ \t]*[:=]",
        tuple(
            (
                rf"{name}(?![A-Za-z0-9_-]){_ASSIGN}(?>(?:(?i:{_SCHEMES})[ \t]+)?)"
                rf"(?!{_M})(?:\\?[\"'])?(?P<value>[^\s\"'\\][^\n\"'\\]*)"
            )
            for word in ("authorization", "cookie")
            for name in _variants(word)
        ),
        _group("value"),
    ),
    _Rule(
        r"(?i:bearer)[ \t]+[A-Za-z0-9._~+/=-]{8}",
        tuple(
            rf"{name}(?<![A-Za-z0-9_].{{6}})[ \t]+(?!{_M})(?P<value>[A-Za-z0-9._~+/=-]{{8,}})"
            for name in _variants("bearer")
        ),
        _group("value"),
    ),
    # ADO-style connection strings: Password=p@ss w0rd; the value runs to its ';' (at most 256).
    _Rule(
        "(?:(?i:password|pwd)|AccountKey|SharedAccessKey)=[^;]{1,256};",
        tuple(
            rf"{name}=(?!{_M})(?P<value>[^\s;\"'=:][^;\n\"'=:]{{0,255}}+)(?=;)"
            for name in (*_variants("password"), *_variants("pwd"), "AccountKey", "SharedAccessKey")
        ),
        _group("value"),
    ),
    # Secrets by name: HF_TOKEN=..., "password": "...", X-Api-Key: ..., --token x, ?sig=...
    _named("token", _TOKEN_AFTER),
    _named("secret"),
    _named("passw", "(?i:(?:or)?d)", "passw(?:or)?d"),
    _named("passphrase"),
    _named("pwd"),
    _named("key", _KEY_AFTER),
    _named("credential", "(?i:s)?", "credentials?"),
    _named("auth"),
    _named("sig", _SIG_AFTER, "sig(?:nature)?"),
    # Clients that take a password glued to or after a short option: mysql -pSECRET, sshpass -p x.
    _Rule(
        "mysql|mariadb|sshpass|redis-cli",
        tuple(
            (
                # Words after the command up to the option; never past the next command (linear).
                rf"{command}(?<![A-Za-z0-9_].{{{len(command)}}})[\w-]*"
                rf"(?:[ \t]+(?!{option}|{command})[^\s]+)*+[ \t]+{option}[ \t]?"
                rf"(?:\"(?P<dq>[^\"\n]*)\"|'(?P<sq>[^'\n]*)'|(?!{_M})(?P<pw>[^\s\"'-][^\s\"']*))"
            )
            for command, option in (
                ("mysql", "-p"),
                ("mariadb", "-p"),
                ("sshpass", "-p"),
                ("redis-cli", "-a"),
            )
        ),
        _group("dq", "sq", "pw"),
    ),
    # Provider formats (gitleaks, detect-secrets): cloud, VCS and CI, chat, payments, LLM APIs.
    _token("A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])", "[A-Z0-9]{16}(?![A-Za-z0-9])", "[A-Z0-9]{16}", width=4),
    _token("AIza", "[0-9A-Za-z_-]{35}"),
    _token(r"ya29\.", "[0-9A-Za-z_-]{20,}"),
    _token("GOCSPX-", "[0-9A-Za-z_-]{20,}"),
    _token("gh[pousr]_", "[A-Za-z0-9]{20,}", width=4),
    _token("github_pat_", "[A-Za-z0-9_]{20,}"),
    _token("gl", "(?:pat|dt|rt|ptt|cbt|ft|soat|imt|agent|oas|ffct)-[0-9A-Za-z_.-]{20,}"),
    _token("npm_", "[A-Za-z0-9]{30,}"),
    _token("pypi-AgE", "[A-Za-z0-9_-]{50,}"),
    _token("xox", r"(?:[abposre]|e\.xox[bp])-[A-Za-z0-9-]{8,}"),
    _token("xapp-", "[0-9]-[A-Za-z0-9-]{8,}"),
    _Rule(
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{8}",
        (r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<path>[A-Za-z0-9+/_-]{8,})",),
        _group("path"),
    ),
    _Rule(
        r"discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20}",
        (r"discord(?:app)?\.com/api/webhooks/[0-9]+/(?P<path>[A-Za-z0-9_-]{20,})",),
        _group("path"),
    ),
    # Telegram bot tokens: 5-16 digits, ':A', about 34 more (the digits are found back from ':A').
    _Rule(
        "[0-9]{5}:A[A-Za-z0-9_-]{30}",
        (r":A[A-Za-z0-9_-]{30,40}(?![A-Za-z0-9_-])",),
        _telegram_span,
    ),
    _token("sk_", "(?:live|test|prod)_[A-Za-z0-9]{10,}"),  # Stripe secret and restricted keys
    _token("rk_", "(?:live|test|prod)_[A-Za-z0-9]{10,}"),
    _token("whsec_", "[A-Za-z0-9+/=]{20,}"),
    # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-); a digit keeps out words like sk-learn-...
    _token("sk-", "(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}", "[A-Za-z0-9_-]{20}"),
    _token("hf_", "[A-Za-z0-9]{20,}"),
    _token("api_org_", "[A-Za-z0-9]{20,}"),
    _token("dapi", "[0-9a-f]{32}(?![0-9a-f])", "[0-9a-f]{32}"),
    _token(r"SG\.", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    _token("eyJ", r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),  # JWTs
    _Rule(
        r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2}",
        (r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9-])",),
        _email_span,
        EMAIL_MASK,
    ),
)


class _Gates:
    """Which rules may match a text, found in one pass (RE2's set; Python's ``re`` without it)."""

    def __init__(self, gates: Sequence[str]) -> None:
        gates = [_open_counts(gate) for gate in gates]
        self._set: Any = None
        self._fallback: list[re.Pattern[str]] = []
        try:
            import re2
        except ImportError:
            self._fallback = [re.compile(gate) for gate in gates]
            return
        self._set = re2.Set.SearchSet(re2.Options())
        for gate in gates:
            self._set.Add(gate)
        self._set.Compile()

    def passed(self, text: str) -> list[int]:
        """Indices of the gates ``text`` passes, in rule order."""
        if self._set is None:
            return [i for i, gate in enumerate(self._fallback) if gate.search(text)]
        found = self._set.Match(text.encode("utf-8", "surrogatepass"))  # None when none passed
        return sorted(found) if found else []


def _open_counts(gate: str) -> str:
    """``gate`` with its counted repeats made open (``x{20,}`` -> ``x+``): it matches wherever it
    did (a gate only has to pass every text its rule can match), and the set compiles in 1 ms, not 4."""
    return _COUNTED.sub(lambda m: "*" if m.group(1) == "0" else "+", gate)


_COUNTED = re.compile(r"(?<!\\)\{(\d+)(?:,\d*)?\}")
_GATES = _Gates([rule.gate for rule in _RULES])


def _apply(rule: _Rule, text: str) -> str:
    for pattern in rule.patterns:
        pieces: list[str] = []
        end = 0
        for match in pattern.finditer(text):
            where = rule.span(text, match)
            if where is None or where[0] < end:
                continue
            pieces += (text[end : where[0]], rule.mask)
            end = where[1]
        if pieces:
            pieces.append(text[end:])
            text = "".join(pieces)
    return text


def _one_pass(text: str) -> str:
    for index in _GATES.passed(text):
        text = _apply(_RULES[index], text)
    return text


def _settle(text: str) -> str:
    """Run each line that holds a mask again until it no longer changes."""
    pieces: list[str] = []
    done = 0
    for found in _MASKS.finditer(text):
        if found.start() < done:
            continue
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.end())
        end = len(text) if end < 0 else end
        line = text[start:end]
        for _ in range(_MAX_PASSES):
            again = _one_pass(line)
            if again == line:
                break
            line = again
        pieces += (text[done:start], line)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _redact_chunk(chunk: str) -> str:
    out = _one_pass(chunk)
    return chunk if out == chunk else _settle(out)


def _chunks(text: str) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = text.find("\n", start + _CHUNK_CHARS)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def redact(text: str) -> str:
    """Replace secrets and e-mail addresses in ``text`` with placeholders."""
    if not text:
        return text
    if "PRIVATE KEY" in text:
        text = _private_key_block().sub(PRIVATE_KEY_MASK, text)
    if len(text) > _CHUNK_CHARS:
        return "".join([_redact_chunk(chunk) for chunk in _chunks(text)])
    out = _redact_chunk(text)
    if 40 <= len(out) <= 108 and "\n" not in out.rstrip("\r\n"):
        key_body = _KEY_BODY_LINE.fullmatch(out)
        if key_body:
            return key_body.group(1) + MASK + key_body.group(2)
    return out
