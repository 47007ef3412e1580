"""ingest.rules.scrub: credentials never reach a chunk or an embedding (docs/ARCHITECTURE.md §3
rule 8; its cost on hostile input: test_scrub_cost.py).

The secrets below are made up for the tests; they only have the shape of real ones.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.rules.scrub import scrub, scrub_findings

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
    ("azure_key", "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4==", "AccountName=acc;AccountKey={};x=y"),
    ("azure_key", "abcDEF123+/ghiJKL456=", "SharedAccessKeyName=Root;SharedAccessKey={}"),
    ("telegram_bot_token", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0", "bot {} ok"),
    ("gitlab_token", "glrt-t1_AbCdEfGhIjKlMnOpQrSt", "runner {}"),
    ("gitlab_token", "gldt-AbCdEfGhIjKlMnOpQrSt", "deploy token {}"),
    ("gitlab_token", "glptt-0123456789abcdef0123", "trigger {}"),
    ("digitalocean_token", "dop_v1_" + "0a1b2c3d" * 8, "doctl auth init -t {}"),
    ("basic_auth", "YWxpY2U6aHVudGVyMg==", "send Basic {} as the header"),
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
        "use -p to set the port",
        "mysql -P 3306 -h db -u root -p mydb",
        "docker run -p 8080:80 -u 1000:1000 nginx",
        "docker login -p flag is deprecated",
        "sshpass -p is insecure, use -e",
        "curl -u alice: https://example.org",
        "the password policy is strict",
        "Das Passwort ist zu kurz",
        "mot de passe oublié ?",
        "Basic Instinct is a film, Basic training too",
        "my pw is long",
        "123456789:AAA is not a bot token",
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


def test_scrub_findings_in_text_order_per_kind() -> None:
    """Two secrets in one message are both found and both removed."""
    a, b = "AKIAIOSFODNN7EXAMPLE", "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"
    text = f"{a} and {b}"
    assert sorted(scrub_findings(text)) == sorted([("aws_access_key", a), ("github_token", b)])
    assert scrub(text) == "[redacted:aws_access_key] and [redacted:github_token]"


# ---------------------------------------------------------------- shapes the scrub must catch

# (message, the secret that must be gone, the words around it that must stay).
SHAPES: list[tuple[str, str, tuple[str, ...]]] = [
    ("deploy --password=hunter2 --verbose", "hunter2", ("deploy --password=", " --verbose")),
    ("run it with --token=abc and wait", "abc", ("run it with --token=", " and wait")),
    ("cli --api-key=k3y9f8e7 ok", "k3y9f8e7", ("cli --api-key=", " ok")),
    ("mysql --password 'Tr0ub4dor&3' db", "Tr0ub4dor&3", ("mysql --password '", "' db")),
    ("export PGPASSWORD=sup3rs3cret; psql", "sup3rs3cret", ("export PGPASSWORD=", "; psql")),
    ("MYSQL_PWD=letmein9 mysql -u root", "letmein9", ("MYSQL_PWD=", " mysql -u root")),
    ("in .env: DB_PASS=hunter22", "hunter22", ("in .env: DB_PASS=",)),
    (
        "Server=db;Uid=sa;Pwd=Secr3t!x;Encrypt=yes",
        "Secr3t!x",
        ("Server=db;Uid=sa;Pwd=", ";Encrypt"),
    ),
    ("login with pass=opensesame today", "opensesame", ("login with pass=", " today")),
    ("REDIS_URL=redis://:s3cretpw@cache:6379/0", "s3cretpw", ("redis://:", "@cache:6379/0")),
    ("db at postgres://bob:p@ss!word@db/app", "ss!word", ("postgres://bob:", "@db/app")),
    (
        "curl -H 'Authorization: Basic YWxpY2U6aHVudGVyMg==' https://api.example.org",
        "YWxpY2U6aHVudGVyMg==",
        ("curl -H 'Authorization: Basic ", "' https://api.example.org"),
    ),
    ("Authorization: Bearer abc123", "abc123", ("Authorization: Bearer ",)),
    ('{"Authorization": "token 9f8e7d6c"}', "9f8e7d6c", ('"Authorization": "token ', '"}')),
    ("use Bearer t0k3n99 for now", "t0k3n99", ("use Bearer ", " for now")),
    ("password: hunter", "hunter", ("password: ",)),
    ("Password: Hunter.", "Hunter", ("Password: ",)),
    ("my password is:\nhunter2", "hunter2", ("my password is:\n",)),
    ("password:\n  hunter2\nthanks", "hunter2", ("password:\n  ", "\nthanks")),
    ("the api key is\nK3yV4lue99\nok?", "K3yV4lue99", ("the api key is\n", "\nok?")),
    (
        "alerts go to https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/aBcDeFgHiJkLmNoPqRsTuVwX",
        "aBcDeFgHiJkLmNoPqRsTuVwX",
        ("alerts go to https://hooks.slack.com/services/",),
    ),
    (
        "hook https://discord.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz-0123",
        "AbCdEfGhIjKlMnOpQrStUvWxYz-0123",
        ("hook https://discord.com/api/webhooks/123456789012345678/",),
    ),
    ("stripe hook whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ok", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZ", ()),
    ("npm token npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 set", "npm_a1B2c3D4e5F6g7H8i9J0k1L2", ()),
    (
        "twine: pypi-AgEIcHlwaS5vcmcCJGE4YjlmZDEyLTM0NTYtNzg5MC1hYmNkLWVmMDEyMzQ1Njc4OQ",
        "AgEIcHlwaS5vcmcCJGE4YjlmZDEyLTM0NTYtNzg5",
        ("twine: ",),
    ),
    ("HF_TOKEN hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345678 here", "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ", ()),
    (
        "gcloud ya29.a0AfH6SMBxYz-AbCdEfGhIjKlMnOpQrStUv_123 x",
        "a0AfH6SMBxYz-AbCdEfGhIjKlMnOpQr",
        (),
    ),
    (
        "mail 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 done",
        "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc",
        ("mail ", " done"),
    ),
    ("twilio SK0123456789abcdef0123456789abcdef key", "0123456789abcdef0123456789abcdef", ()),
    (
        "bot token MTIzNDU2Nzg5MDEyMzQ1Njc4OTA.GaBcDe.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok",
        "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        ("bot token ", " ok"),
    ),
    # Command lines (issue 21): the password after the command's own option.
    ("mysql -u root -pS3cretPw db", "S3cretPw", ("mysql -u root -p", " db")),
    ("mysqldump -uroot -p'pa ss' x > d.sql", "pa ss", ("mysqldump -uroot -p'", "' x > d.sql")),
    ("curl -u bob:hunter2 https://api.x", "hunter2", ("curl -u bob:", " https://api.x")),
    ("curl -s --user 'bob:hunter2' https://x", "hunter2", ("--user 'bob:",)),
    ("docker login -u bob -p hunter2 reg.io", "hunter2", ("docker login -u bob -p ", " reg.io")),
    ("docker login --password hunter22x reg.io", "hunter22x", ("--password ", " reg.io")),
    ("sshpass -p hunter2 ssh pi@host", "hunter2", ("sshpass -p ", " ssh pi@host")),
    ("sshpass -p'hunter' ssh host", "hunter", ("sshpass -p'", "' ssh host")),
    ("pw: hunter22", "hunter22", ("pw: ",)),
    ("wifi pw=k1tchen!", "k1tchen!", ("wifi pw=",)),
    # The word for password in other languages.
    ("Passwort: geheim", "geheim", ("Passwort: ",)),
    ("Kennwort = Sommer2024", "Sommer2024", ("Kennwort = ",)),
    ("mot de passe : azerty12", "azerty12", ("mot de passe : ",)),
    ("contraseña: secreto1", "secreto1", ("contraseña: ",)),
    ("senha: segredo", "segredo", ("senha: ",)),
    ("wachtwoord: geheim12", "geheim12", ("wachtwoord: ",)),
    ("пароль: секрет", "секрет", ("пароль: ",)),
    ("密码：abc123", "abc123", ("密码：",)),
    ("パスワード: himitsu1", "himitsu1", ("パスワード: ",)),
]

# Ordinary chat that mentions the same words: left exactly as it is.
NOT_SECRETS = [
    "pass the salt",
    "pass: yes",
    "my password manager is great",
    "I forgot my password\nagain",
    "my password is long\nand nobody guesses it",
    "password:\nrequired",
    "SKU numbers are on the box",
    "hf is a good abbreviation",
    "use hf_hub_download to fetch it",
    "npm_config_cache is an environment variable",
    "pypi-server is a package",
    "the bearer of bad news",
    "Bearer tokens go in a header",
    "use --token to pass it, see --password-file /run/pw",
    "Authorization: required",
    "the Basic plan costs less",
    "bypass: enabled, compass=north-east",
    "PWD=/home/alice/src",
    "SG. is short for Singapore",
    "first-pass: done",
    "slack hooks.slack.com is down",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_scrub_leaves_ordinary_chat(text: str) -> None:
    """Prose that mentions passwords, tokens or their prefixes is not eaten."""
    assert scrub(text) == text
    assert scrub_findings(text) == []


# ---------------------------------------------------------------- disguised shapes (issue 37)

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P"
# (message, every piece of the secret that must be gone, the words around it that must stay):
# each the round-4 probe's shape, matched on the normalised view and scrubbed in the original.
DISGUISED: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("password:\u00a0hunter2x", ("hunter2x",), ("password:\u00a0",)),
    ("mot de passe\u202f: azerty12", ("azerty12",), ("mot de passe\u202f: ",)),
    ("password\u200b=hunter2x ok", ("hunter2x",), ("password\u200b=", " ok")),
    ("pass\u00adword=hunter2x", ("hunter2x",), ("pass\u00adword=",)),
    ("api\u2060key=k3y9f8e7d6", ("k3y9f8e7d6",), ("api\u2060key=",)),
    ("pass\ufeffword: hunter2x", ("hunter2x",), ("pass\ufeffword: ",)),
    (
        "token ghp_1a2B3c4D5e6F7g8H9i0J\u200bkLmNoPqRsTuVwXyZ done",
        ("ghp_1a2B3c4D5e6F7g8H9i0J", "kLmNoPqRsTuVwXyZ"),
        ("token ", " done"),
    ),
    ("key AKIA\u200bIOSFODNN7EXAMPLE", ("IOSFODNN7EXAMPLE",), ("key ",)),
    (
        "cookie " + JWT.replace(".", ".\u200b", 1) + " end",
        ("eyJhbGciOiJIUzI1NiJ9", "dozjgNryP4J3jVmNHl0w5N"),
        ("cookie ", " end"),
    ),
    ("ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２ｘ", ("ｈｕｎｔｅｒ２ｘ",), ("ｐａｓｓｗｏｒｄ＝",)),
    ("p\u0430ssword=hunter2x", ("hunter2x",), ("p\u0430ssword=",)),
    ("\u0440assword: hunter2x", ("hunter2x",), ("\u0440assword: ",)),
    (
        "key:\n" + PEM.replace("BEGIN RSA", "BEGIN\u00a0RSA").replace("END RSA", "END\u00a0RSA"),
        ("MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn", "Xq2yPbuKnB0cXwJ8o1b5"),
        ("key:\n",),
    ),
    (
        "-----BEGIN\u00a0OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAA\nmore",
        ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAA",),
        ("more",),
    ),
    ("Authorization: Bearer\u00a0t0k3n99abc", ("t0k3n99abc",), ("Authorization: Bearer\u00a0",)),
    ("use Bearer\u00a0t0k3n99abc now", ("t0k3n99abc",), ("use Bearer\u00a0", " now")),
    ("Passwort:\u3000geheim12", ("geheim12",), ("Passwort:\u3000",)),
]

# Ordinary chat in other scripts and with the same characters: left exactly as it is.
DISGUISED_PROSE = [
    "naïve café, Größe ändern, ﬁne, 東京 — nothing secret",
    "pass\u00a0the salt",
    "пароль слишком простой",  # prose about a password, all Cyrillic
    "my pass\u00adword manager is great",
    "ｔｈｅ ｂｅａｒｅｒ ｏｆ ｂａｄ ｎｅｗｓ",
    "a\u200bb\u2060c \u00a0 d\u202fe",
]


@pytest.mark.parametrize(
    ("text", "pieces", "kept"), [(t, (secret,), k) for t, secret, k in SHAPES] + DISGUISED
)
def test_scrub_catches_shape(text: str, pieces: tuple[str, ...], kept: tuple[str, ...]) -> None:
    """Each credential shape loses its secret and keeps the words around it; scrubbing again
    changes nothing. Regression (issue 37 item 2, `DISGUISED`): a no-break or narrow space, a
    zero-width character, a soft hyphen or word joiner, full-width letters or a Cyrillic
    look-alike no longer carry a secret past the scrub, and the original characters around it
    stay."""
    out = scrub(text)
    for piece in pieces:
        assert piece not in out, out
    assert "[redacted:" in out
    for words in kept:
        assert words in out, out
    assert scrub(out) == out


@pytest.mark.parametrize("text", DISGUISED_PROSE)
def test_scrub_leaves_other_scripts_and_invisible_characters_in_prose(text: str) -> None:
    assert scrub(text) == text
    assert scrub_findings(text) == []


_shape_fragments = st.sampled_from(
    [t for t, _, _ in SHAPES] + NOT_SECRETS + ["\n", " ", ":", "=", "@", "--", "is:\n", "x"]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_shape_fragments | st.text(max_size=6), max_size=8))
def test_scrub_idempotent_on_mixed_shapes(parts: list[str]) -> None:
    """The new shapes side by side with each other and with prose: scrubbing twice changes
    nothing more than scrubbing once."""
    once = scrub("".join(parts))
    assert scrub(once) == once


def test_scrub_a_marker_is_never_read_as_a_curl_user() -> None:
    """A later rule's marker (`PWD=[redacted:…]` after `curl -u`) holds a `:` that is no
    `user:password`: scrubbing again changes nothing (found by the property above)."""
    once = scrub("curl -u bob:hunter2 https://x -u rootMYSQL_PWD=letmein9 mysql")
    assert "hunter2" not in once and "letmein9" not in once
    assert scrub(once) == once
