"""ingest.scrub: credentials never reach a chunk or an embedding (DESIGN.md §3 rule 8).

The secrets below are made up for the tests; they only have the shape of real ones.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.scrub import SCRUB_VERSION, scrub, scrub_findings

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MnTmcEWpmNBFabcd\n"
    "Xq2yPbuKnB0cXwJ8o1b5+Mf3dQ==\n"
    "-----END RSA PRIVATE KEY-----"
)

# (kind, secret, text around it); the text holds the secret at `{}`.
SECRETS = [
    ("matrix_token", "syt_YWxpY2U_kXlJkRkUsTWHYmqpOhTB_0ddJdm", "use {} for the bot"),
    ("matrix_token", "syr_YWxpY2U_QzRfTJkNwXaRKeHLyLzf_1Pzxsv", "refresh with {}"),
    ("matrix_token", "mat_Wq9sT4mEuJ3zLxR7vB2nK8pYcA5dHf0g_3kQx7P", "MAS gave {} today"),
    ("matrix_token", "mct_Zr8uW2pLqN6xV4tJ0cB9mK3sYhE7aD1f_9aB3cD", "compat {}"),
    ("github_token", "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "export GH={}"),
    ("github_token", "gho_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "oauth {} ok"),
    ("github_token", "ghu_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "user-to-server {}"),
    ("github_token", "ghs_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "app {}"),
    ("github_token", "ghr_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "refresh {}"),
    (
        "github_token",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU",
        "fine-grained: {}",
    ),
    ("gitlab_token", "glpat-x9YzAbC1dEfGhIjKlMnO", "CI uses {}"),
    ("slack_token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack {}"),
    ("slack_token", "xoxp-123456789012-1234567890123-AbCdEfGhIj", "user token {}"),
    ("aws_access_key", "AKIAIOSFODNN7EXAMPLE", "key id {} in region x"),
    ("aws_access_key", "ASIAY34FZKBOKMUTVV7A", "session key {}"),
    ("aws_secret", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = {}"),
    ("aws_secret", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY={}"),
    ("api_key", "sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "openai {}"),
    ("api_key", "sk-proj-Ab3dEf6hIj9kLm2nOp5q_Rs8tUv1-wXy4zAbCd", "project key {}"),
    ("api_key", "sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AbCdEfGh_AA", "claude {}"),
    ("google_api_key", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "maps {}"),
    ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe {}"),
    ("stripe_key", "rk_live_4eC39HqLyjWDarjtT1zdp7dc", "restricted {}"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "cookie: {}.",
    ),
    ("private_key", PEM, "here is the key\n{}\nthanks"),
    ("url_password", "hunter22", "clone https://alice:{}@git.example.org/repo.git"),
    ("url_password", "s3cret", "DATABASE_URL=postgres://muninn:{}@db:5432/muninn"),
    ("password", "hunter2", "password={}"),
    ("password", "hunter2!", "passwd: {}"),
    ("password", "correct horse battery", 'password: "{}"'),
    ("password", "Tr0ub4dor&3", "db_password = '{}'"),
    ("token", "abc123def456", "https://example.org/api?access_token={}&x=1"),
    ("token", "f00dfeedcafe", "token={}"),
    ("secret", "topsecret99", "secret={}"),
    ("secret", "9f8e7d6c5b4a", '{{"client_secret": "{}"}}'),
    ("secret", "R3g1strat10nSecret", "registration_shared_secret: {}"),
    ("api_key", "abcd1234efgh", "export API_KEY={}"),
    ("api_key", "1234567890", "apikey: {}"),
    ("bearer_token", "abcdefghijklmnop1234", "Authorization: Bearer {}"),
]


@pytest.mark.parametrize(("kind", "secret", "template"), SECRETS)
def test_scrub_secret_kind(kind: str, secret: str, template: str) -> None:
    """Each kind of credential is replaced by a marker naming it; the secret text is gone."""
    text = template.format(secret)
    out = scrub(text)
    assert secret not in out
    assert f"[redacted:{kind}]" in out
    assert (kind, secret) in scrub_findings(text)


def test_scrub_keeps_context_around_secret() -> None:
    """A key/value keeps its key and a URL keeps its user and host: only the secret goes."""
    assert scrub("password=hunter2") == "password=[redacted:password]"
    assert scrub('"token": "f00dfeedcafe"') == '"token": "[redacted:token]"'
    assert (
        scrub("see https://alice:hunter22@git.example.org/x")
        == "see https://alice:[redacted:url_password]@git.example.org/x"
    )
    assert scrub(f"before\n{PEM}\nafter") == "before\n[redacted:private_key]\nafter"


def test_scrub_cut_private_key_loses_its_body() -> None:
    """A PEM block pasted without its END line still loses its base64, not the prose after."""
    body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE"
    text = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\nAAA=\nmy bad"
    out = scrub(text)
    assert body not in out
    assert out.endswith("my bad")


def test_scrub_specific_kind_wins_over_key_value() -> None:
    """`token=ghp_…` is reported as a GitHub token, once."""
    secret = "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"
    assert scrub_findings(f"token={secret}") == [("github_token", secret)]


@pytest.mark.parametrize(
    "text",
    [
        "I forgot my password again",
        "the password is required",
        "password: required",
        "Password: Required",
        "Forgot password? Reset it here.",
        "my secret: always be kind",
        "the token: none",
        "token=abc",
        'password=""',
        "I use sk-learn-is-a-great-library-for-everyone",
        "a desk-abcdefghijklmnopqrstuvwxyz is fine",
        "task-management and risk-assessment",
        "mat_settings_and_configuration_file",
        "syt_ is the prefix of Synapse tokens",
        "ghp_ tokens start like this",
        "https://matrix.to/#/@alice:example.org",
        "http://localhost:8008/_matrix/client/v3/sync",
        "ssh git@github.com:org/repo.git",
        "email alice@example.org at 10:30",
        "the AKIA prefix means an access key id",
        "eyJ is what base64 JSON starts with",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
        "-----END PUBLIC KEY-----",
        "ratio 3:2, time 12:30, password_file=/run/secrets/pw",
        "The secretary said: hello",
    ],
)
def test_scrub_false_positives_unchanged(text: str) -> None:
    """Ordinary prose, prefixes without a value, short values and public keys stay as they are."""
    assert scrub(text) == text
    assert scrub_findings(text) == []


@pytest.mark.parametrize(("kind", "secret", "template"), SECRETS)
def test_scrub_idempotent_on_each_kind(kind: str, secret: str, template: str) -> None:
    """Scrubbing scrubbed text changes nothing and finds nothing."""
    once = scrub(template.format(secret))
    assert scrub(once) == once
    assert scrub_findings(once) == []


_fragments = st.sampled_from(
    [s for _, s, _ in SECRETS]
    + [t.replace("{}", "") for _, _, t in SECRETS]
    + ["password", "=", ":", " ", "\n", '"', "'", "@", "//", "https://", "[redacted:", "]", "x"]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_fragments | st.text(max_size=8), max_size=12))
def test_scrub_idempotent_property(parts: list[str]) -> None:
    """For any mix of secrets, keys and noise, scrub(scrub(x)) == scrub(x)."""
    once = scrub("".join(parts))
    assert scrub(once) == once


def test_scrub_version_is_an_int() -> None:
    """The scrub carries a version the collection records; it starts at 1."""
    assert isinstance(SCRUB_VERSION, int)
    assert SCRUB_VERSION >= 1


def test_scrub_findings_in_text_order_per_kind() -> None:
    """Two secrets in one message are both found and both removed."""
    a, b = "AKIAIOSFODNN7EXAMPLE", "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"
    text = f"{a} and {b}"
    assert sorted(scrub_findings(text)) == sorted([("aws_access_key", a), ("github_token", b)])
    assert scrub(text) == "[redacted:aws_access_key] and [redacted:github_token]"
