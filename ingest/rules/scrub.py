"""Take credentials out of a message body before it is chunked or embedded (docs/ARCHITECTURE.md
§3 rule 8).

Every finding becomes `[redacted:KIND]`. For `key=value` pairs and URL passwords only the secret
part is replaced, so the text still says *that* a password was there. The rules run in order, most
specific first (a PEM block before anything inside it, `token=ghp_…` is named `github_token`
rather than `token`), and no rule matches inside a marker, so scrubbing is idempotent.

Bump `SCRUB_VERSION` whenever a rule changes what is redacted: the collection records it and a
new version re-indexes, so text scrubbed by an older rule set does not linger.

The rules read a normalised view of the body (`ingest.rules.scrub_view`: format characters and
combining marks dropped, NFKC, any space as a space, look-alike and accented letters in a Latin
word read as Latin) and replace the original characters each match covers. Beside the rules here:
self-identifying tokens (`ingest.rules.scrub_tokens`), shapes of files and URLs
(`ingest.rules.scrub_shapes`: PuTTY and headerless PEM bodies, signed URLs, `.npmrc`, YAML block
scalars, kubeconfig, split JWTs), secrets written in prose after the key/value rules
(`ingest.rules.scrub_prose`: "the wifi password is …" in six languages, rule 8b), and last,
base64 that decodes to text holding any of these.

Every body passes here, including hostile ones: each pattern is linear (no two quantifiers can
share the same text), and a rule runs only when a literal its matches need is in the text, so a
1 MB message costs a fraction of a second (`tests/ingest/rules/test_scrub_cost.py` keeps that
bound).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Callable

from ingest.rules.scrub_prose import PROSE_RULES
from ingest.rules.scrub_shapes import SHAPE_RULES, base64_rule
from ingest.rules.scrub_tokens import NOT_MARKED as _NOT_MARKED
from ingest.rules.scrub_tokens import TOKEN_RULES
from ingest.rules.scrub_tokens import Rule as _Rule
from ingest.rules.scrub_view import View, fold

__all__ = ["SCRUB_VERSION", "scrub", "scrub_findings"]

# 3: command lines (`mysql -pX`, `curl -u u:p`, `docker login -p`, `sshpass -p`), Azure keys,
# Telegram, GitLab and DigitalOcean tokens, a bare `Basic`, `pw:`, the word in other languages.
# 4: matched on a normalised view (`ingest.rules.scrub_view`): invisible, full-width, look-alike
# and non-ASCII space characters no longer carry a secret past the rules.
# 5: prose secrets (`ingest.rules.scrub_prose`), the shapes of `ingest.rules.scrub_shapes`, age
# keys, any-case PEM headers, encoded separators (`&#61;`, `%3D`), base64 of a secret, and
# combining marks and accents in a key (issue 46).
SCRUB_VERSION = 5

_MARK = "[redacted:"


def _marker(kind: str) -> str:
    return f"{_MARK}{kind}]"


# --- key/value pairs: `password=…`, `"client_secret": "…"`, `export PGPASSWORD=…`, `?token=…`

# A password key may be glued to a prefix (`PGPASSWORD`, `dbpassword`); the others need a
# separator before them (`DB_PASS`, `MYSQL_PWD`), so `bypass` and `compass` are not keys.
# The word for password in other languages (typed as people type it, some without accents).
# Folded as the view reads them (`contraseña` as `contrasena`).
_PASSWORD_WORDS = tuple(dict.fromkeys(fold(w) for w in (
    "passwort", "kennwort", "mot de passe", "contraseña", "contrasena", "senha", "wachtwoord",
    "пароль", "密码", "密碼", "パスワード", "hasło", "haslo", "lösenord", "passord", "salasana",
    "şifre", "heslo", "adgangskode",
)))  # fmt: skip
_KEYWORDS = (
    r"[A-Za-z0-9]*?(?:password|passwd)|passphrase|pwd|pw|pass|secret|token"
    r"|api[ _\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|client[_\-]?secret"
    r"|account[_\-]?key|shared[_\-]?access[_\-]?key"  # Azure connection strings
    r"|" + "|".join(w.replace(" ", r"[ \t]+") for w in _PASSWORD_WORDS)
)
# Lower-case strings in every key `_KEYWORDS` matches.
_KEY_NEEDLES = ("pass", "pw", "secret", "token", "key", *(w.split()[-1] for w in _PASSWORD_WORDS))
_KEY = r"(?P<key>(?:[A-Za-z0-9]+[_.\-])*(?:" + _KEYWORDS + r"))"
# `=` or `:` as an HTML entity or URL-encoded: `password&#61;…`, `password%3D…`.
_ENCODED_COLON = r"&#0*58;|&#x0*3a;|&colon;|%3a"
_ENCODED_SEPARATOR = r"&#0*61;|&#x0*3d;|&equals;|%3d|" + _ENCODED_COLON
_KEY_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.\-])"
    r"(?P<q>[\"']?)" + _KEY + r"(?P=q)"
    r"[ \t]*(?P<sep>:=|=>|[:=\uff1a]|" + _ENCODED_SEPARATOR + r")[ \t]*" + _NOT_MARKED + r"(?:"
    r"\"" + _NOT_MARKED + r"(?P<dq>[^\"\n]{4,})\""
    r"|'" + _NOT_MARKED + r"(?P<sq>[^'\n]{4,})'"
    r"|(?P<bare>[^\s\"'<>,;&)\]}]+))",
    re.IGNORECASE,
)
# `--password=…`, `--api-key …`: a command line's flag value is never prose.
_FLAG = re.compile(
    r"(?<![A-Za-z0-9_\-])--" + _KEY + r"(?P<sep>=|[ \t]+)" + _NOT_MARKED + r"(?:"
    r"\"" + _NOT_MARKED + r"(?P<dq>[^\"\n]+)\""
    r"|'" + _NOT_MARKED + r"(?P<sq>[^'\n]+)'"
    r"|(?P<bare>(?!-)[^\s\"'<>;&|)]+))",
    re.IGNORECASE,
)
# `my password is:` or `password:` and the value alone on the next line.
_NEXT_LINE = re.compile(
    r"(?<![A-Za-z0-9_.\-])" + _KEY + r"(?:[ \t]+(?:is|was)[ \t]*[:=]?|[ \t]*[:=])[ \t]*\r?\n"
    r"[ \t]*" + _NOT_MARKED + r"(?P<secret>[^\s\"'`]{4,})[ \t]*(?=\r?\n|$)",
    re.IGNORECASE,
)
# `Authorization: Basic …`, `Authorization: Bearer …`: whatever the header carries.
_AUTH_SCHEMES = ("basic", "bearer", "token", "digest", "negotiate", "apikey")
_AUTHORIZATION = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    + _NOT_MARKED
    + r"(?:(?P<scheme>"
    + "|".join(_AUTH_SCHEMES)
    + r")[ \t]+)?"
    + _NOT_MARKED
    + r"(?P<secret>[^\s\"',;]+)",
    re.IGNORECASE,
)

# A password given on a command line to the command's own option: `mysql -u root -pX`,
# `sshpass -p X`, `docker login -u bob -p X`, `curl -u bob:X`. The option counts only after
# its command on the same line (`_Rule.after`), so `use -p to set the port` is left alone.
_QUOTED_OR_BARE = (
    r"(?:\"" + _NOT_MARKED + r"(?P<dq>[^\"\n]+)\"|'" + _NOT_MARKED + r"(?P<sq>[^'\n]+)'"
    r"|" + _NOT_MARKED + r"(?P<bare>[^\s\"'`;&|)]+))"
)


def _command(words: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_.\-/])(?:" + words + r")(?![A-Za-z0-9_.\-])", re.I)


def _option(option: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\S)" + option)  # case matters: `mysql -P` is the port


_MYSQL = _command(r"mysql[a-z]*|mariadb[a-z\-]*")
_SSHPASS = _command(r"sshpass")
_DOCKER_LOGIN = _command(r"(?:docker|podman|nerdctl)[ \t]++login")
_CURL = _command(r"curl")
_GLUED_P = _option(r"-p(?P<sep>)" + _QUOTED_OR_BARE)
_SSHPASS_P = _option(r"-p(?P<sep>[ \t]*+)" + _QUOTED_OR_BARE)
_LOGIN_P = _option(r"(?:-p|--password)(?P<sep>[ \t]++|=)" + _QUOTED_OR_BARE)
_CURL_USER = _option(
    # The user part holds no `[`: a marker's own `:` (`[redacted:…]`) is not a user's.
    r"(?:-u|--user)(?:[ \t]*+|=)[\"']?[^\s:\"'\[]*:" + _NOT_MARKED + r"(?P<secret>[^\s\"']+)"
)

# Words that follow `password:` in prose or stand for "no value" in a config.
_PROSE_VALUES = (
    "required optional none null nil empty unset undefined default true false yes no ok "
    "done same below above here there hidden redacted missing unknown invalid incorrect "
    "wrong expired changed reset please thanks"
)
_NOT_A_VALUE = frozenset(_PROSE_VALUES.split())
_END_OF_LINE = re.compile(r"[ \t]*(?:\r?\n|$)")


def _key_kind(key: str) -> str:
    k = re.sub(r"[\s\-]+", "_", key.lower())
    if k.endswith(("password", "passwd", "passphrase", "pwd", "pw", "pass", *_FOREIGN_KEYS)):
        return "password"
    if k.endswith(("accountkey", "account_key", "sharedaccesskey", "shared_access_key")):
        return "azure_key"
    if k.endswith("secret_access_key") and "aws" in k:
        return "aws_secret"
    if k.endswith(("api_key", "apikey")):
        return "api_key"
    if k.endswith("token"):
        return "token"
    return "secret"


_FOREIGN_KEYS = tuple(w.replace(" ", "_") for w in _PASSWORD_WORDS)


def _looks_secret(value: str) -> bool:
    """An unquoted value that is a credential rather than a word of prose (`password: required`).

    Real secrets carry a digit or a symbol, or are long; a short plain word is prose.
    """
    if len(value) < 6:
        return False
    return len(value) >= 16 or any(not c.isalpha() for c in value)


def _is_value(value: str) -> bool:
    return len(value) >= 4 and value.lower().rstrip(".!") not in _NOT_A_VALUE


def _accept_key_value(m: re.Match[str]) -> str | None:
    """`key=value` is never prose; `key: value` is when the value is a plain word (`password:
    required`) unless a password's value is the last word of its line (`password: hunter`)."""
    bare = m.group("bare")
    if bare is not None and m.group("key").lower() == "pwd" and bare.startswith(("/", "~")):
        return None  # `PWD=/home/alice`: the shell's working directory
    if bare is None or _looks_secret(bare):
        return _key_kind(m.group("key"))
    kind = _key_kind(m.group("key"))
    sep = m.group("sep")
    colon = sep in (":", "\uff1a") or re.fullmatch(_ENCODED_COLON, sep, re.IGNORECASE)
    if not colon and _is_value(bare):  # also a full-width or encoded colon
        return kind
    word = bare.rstrip(".!")
    last_on_line = _END_OF_LINE.match(m.string, m.end() - len(bare) + len(word)) is not None
    if kind == "password" and word.isalpha() and _is_value(word) and last_on_line:
        return kind
    return None


