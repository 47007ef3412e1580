"""ingest.rules.scrub: the further secret shapes of issue 46 (docs/ARCHITECTURE.md §3 rule 8),
each of which reached the index and replies before; and the look-alike text they must leave.

The secrets below are made up; they only have the shape of real ones.
"""

from __future__ import annotations

import base64

import pytest

from ingest.rules.scrub import scrub, scrub_findings

PEM_LINE = "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MnTmcEWpmNBFabcd"
PEM_TAIL = "Xq2yPbuKnB0cXwJ8o1b5+Mf3dQ=="
TAIL_LINES = [
    "Kp3vYw8Hq2LmN9xRtB4cZs7Ud1JfGa6WoE5iPk0yVh3nMrXq8TbLc2Sd4Fg7Hj9A",
    "nB6mV1cX4zL8kJ2hG5fD9sA3pO7iU0yT6rE1wQ4eR8tY2uI5oP9aS3dF7gH1jK6L",
    "Zx4Cv8Bn2Mq6Wr0Ty3Ui7Op1As5Df9Gh2Jk6Lz0Xc4Vb8Nm1Qw5Er9Ty3Ui7Op2A",
]
JWT_PARTS = (
    "eyJhbGciOiJIUzI1NiJ9",
    "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P",
)
AGE_KEY = "AGE-SECRET-KEY-1QQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6"
GITHUB = "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# (name, message, the secret pieces that must be gone, the kind, the words that must stay).
SHAPES: list[tuple[str, str, tuple[str, ...], str, tuple[str, ...]]] = [
    ("passcode", "passcode: 482913", ("482913",), "password", ("passcode: ",)),
    ("card PIN", "card PIN: 4829", ("4829",), "password", ("card PIN: ",)),
    ("age key", f"age key {AGE_KEY} ok", (AGE_KEY[16:],), "age_secret_key", ("age key ", " ok")),
    (
        "PuTTY Private-Lines",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\n"
        "AAAAC3NzaC1lZDI1NTE5AAAAIDqE\nPrivate-Lines: 2\n"
        "AAAAIGx5b3VyIHNlY3JldCBrZXkgbWF0ZXJpYWwgaGVyZQ==\nAAAAIGx5b3Vy\nPrivate-MAC: 0123abcd",
        ("AAAAIGx5b3VyIHNlY3JldCBrZXkgbWF0ZXJpYWwgaGVyZQ", "AAAAIGx5b3Vy\n"),
        "private_key",
        ("Private-Lines: 2\n", "\nPrivate-MAC: 0123abcd"),
    ),
    (
        "lower-case PEM",
        f"key:\n-----begin rsa private key-----\n{PEM_LINE}\n{PEM_TAIL}\n"
        "-----end rsa private key-----\nthanks",
        (PEM_LINE, PEM_TAIL),
        "private_key",
        ("key:\n", "\nthanks"),
    ),
    (
        "tail half of a PEM body",
        "and the rest:\n" + "\n".join(TAIL_LINES) + f"\n{PEM_TAIL}\n-----END RSA PRIVATE KEY-----",
        (*TAIL_LINES, PEM_TAIL),
        "private_key",
        ("and the rest:\n",),
    ),
    (
        "tail half without its END line",
        "part 2\n" + "\n".join(TAIL_LINES) + "\ndone",
        TAIL_LINES,
        "private_key",
        ("part 2\n", "\ndone"),
    ),
    (
        "Azure SAS sig=",
        "https://acc.blob.core.windows.net/c/f.zip?sv=2020-08-04&sp=r&sig=Zm9vYmFy%2BYmF6cXV4MTIz%3D",
        ("Zm9vYmFy%2BYmF6cXV4MTIz",),
        "url_signature",
        ("?sv=2020-08-04&sp=r&sig=",),
    ),
    (
        "S3 X-Amz-Signature=",
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
        "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0 expires soon",
        ("9f8e7d6c5b4a39281706f5e4d3c2b1a0",),
        "url_signature",
        ("&X-Amz-Signature=", " expires soon"),
    ),
    (
        "?auth=",
        "feed at https://api.example.org/v1/feed?auth=Zq8Xw7Vu6Ts5 now",
        ("Zq8Xw7Vu6Ts5",),
        "token",
        ("feed?auth=", " now"),
    ),
    (
        "?key=",
        "https://maps.example.org/js?key=Ab12Cd34Ef56Gh78&v=3",
        ("Ab12Cd34Ef56Gh78",),
        "api_key",
        ("js?key=", "&v=3"),
    ),
    (
        "OAuth ?code=",
        "https://app.example.org/callback?code=4/0AX4XfWhQz9Y8vL7&state=xyz",
        ("0AX4XfWhQz9Y8vL7",),
        "oauth_code",
        ("callback?code=", "&state=xyz"),
    ),
    (
        ".npmrc :_authToken=",
        "//registry.npmjs.org/:_authToken=0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
        ("0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",),
        "npm_token",
        ("//registry.npmjs.org/:_authToken=",),
    ),
    (
        "YAML password: >-",
        "db:\n  password: >-\n    hunter2xyz\n    and-more\n  user: app",
        ("hunter2xyz", "and-more"),
        "password",
        ("  password: >-\n    ", "\n  user: app"),
    ),
    (
        "kubeconfig client-key-data:",
        "users:\n- name: ci\n  user:\n    client-key-data: " + _b64("-----BEGIN RSA PRIVATE KEY"),
        (_b64("-----BEGIN RSA PRIVATE KEY")[:20],),
        "private_key",
        ("    client-key-data: ",),
    ),
    (
        "JWT with spaces between its parts",
        "cookie " + " . ".join(JWT_PARTS) + " end",
        JWT_PARTS,
        "jwt",
        ("cookie ", " end"),
    ),
    (
        "JWT with line breaks between its parts",
        "cookie\n" + ".\n".join(JWT_PARTS) + "\nend",
        JWT_PARTS,
        "jwt",
        ("cookie\n", "\nend"),
    ),
    ("base64 of a token", f"here {_b64(GITHUB)} ok", (_b64(GITHUB),), "github_token", (" ok",)),
    (
        "base64 of DB_PASSWORD=",
        f"env {_b64('DB_PASSWORD=hunter2xyz')} set",
        (_b64("DB_PASSWORD=hunter2xyz"),),
        "password",
        ("env ", " set"),
    ),
    ("password&#61;", "password&#61;hunter2xyz", ("hunter2xyz",), "password", ("password&#61;",)),
    ("password%3D", "?q=password%3Dhunter2xyz", ("hunter2xyz",), "password", ("password%3D",)),
    (
        "combining accent in the key",
        "pa\u0301ssword=hunter2xyz",
        ("hunter2xyz",),
        "password",
        ("pa\u0301ssword=",),
    ),
    ("accented key", "pässword: hunter2xyz", ("hunter2xyz",), "password", ("pässword: ",)),
]

