"""The scrub's rule record and its self-identifying tokens: provider keys and tokens that carry
their own prefix (`ghp_`, `glrt-`, `dop_v1_`, `AKIA`, a Telegram bot's `<id>:AA…`), each a
linear pattern with the literals a match needs (`ingest.rules.scrub`, docs/ARCHITECTURE.md §3 rule
8).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["NOT_MARKED", "TOKEN_RULES", "Rule", "token"]

NOT_MARKED = r"(?!\[redacted:)"


@dataclass(frozen=True)
class Rule:
    """A pattern; the group named `secret` (or the whole match) is what gets replaced."""

    kind: str
    pattern: re.Pattern[str]
    # Returns the kind for this match, or None to leave it alone (e.g. prose, short values).
    accept: Callable[[re.Match[str]], str | None] | None = None
    # Lower-case strings one of which every match holds: without them the pass is skipped,
    # so a long message costs a few substring searches, not one regex pass per rule.
    needles: tuple[str, ...] = ()
    # A command (`mysql`) the match counts only after, on the same line.
    after: re.Pattern[str] | None = None


def token(kind: str, regex: str, *needles: str) -> Rule:
    """A self-identifying token: a known prefix, not glued to a preceding word."""
    pattern = re.compile(r"(?<![A-Za-z0-9_\-])" + regex + r"(?![A-Za-z0-9_\-])")
    return Rule(kind, pattern, needles=needles)


# GitLab's token prefixes: personal, OAuth app, deploy, runner, CI job, trigger, feed, mail,
# agent, SCIM, feature flags.
GITLAB_PREFIXES = (
    "pat",
    "oas",
    "dt",
    "rt",
    "rtr",
    "cbt",
    "ptt",
    "ft",
    "imt",
    "agent",
    "soat",
    "ffct",
)

# Most specific first: `ingest.rules.scrub` runs them after the webhooks, before key/value pairs.
TOKEN_RULES: tuple[Rule, ...] = (
    # age: `AGE-SECRET-KEY-1` and 58 bech32 characters.
    token("age_secret_key", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Za-hj-np-z]{50,}", "age-secret-key-1"),
    token("jwt", r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*", "eyj"),
    token("matrix_token", r"(?:syt|syr)_[A-Za-z0-9_\-]{20,}", "syt_", "syr_"),
    # MAS: <prefix>_<30 random>_<6 crc>; an identifier like `mat_settings_x` has no 20-run.
    token(
        "matrix_token",
        r"(?:mat|mct|mar|mcr)_[A-Za-z0-9]{20,}(?:_[A-Za-z0-9]{4,8})?",
        "mat_",
        "mct_",
        "mar_",
        "mcr_",
    ),
    # Pre-2021 Synapse macaroons, base64 of "0010location".
    token("matrix_token", r"MDAx[A-Za-z0-9+/_\-]{40,}={0,2}", "mdax"),
    token("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}", "gh"),
    token("github_token", r"github_pat_[A-Za-z0-9_]{30,}", "github_pat_"),
    token(
        "gitlab_token",
        r"(?:gl(?:" + "|".join(GITLAB_PREFIXES) + r")-|GR1348941)[A-Za-z0-9_\-]{20,}",
        *(f"gl{p}-" for p in GITLAB_PREFIXES),
        "gr1348941",
    ),
    token("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}", "_v1_"),
    # <bot id>:<35 characters>, the secret half always opening with `AA`.
    token("telegram_bot_token", r"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}", ":aa"),
    token("slack_token", r"xox[abprse]-[A-Za-z0-9\-]{10,}", "xox"),
    token("aws_access_key", r"(?:AKIA|ASIA)[A-Z0-9]{16}", "akia", "asia"),
    token("stripe_key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", "_live_", "_test_"),
    token("webhook_secret", r"whsec_[A-Za-z0-9+/]{20,}={0,2}", "whsec_"),
    # `sk-` alone needs a 20-character run without hyphens: `sk-learn-is-great` is prose.
    token(
        "api_key", r"sk-(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{20,}|[A-Za-z0-9]{20,})", "sk-"
    ),
    token("google_api_key", r"AIza[A-Za-z0-9_\-]{35}", "aiza"),
    token("google_oauth_token", r"ya29\.[A-Za-z0-9_\-]{20,}", "ya29."),
    token("npm_token", r"npm_[A-Za-z0-9]{30,}", "npm_"),
    # A PyPI token is a macaroon whose base64 always opens with `AgE`.
    token("pypi_token", r"pypi-AgE[A-Za-z0-9_\-]{30,}", "pypi-"),
    token("huggingface_token", r"hf_[A-Za-z0-9]{30,}", "hf_"),
    token("sendgrid_key", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", "sg."),
    token("twilio_key", r"SK[0-9a-fA-F]{32}", "sk"),
    # base64 of the bot's user id, a 6-character timestamp, an HMAC.
    token(
        "discord_token", r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}", "."
    ),
)