def _accept_flag(m: re.Match[str]) -> str | None:
    bare = m.group("bare")
    if bare is not None and m.group("sep") != "=" and not _looks_secret(bare):
        return None  # `--token to pass it`: a space-separated value must look like one
    return _key_kind(m.group("key"))


def _accept_command_line(m: re.Match[str]) -> str | None:
    bare = m.group("bare")
    if bare is not None and m.group("sep").strip(" \t") == "" and m.group("sep"):
        # `sshpass -p is insecure`: a space-separated value must look like one.
        return "password" if _looks_secret(bare) else None
    return "password"


def _accept_basic(m: re.Match[str]) -> str | None:
    """`Basic` + base64 of `user:password` (`the Basic plan` is prose): it must decode so."""
    value = m.group("secret")
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        text = decoded.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return "basic_auth" if ":" in text and text.isprintable() else None


def _accept_next_line(m: re.Match[str]) -> str | None:
    return _key_kind(m.group("key")) if _is_value(m.group("secret")) else None


def _accept_authorization(m: re.Match[str]) -> str | None:
    scheme = (m.group("scheme") or "").lower()
    secret = m.group("secret")
    if not scheme and (secret.lower() in _AUTH_SCHEMES or not _looks_secret(secret)):
        return None  # `Authorization: required`, or `Authorization: Bearer [redacted:…]` again
    return {"basic": "basic_auth", "bearer": "bearer_token"}.get(scheme, "token")


