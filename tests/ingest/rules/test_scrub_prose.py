"""ingest.rules.scrub_prose through `scrub`: a secret written in prose is redacted, talk about
passwords is left exactly as it is (docs/ARCHITECTURE.md §3 rule 8b; issue 46).

The secrets below are made up; they only have the shape of real ones.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.rules.scrub import scrub, scrub_findings
from ingest.rules.scrub_prose import looks_like_value

# (message, the value that must be gone, the words around it that must stay).
PROSE_SECRETS: list[tuple[str, str, str]] = [
    # English: after the word, with filler, a colon, `it's`, `now`, `set to`.
    ("the admin password for the build box is hunter2xyz", "hunter2xyz", "for the build box is"),
    ("wifi pw is Xyz123, don't share it", "Xyz123", ", don't share it"),
    ("use password Dashb0ard! to log into the dashboard", "Dashb0ard!", "to log into the"),
    ("my vpn password: it's Vpn#2024", "Vpn#2024", "my vpn password: it's"),
    ("the password is now Tr0ub4dor", "Tr0ub4dor", "the password is now"),
    ("the password was set to hunter2x", "hunter2x", "was set to"),
    ("password for root is: s3cr3t!", "s3cr3t!", "password for root is:"),
    ("the wifi password is banana", "banana", "the wifi password is"),
    ("The staging passphrase is 'correct horse battery'", "correct horse battery", "passphrase"),
    ("hunter2xyz is the password", "hunter2xyz", "is the password"),
    ("Zq9!mmx7 is the new wifi password.", "Zq9!mmx7", "is the new wifi password."),
    ("passcode: 482913", "482913", "passcode:"),
    ("card PIN: 4829", "4829", "card PIN:"),
    ("the PIN for the door is 7305", "7305", "the PIN for the door is"),
    ("pw Xyz123 for the guest account", "Xyz123", "for the guest account"),
    ("the api key is abcd1234efgh", "abcd1234efgh", "the api key is"),
    # German
    ("das Passwort für den Server ist Tr0ub4dor", "Tr0ub4dor", "für den Server ist"),
    ("das Kennwort lautet Sommer2024", "Sommer2024", "das Kennwort lautet"),
    ("Tr0ub4dor! ist das Passwort", "Tr0ub4dor!", "ist das Passwort"),
    ("das WLAN-Passwort ist Katze", "Katze", "das WLAN-Passwort ist"),
    # Spanish
    ("la contraseña del wifi es gatito2024", "gatito2024", "la contraseña del wifi es"),
    ("la clave es perro#99", "perro#99", "la clave es"),
    ("gatito2024 es la contraseña", "gatito2024", "es la contraseña"),
    ("la contraseña es mariposa", "mariposa", "la contraseña es"),
    # French
    ("le mot de passe est soleil!42", "soleil!42", "le mot de passe est"),
    ("le mot de passe du routeur est : Chat2024", "Chat2024", "du routeur est :"),
    ("mon mdp c'est chaton42", "chaton42", "mon mdp c'est"),
    ("soleil!42 est le mot de passe", "soleil!42", "est le mot de passe"),
    # Portuguese
    ("a senha é banana#77", "banana#77", "a senha é"),
    ("a senha do wifi é abacaxi", "abacaxi", "a senha do wifi é"),
    ("banana#77 é a senha", "banana#77", "é a senha"),
    # Russian
    ("пароль от сервера — qwerty123", "qwerty123", "пароль от сервера —"),
    ("пароль это Zx9!kk", "Zx9!kk", "пароль это"),
    ("пароль от почты: ромашка", "ромашка", "пароль от почты:"),
]

# Talk about passwords: never changed, so it stays searchable by its words.
TALK = [
    "the password is wrong again",
    "the password is expired",
    "the password is on the whiteboard",
    "the password was reset",
    "the password is in the vault",
    "the password is too short",
    "the password is correct, the login still fails",
    "the password is blank",
    "my password is long",
    "password is your user password",
    "By default, the root password is locked in Ubuntu.",
    "the root password on ubuntu is randomly generated junk",
    "the password is not hunter2x",
    "hunter2x is not the password",
    "this is the password",
    "what is the password?",
    "the password manager is KeePassXC",
    "1024 is the max password length",
    "the password is 12 characters long",
    "the passphrase is 4096 bits",
    "password was setup.",
    "what are the parameters for the username and password main.cf?",
    "it never says *what* is asking for the PW",
    "use password authentication for now",
    "GPIO pin 17 is 3.3V",
    "pin 4 is 3.3V and pin 6 is ground",
    "the token is expired",
    "the pwd is /home/alice",
    "the password is $DB_PASSWORD from the env",
    "the password is in ~/.pgpass",
    "the password is <your password>",
    "the password is ********",
    "das Passwort ist falsch",
    "das Passwort ist zu kurz",
    "das Passwort ist abgelaufen",
    "la contraseña es incorrecta",
    "la contraseña es demasiado corta",
    "la clave es la paciencia",
    "le mot de passe est incorrect",
    "le mot de passe est expiré",
    "a senha está errada",
    "a senha é fraca",
    "пароль неверный",
    "пароль слишком простой",
    "пароль это секретная информация",
]


@pytest.mark.parametrize(("text", "secret", "kept"), PROSE_SECRETS)
def test_scrub_prose_secret_is_redacted(text: str, secret: str, kept: str) -> None:
    """A value after (or before) a password word, in six languages, is replaced by the
    password marker; the sentence around it stays; scrubbing again changes nothing."""
    out = scrub(text)
    assert secret not in out, out
    assert "[redacted:password]" in out
    assert kept in out, out
    assert scrub(out) == out
    assert ("password", secret) in scrub_findings(text) or any(
        secret in found for _, found in scrub_findings(text)
    )


@pytest.mark.parametrize("text", TALK)
def test_scrub_prose_talk_about_passwords_is_unchanged(text: str) -> None:
    """Talk about passwords ("is wrong again", "ist falsch", "es incorrecta", a password
    manager, a length) is no value and stays word for word."""
    assert scrub(text) == text
    assert scrub_findings(text) == []


@pytest.mark.parametrize(
    ("value", "options", "expected"),
    [
        ("hunter2", {}, True),  # a digit
        ("soleil!42", {}, True),  # a symbol
        ("banana", {}, True),  # a plain word ending its clause, not prose
        ("banana", {"clause_end": False}, False),  # a plain word with more after it
        ("banana", {"strict": True}, False),  # a plain word after `PIN`, `clave`, `token`
        ("wrong", {}, False),  # in the prose list
        ("falsch", {}, False),
        ("incorrecta", {}, False),
        ("encrypted", {}, False),  # shaped like a participle
        ("cambiada", {}, False),
        ("неверный", {}, False),
        ("world-readable", {}, False),  # a hyphen inside a word is no symbol
        ("abc", {}, False),  # too short
        ("****", {}, False),  # no letter or digit
        ("$HOME", {}, False),  # a reference, not a value
        ("/etc/shadow", {}, False),
        ("https://vault.example.org", {}, False),
        ("main.cf", {}, False),  # a file name
        ("*what*", {}, False),  # emphasis around a prose word
        ("Dashb0ard!", {}, True),  # a trailing `!` is judged without it
        ("4829", {"pin": True}, True),
        ("3.3V", {"pin": True}, False),  # a PIN is digits
    ],
)
def test_looks_like_value_rule(value: str, options: dict[str, bool], expected: bool) -> None:
    """The value rule, step by step: digits and symbols make a value; a plain word is one
    only where nothing else could be, and not when it is prose."""
    assert looks_like_value(value, **options) is expected


def test_scrub_prose_two_secrets_in_one_message() -> None:
    """Both values of a message go; the talk between them stays."""
    text = "the wifi pw is Xyz123 but das Passwort ist falsch, and hunter2x is the admin password"
    out = scrub(text)
    assert "Xyz123" not in out and "hunter2x" not in out
    assert "das Passwort ist falsch" in out
    assert out.count("[redacted:password]") == 2


def test_scrub_prose_accent_typed_over_the_key() -> None:
    """A combining accent inside the key word (`pa\\u0301ssword`) does not hide the value."""
    out = scrub("the pa\u0301ssword is hunter2xyz")
    assert "hunter2xyz" not in out and out.startswith("the pa\u0301ssword is ")


_fragments = st.sampled_from(
    [t for t, _, _ in PROSE_SECRETS]
    + TALK
    + [" is ", " the password ", "pw ", ": ", "it's ", "'", '"', ", ", "\n", "x9", "[redacted:"]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_fragments | st.text(max_size=6), max_size=8))
def test_scrub_prose_idempotent(parts: list[str]) -> None:
    """Prose secrets and talk side by side: scrubbing twice changes nothing more."""
    once = scrub("".join(parts))
    assert scrub(once) == once
