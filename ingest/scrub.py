"""Take credentials out of a message body before it is chunked or embedded (DESIGN.md §3 rule 8).

Every finding becomes `[redacted:KIND]`. For `key=value` pairs and URL passwords only the secret
part is replaced, so the text still says *that* a password was there. The rules run in order, most
specific first (a PEM block before anything inside it, `token=ghp_…` is named `github_token`
rather than `token`), and no rule matches inside a marker, so scrubbing is idempotent.

Bump `SCRUB_VERSION` whenever a rule changes what is redacted: the collection records it and a
new version re-indexes, so text scrubbed by an older rule set does not linger.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SCRUB_VERSION", "scrub", "scrub_findings"]

SCRUB_VERSION = 1

_MARK = "[redacted:"
_NOT_MARKED = r"(?!\[redacted:)"


def _marker(kind: str) -> str:
    return f"{_MARK}{kind}]"


@dataclass(frozen=True)
class _Rule:
    """A pattern; the group named `secret` (or the whole match) is what gets replaced."""

    kind: str
    pattern: re.Pattern[str]
    # Returns the kind for this match, or None to leave it alone (e.g. prose, short values).
    accept: Callable[[re.Match[str]], str | None] | None = None


def _token(kind: str, regex: str, flags: int = 0) -> _Rule:
    """A self-identifying token: a known prefix, not glued to a preceding word."""
    return _Rule(kind, re.compile(r"(?<![A-Za-z0-9_\-])" + regex + r"(?![A-Za-z0-9_\-])", flags))


# --- key/value pairs: `password=…`, `"client_secret": "…"`, `export API_KEY=…`, `?token=…`

_KEYWORDS = (
    r"password|passwd|passphrase|secret|token|api[_\-]?key|apikey|access[_\-]?key"
    r"|secret[_\-]?key|private[_\-]?key|client[_\-]?secret"
)
_KEY_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.\-])"
    r"(?P<q>[\"']?)(?P<key>(?:[A-Za-z0-9]+[_.\-])*(?:" + _KEYWORDS + r"))(?P=q)"
    r"[ \t]*(?::=|=>|[:=])[ \t]*" + _NOT_MARKED + r"(?:"
    r"\"" + _NOT_MARKED + r"(?P<dq>[^\"\n]{4,})\""
    r"|'" + _NOT_MARKED + r"(?P<sq>[^'\n]{4,})'"
    r"|(?P<bare>[^\s\"'<>,;&)\]}]+))",
    re.IGNORECASE,
)


def _key_kind(key: str) -> str:
    k = key.lower().replace("-", "_")
    if k.endswith(("password", "passwd", "passphrase")):
        return "password"
    if k.endswith("secret_access_key") and "aws" in k:
        return "aws_secret"
    if k.endswith(("api_key", "apikey")):
        return "api_key"
    if k.endswith("token"):
        return "token"
    return "secret"


def _looks_secret(value: str) -> bool:
    """An unquoted value that is a credential rather than a word of prose (`password: required`).

    Real secrets carry a digit or a symbol, or are long; a short plain word is prose.
    """
    if len(value) < 6:
        return False
    return len(value) >= 16 or any(not c.isalpha() for c in value)


def _accept_key_value(m: re.Match[str]) -> str | None:
    bare = m.group("bare")
    if bare is not None and not _looks_secret(bare):
        return None
    return _key_kind(m.group("key"))


def _secret_group(m: re.Match[str]) -> str | int:
    """The group holding the secret: a named part of the match, else all of it."""
    for name in ("secret", "dq", "sq", "bare"):
        if name in m.re.groupindex and m.group(name) is not None:
            return name
    return 0


_RULES: tuple[_Rule, ...] = (
    # Multi-line, BEGIN … END, first: nothing inside it may be reported as another kind.
    _Rule(
        "private_key",
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            # A cut paste (no END) loses its header lines and base64 lines, not the prose after.
            # The END search stops at the next BEGIN, so many BEGINs cost linear time.
            r"(?:(?:(?!-----BEGIN ).)*?-----END (?P=label)-----"
            r"|(?:\s*(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]*={1,2}|[A-Za-z\-]+: [^\n]*))*)",
            re.DOTALL,
        ),
    ),
    _Rule(
        "url_password",
        re.compile(
            r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#\[\]]+:"
            + _NOT_MARKED
            + r"(?P<secret>[^\s/@?#]+)@"
        ),
    ),
    _token("jwt", r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*"),
    _token("matrix_token", r"(?:syt|syr)_[A-Za-z0-9_\-]{20,}"),
    # MAS: <prefix>_<30 random>_<6 crc>; an identifier like `mat_settings_x` has no 20-run.
    _token("matrix_token", r"(?:mat|mct|mar|mcr)_[A-Za-z0-9]{20,}(?:_[A-Za-z0-9]{4,8})?"),
    # Pre-2021 Synapse macaroons, base64 of "0010location".
    _token("matrix_token", r"MDAx[A-Za-z0-9+/_\-]{40,}={0,2}"),
    _token("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    _token("github_token", r"github_pat_[A-Za-z0-9_]{30,}"),
    _token("gitlab_token", r"glpat-[A-Za-z0-9_\-]{20,}"),
    _token("slack_token", r"xox[abprse]-[A-Za-z0-9\-]{10,}"),
    _token("aws_access_key", r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
    _token("stripe_key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    # `sk-` alone needs a 20-character run without hyphens: `sk-learn-is-great` is prose.
    _token("api_key", r"sk-(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{20,}|[A-Za-z0-9]{20,})"),
    _token("google_api_key", r"AIza[A-Za-z0-9_\-]{35}"),
    _Rule(
        "bearer_token",
        re.compile(r"(?<=\bBearer )" + _NOT_MARKED + r"[A-Za-z0-9\-._~+/]{16,}=*", re.IGNORECASE),
    ),
    _Rule("secret", _KEY_VALUE, _accept_key_value),
)


def _apply(rule: _Rule, text: str, found: list[tuple[str, str]]) -> str:
    def sub(m: re.Match[str]) -> str:
        kind = rule.accept(m) if rule.accept is not None else rule.kind
        if kind is None:
            return m.group(0)
        group = _secret_group(m)
        found.append((kind, m.group(group)))
        # Keep what surrounds the secret (key, quotes, URL user and host); replace the rest.
        start, end = m.span(group)
        return text[m.start() : start] + _marker(kind) + text[end : m.end()]

    return rule.pattern.sub(sub, text)


def _run(text: str) -> tuple[str, list[tuple[str, str]]]:
    found: list[tuple[str, str]] = []
    for rule in _RULES:
        text = _apply(rule, text, found)
    return text, found


def scrub(text: str) -> str:
    """`text` with every credential replaced by `[redacted:KIND]`; idempotent."""
    return _run(text)[0]


def scrub_findings(text: str) -> list[tuple[str, str]]:
    """`(kind, secret text)` for each credential `scrub` would replace, in rule order."""
    return _run(text)[1]