def _accept_bearer(m: re.Match[str]) -> str | None:
    """`Bearer` + a token: long, or short with a digit (`the bearer of bad news` is prose)."""
    token = m.group(0)
    if len(token) >= 16 or (len(token) >= 6 and any(c.isdigit() for c in token)):
        return "bearer_token"
    return None


def _secret_group(m: re.Match[str]) -> str | int:
    """The group holding the secret: a named part of the match, else all of it."""
    for name in ("secret", "dq", "sq", "bq", "uq", "bare"):
        if name in m.re.groupindex and m.group(name) is not None:
            return name
    return 0


_PLAIN_RULES: tuple[_Rule, ...] = (
    # Multi-line, BEGIN … END, first: nothing inside it may be reported as another kind.
    _Rule(
        "private_key",
        re.compile(
            # In any case (`-----begin rsa private key-----`).
            r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            # A cut paste (no END) loses its header lines and base64 lines, not the prose after.
            # The END search stops at the next BEGIN, so many BEGINs cost linear time.
            r"(?:(?:(?!-----BEGIN ).)*?-----END (?P=label)-----"
            r"|(?:\s*(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]*={1,2}|[A-Za-z\-]+: [^\n]*))*)",
            re.DOTALL | re.IGNORECASE,
        ),
        needles=("-----begin ",),
    ),
    # The password runs to the authority's last `@` (`bob:p@ss!word@db`); the user may be empty.
    _Rule(
        "url_password",
        re.compile(
            r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#\[\]]*:"
            + _NOT_MARKED
            + r"(?P<secret>[^\s/?#]+)@"
        ),
        needles=("://",),
    ),
    _Rule(
        "slack_webhook",
        re.compile(
            r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/"
            + _NOT_MARKED
            + r"(?P<secret>[A-Za-z0-9_/\-]{10,})"
        ),
        needles=("hooks.slack.com/",),
    ),
    _Rule(
        "discord_webhook",
        re.compile(
            r"https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/"
            + _NOT_MARKED
            + r"(?P<secret>[A-Za-z0-9_\-]{20,})"
        ),
        needles=("/api/webhooks/",),
    ),
    *TOKEN_RULES,
    *SHAPE_RULES,
    _Rule("authorization", _AUTHORIZATION, _accept_authorization, ("authorization",)),
    _Rule(
        "bearer_token",
        re.compile(r"(?<=\bBearer )" + _NOT_MARKED + r"[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE),
        _accept_bearer,
        ("bearer ",),
    ),
    _Rule(
        "basic_auth",
        re.compile(
            r"(?<![A-Za-z0-9_\-])Basic[ \t]+"
            + _NOT_MARKED
            + r"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
            re.IGNORECASE,
        ),
        _accept_basic,
        ("basic",),
    ),
    _Rule("password", _GLUED_P, _accept_command_line, ("mysql", "mariadb"), _MYSQL),
    _Rule("password", _SSHPASS_P, _accept_command_line, ("sshpass",), _SSHPASS),
    _Rule("password", _LOGIN_P, _accept_command_line, ("login",), _DOCKER_LOGIN),
    _Rule("password", _CURL_USER, None, ("curl",), _CURL),
    _Rule("password", _FLAG, _accept_flag, ("--",)),
    _Rule("secret", _KEY_VALUE, _accept_key_value, _KEY_NEEDLES),
    _Rule("secret", _NEXT_LINE, _accept_next_line, _KEY_NEEDLES),
    *PROSE_RULES,
)
# Last: base64 whose text holds what the rules above find (`DB_PASSWORD=…`, a token).
_RULES = (*_PLAIN_RULES, base64_rule(lambda text: _run(text, _PLAIN_RULES)[1]))


def _after_command(command: re.Pattern[str], text: str) -> Callable[[int], bool]:
    """Whether a position follows `command` on its line: one pass over the text, then a
    lookup per match (scanning back from each match would be quadratic in a long line)."""
    ends = [m.end() for m in command.finditer(text)]
    breaks = [m.start() for m in re.finditer("\n", text)]

    def follows(position: int) -> bool:
        i = bisect.bisect_right(ends, position) - 1
        if i < 0:
            return False
        j = bisect.bisect_left(breaks, ends[i])
        return j == len(breaks) or breaks[j] >= position

    return follows


def _apply(rule: _Rule, text: str, view: View, found: list[tuple[str, str]]) -> str:
    """`text` with each of the rule's matches on `view` replaced in the original characters
    it covers (`ingest.rules.scrub_view`)."""
    seen = view.text
    follows = _after_command(rule.after, seen) if rule.after is not None else None
    out: list[str] = []
    done = 0
    for m in rule.pattern.finditer(seen):
        if follows is not None and not follows(m.start()):
            continue
        kind = rule.accept(m) if rule.accept is not None else rule.kind
        if kind is None:
            continue
        # Keep what surrounds the secret (key, quotes, URL user and host); replace the rest.
        start, end = view.span(*m.span(_secret_group(m)))
        found.append((kind, text[start:end]))
        out.append(text[done:start] + _marker(kind))
        done = end
    return "".join(out) + text[done:] if out else text


def _run(text: str, rules: tuple[_Rule, ...]) -> tuple[str, list[tuple[str, str]]]:
    found: list[tuple[str, str]] = []
    view = View.of(text)
    lower = view.text.lower()
    for rule in rules:
        if rule.needles and not any(n in lower for n in rule.needles):
            continue
        before = len(found)
        text = _apply(rule, text, view, found)
        if len(found) > before:
            view = View.of(text)
            lower = view.text.lower()
    return text, found


def scrub(text: str) -> str:
    """`text` with every credential replaced by `[redacted:KIND]`; idempotent."""
    return _run(text, _RULES)[0]


def scrub_findings(text: str) -> list[tuple[str, str]]:
    """`(kind, secret text)` for each credential `scrub` would replace, in rule order."""
    return _run(text, _RULES)[1]