# Text that shares a shape's surface and holds no secret: left as it is.
LOOK_ALIKES = [
    "-----BEGIN CERTIFICATE-----\n" + "\n".join(TAIL_LINES) + "\n-----END CERTIFICATE-----",
    "the cert body:\n" + "\n".join(TAIL_LINES) + "\n-----END CERTIFICATE-----",
    "checksums:\n"
    + "\n".join(["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"] * 3),
    "search https://grep.app/search?code=python&key=value",
    "https://example.org/page?auth=basic",
    "description: >-\n  a long text\n  over lines",
    "eyJ is what base64 JSON starts with",
    f"the header {JWT_PARTS[0]} decodes to JSON",
    f"{_b64('hello world, how are you today?')} is base64 of a greeting",
    "internationalization and localization are long words",
    "/usr/share/doc/ubuntu-docs/index.html",
    "the Private-Lines header counts lines",
    "mot de passe oublié, contraseña olvidada, Passwörter vergessen",
    "naïve café, Größe ändern",
]


@pytest.mark.parametrize(
    ("text", "pieces", "kind", "kept"),
    [s[1:] for s in SHAPES],
    ids=[s[0] for s in SHAPES],
)
def test_scrub_further_shape(
    text: str, pieces: tuple[str, ...], kind: str, kept: tuple[str, ...]
) -> None:
    """Regression (issue 46): each shape loses its secret under a marker naming its kind, the
    words around it stay, and scrubbing again changes nothing."""
    out = scrub(text)
    for piece in pieces:
        assert piece not in out, out
    assert f"[redacted:{kind}]" in out, out
    for words in kept:
        assert words in out, out
    assert scrub(out) == out


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_scrub_further_shapes_leave_look_alikes(text: str) -> None:
    """A certificate, hex digests, a word in a query, a YAML description, base64 of plain
    text and accented prose are no secret: unchanged."""
    assert scrub(text) == text
    assert scrub_findings(text) == []
