"""Credential shapes of files and URLs that the scrub's key/value rules do not see
(`ingest.rules.scrub`, docs/ARCHITECTURE.md §3 rule 8): a PuTTY key's `Private-Lines:`, the tail
of a PEM body pasted without its header, signed-URL signatures and `?auth=`/`?key=`/`?code=`
values, `.npmrc` `:_authToken=`, a YAML block scalar after a password key (`password: >-`),
kubeconfig's `client-key-data:`, a JWT whose parts are split by spaces or line breaks, and base64
that decodes to a secret (`base64_rule`, given the scrub to look with).

Each pattern is linear (possessive runs, line-bounded alternatives) and runs only when a literal
its matches need is in the text; the base64 rule, which has none, runs a cheap check per run.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from ingest.rules.scrub_tokens import NOT_MARKED, Rule

__all__ = ["SHAPE_RULES", "base64_rule"]

_B64_LINE = r"[A-Za-z0-9+/]"
_WHOLE_LINE = _B64_LINE + r"++={0,2}(?=\r?\n|$)"  # a line of nothing but base64


def _accept_pem_tail(m: re.Match[str]) -> str | None:
    """Wrapped base64 of key material: full lines of one width, each holding an upper-case and
    a lower-case letter and a digit (random base64 does; hex digests and words do not); the
    first of its run (not under a header or another base64 line: a certificate's body is
    left), and not the body of a certificate or public key whose END line follows."""
    before = m.string[max(0, m.start() - 100) : m.start()].rstrip("\r\n").rsplit("\n", 1)[-1]
    if before.endswith("-----") or _FULL_LINE.fullmatch(before):
        return None
    lines = [line.rstrip("\r") for line in m.group("secret").split("\n")]
    full = [line for line in lines if not line.startswith("-----")]
    if len({len(line) for line in full[:-1]}) > 1:
        return None
    if not all(_RANDOM.search(line) for line in full if len(line) >= 40):
        return None
    end = m.group("end")
    return None if end is not None and "PRIVATE" not in end.upper() else "private_key"


_FULL_LINE = re.compile(_B64_LINE + r"{40,}={0,2}")
_RANDOM = re.compile(r"(?=.*[A-Z])(?=.*[a-z])(?=.*[0-9])")

# `?sig=…` (Azure SAS), `X-Amz-Signature=`, `?auth=`, `?key=`, an OAuth `?code=`: a URL's query
# value under a name that carries a credential. `?token=`, `?access_token=` and `?api_key=` are
# the key/value rule's.
_QUERY_KINDS = {
    "sig": "url_signature",
    "signature": "url_signature",
    "x-amz-signature": "url_signature",
    "x-goog-signature": "url_signature",
    "x-amz-security-token": "token",
    "auth": "token",
    "key": "api_key",
    "code": "oauth_code",
}


def _accept_query(m: re.Match[str]) -> str | None:
    value = m.group("secret")
    if len(value) < 8 or (value.isalpha() and len(value) < 16):
        return None  # `?key=value`, `?code=python`: a word, not a credential
    return _QUERY_KINDS[m.group("key").lower()]


def _accept_yaml_block(m: re.Match[str]) -> str | None:
    return "password" if "pass" in m.group("key").lower() or "pw" in m.group("key") else "secret"


# A JWT's parts with blanks or line breaks between them (`eyJ… .\neyJ… .\n…`); the strict
# shape is `scrub_tokens`'s. The header and the payload both open `eyJ` (`{"`).
_GAP = r"[ \t\r\n]*+"
_JWT_SPLIT = (
    r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{10,}+" + _GAP + r"\.?" + _GAP
    + r"eyJ[A-Za-z0-9_\-]{10,}+(?:" + _GAP + r"\." + _GAP + r"[A-Za-z0-9_\-]{8,}+)?"
)  # fmt: skip

SHAPE_RULES: tuple[Rule, ...] = (
    # PuTTY's .ppk: the private blob follows `Private-Lines: N`.
    Rule(
        "private_key",
        re.compile(
            r"Private-Lines:[ \t]*[0-9]+[ \t]*\r?\n"
            + NOT_MARKED
            + rf"(?P<secret>{_WHOLE_LINE}(?:\r?\n{_WHOLE_LINE})*+)",
            re.IGNORECASE,
        ),
        needles=("private-lines:",),
    ),
    # The second half of a PEM body, sent alone: two or more full lines, a last shorter one
    # that is not a lower-case word, and maybe its END line.
    Rule(
        "private_key",
        re.compile(
            r"(?:(?<=\n)|^)(?P<secret>" + _B64_LINE + r"{40,}+(?:\r?\n" + _B64_LINE + r"{40,}+)++"
            r"(?:\r?\n[a-z]*+[A-Z0-9+/=]" + _B64_LINE + r"*+={0,2}(?=\r?\n|$))?"
            r"(?:\r?\n(?P<end>-----END [A-Z0-9 ]*-----))?)",
            re.IGNORECASE,
        ),
        _accept_pem_tail,
        needles=("\n",),
    ),
    Rule(
        "url_signature",
        re.compile(
            r"[?&;](?P<key>"
            + "|".join(_QUERY_KINDS)
            + r")="
            + NOT_MARKED
            + r"(?P<secret>[^\s&#\"'<>]++)",
            re.IGNORECASE,
        ),
        _accept_query,
        needles=tuple(f"{k}=" for k in _QUERY_KINDS),
    ),
    # `.npmrc`: `//registry.npmjs.org/:_authToken=…`, `_auth=` (base64 of user:pass), `_password=`.
    Rule(
        "npm_token",
        re.compile(
            r"(?<![A-Za-z0-9])_(?:authToken|auth|password)[ \t]*=[ \t]*"
            + NOT_MARKED
            + r"(?P<secret>[^\s\"']++)",
            re.IGNORECASE,
        ),
        needles=("_auth", "_password"),
    ),
    # YAML block scalars: `password: >-` / `|` and the value on the indented lines below.
    Rule(
        "password",
        re.compile(
            r"(?<![A-Za-z0-9_.\-])(?P<key>(?:[A-Za-z0-9]++[_.\-])*+(?:[A-Za-z0-9]*?(?:password"
            r"|passwd)|passphrase|pwd|secret|token|apikey|(?<=[_\-])key))"
            r"[\"']?:[ \t]*[>|][+\-]?[1-9]?[ \t]*\r?\n"
            r"(?P<indent>[ \t]++)"
            + NOT_MARKED
            + r"(?P<secret>[^\s][^\n]*+(?:\n(?P=indent)[^\n]++)*+)",  # lines as indented, or more
            re.IGNORECASE,
        ),
        _accept_yaml_block,
        needles=("pass", "pwd", "secret", "token", "key"),
    ),
    # kubeconfig: a client's private key, base64 of its PEM.
    Rule(
        "private_key",
        re.compile(
            r"client-key-data[\"']?:[ \t]*[\"']?"
            + NOT_MARKED
            + r"(?P<secret>[A-Za-z0-9+/]{16,}+={0,2})",
            re.IGNORECASE,
        ),
        needles=("client-key-data",),
    ),
    Rule("jwt", re.compile(_JWT_SPLIT), needles=("eyj",)),
)

# A run of base64 long enough to hold a credential; padded or not.
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/]{16,}+={0,2}(?![A-Za-z0-9+/=_\-])")


def _decoded(run: str) -> str | None:
    """The text `run` is base64 of, when it is printable text; else None."""
    body = run.rstrip("=")
    if len(body) % 4 == 1 or not (any(c.isdigit() for c in body) or not body.islower()):
        return None  # impossible length, or a plain lower-case word (`internationalization`)
    try:
        text = base64.b64decode(body + "=" * (-len(body) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if text.replace("\n", "").replace("\t", "").isprintable() else None


def base64_rule(find: Callable[[str], list[tuple[str, str]]]) -> Rule:
    """Base64 that decodes to text holding a secret (`DB_PASSWORD=…`, a token), by `find`
    (the scrub's findings without this rule): the whole run becomes the secret's kind."""

    def accept(m: re.Match[str]) -> str | None:
        text = _decoded(m.group(0))
        found = find(text) if text is not None else []
        return found[0][0] if found else None

    return Rule("base64_secret", _BASE64, accept)
