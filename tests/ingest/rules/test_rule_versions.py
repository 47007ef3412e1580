"""A rule set's version moves with its output: the chunker's, the scrub's and the lexical rules'.

The collection records `CHUNKER_VERSION`, `SCRUB_VERSION` and `LEXICAL_VERSION`; a change of any
of them builds a new generation (every room re-read under the new rules). A rule change that
forgets the bump leaves old points made by the old rules beside new ones, unnoticed. So each
rule set is fingerprinted: the sha256 of its outputs over a fixed corpus, recorded below with
the version it was recorded at. Change the rules' output without a bump and its test fails.

After a deliberate change (and the version bump that goes with it), re-record every golden
value in place and commit the diff with the change:

    python -m tests.ingest.rules.test_rule_versions
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ingest.index.chunker import CHUNKER_VERSION, chunk, point_id, split_timelines, window_payload
from ingest.rules.lexical import LEXICAL_VERSION, document_vector, query_vector, tokens
from ingest.rules.scrub import SCRUB_VERSION, scrub
from ingest.types import EventID, Message, RoomID, UserID

# golden: begin (rewritten by `python -m tests.ingest.rules.test_rule_versions`)
GOLDEN: dict[str, tuple[int, str]] = {
    "chunker": (6, "7386ac97bfc8e3b7fdca8dc116d1533de6a2bfdeabd3c879950bc73e8811ffe9"),
    "lexical": (2, "2ad2734b5c0a2d3e6c3a4cced6a1f4d9464df17a55cd42a24f5729f57f29cab4"),
    "scrub": (5, "7db992d4354ed29e52510832f20cd0be93ce2f39f60fab75c3428ddcb3516be4"),
}
# golden: end

# ---------------------------------------------------------------- the fixed corpora

TEXTS = [
    "",
    "plain words, nothing secret: the deploy failed with E4242 on friday",
    "Größe ändern 東京 🚀 naïve café — mixed scripts and emoji",
    "token for the bot: syt_c2VjcmV0_abcdefghijklmnopqrst_1a2b3c (rotate it)",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXN0dWZm",
    "Authorization: Basic dXNlcjpodW50ZXIy",
    "Authorization: Bearer abc123",
    "aws AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 and glpat-abcdefghij0123456789",
    "openai sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD and sk-ant-api03-abcdefghijkl",
    "slack xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "stripe sk_live_abcdefghijklmnopqrstuvwx whsec_abcdefghijklmnopqrstuvwxyz012345",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789 pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoaWprbG1ub3A",
    "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH ya29.a0AfH6SMBabcdefghijklmnopqrstuvwxyz",
    "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "SK0123456789abcdef0123456789abcdef twilio",
    "MTA0NTY3ODkwMTIzNDU2Nzg5MA.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB discord",
    "password=hunter2 passwd: correct-horse pwd=abc123 pass=letmein",
    "password: hunter",
    "the password is\nhunter2-on-the-next-line",
    "--password=s3cret --token=abcdef123456 --api-key=xyz987654321",
    "PGPASSWORD=s3cret MYSQL_PWD=s3cret DB_PASS=s3cret psql -h db",
    "postgres://bob:p@ss!word@db.internal:5432/app and redis://:pw0rd@cache:6379/0",
    "api_key = 'abcdef0123456789abcdef' client_secret: \"0123456789abcdef0123\"",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
    "a long line " * 40,
    "ERR_7731X at 10:42, see https://example.org/runbook#step-3 (not a secret)",
]

# Scrub shapes of SCRUB_VERSION 3, for the scrub's fingerprint only (the chunker's corpus is
# `TEXTS` as recorded).
SCRUB_TEXTS = [
    "mysql -u root -pS3cret db; curl -u bob:hunter2 https://x; sshpass -p hunter2 ssh h",
    "docker login -u bob -p hunter2 reg.io and docker login --password hunter22x reg.io",
    "AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4==;SharedAccessKey=abcDEF123+/g=",
    "telegram 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 glrt-t1_AbCdEfGhIjKlMnOpQrSt",
    "dop_v1_" + "0a1b2c3d" * 8 + " Basic YWxpY2U6aHVudGVyMg== pw: hunter22",
    "Passwort: geheim | mot de passe : azerty12 | contraseña: secreto1 | 密码：abc123",
    "use -p to set the port; the password policy is strict; the Basic plan",
    # SCRUB_VERSION 4: the normalised view.
    "password:\u00a0hunter2x pass\u00adword=abc123x ｐａｓｓｗｏｒｄ＝ｘｙｚ１２３",
    "p\u0430ssword=q1w2e3r4",
    "AKIA\u200bIOSFODNN7EXAMPLE Bearer\u00a0t0k3n99abc naïve ﬁne пароль слишком простой",
    # SCRUB_VERSION 5: prose secrets and the further shapes (issue 46).
    "the wifi password is banana, das Passwort für den Server ist Tr0ub4dor, hunter2x is the pw",
    "la contraseña es incorrecta; le mot de passe est soleil!42; a senha é fraca; card PIN: 4829",
    "https://x.blob.core.windows.net/c?sv=1&sig=Zm9vYmFy%2BYmF6 and ?code=4/0AX4XfWhQz9Y8vL7",
    "pa\u0301ssword&#61;hunter2xyz //r/:_authToken=0a1b2c3d-4e5f ZGJfcGFzc3dvcmQ9aHVudGVyMg==",
]

# Lexical shapes of LEXICAL_VERSION 2, for the lexical fingerprint only.
LEXICAL_TEXTS = ["İstanbul and ISTANBUL and istanbul, İZMİR"]

ROOM = RoomID("!fingerprint:example.org")
SENDERS = [UserID(f"@{n}:example.org") for n in ("alice", "bob", "carol")]
NAMES = {SENDERS[0]: "Alice", SENDERS[1]: "Bob Builder"}  # carol has none: the mxid is shown
T0 = 1_793_550_840_000


def _messages() -> list[Message]:
    """Gaps short and long, a thread, bodies short and over a window: every boundary rule."""
    out: list[Message] = []
    ts = T0
    for n in range(60):
        ts += (n % 7) * 60_000 + (45 * 60_000 if n % 13 == 12 else 0) - (30_000 if n == 20 else 0)
        body = TEXTS[n % len(TEXTS)] or f"message {n}"
        thread = EventID("$m10") if n in (14, 17, 23) else None
        out.append(
            Message(
                event_id=EventID(f"$m{n}"),
                room_id=ROOM,
                sender=SENDERS[n % 3],
                ts=ts,
                body=body,
                thread_root=thread,
                mentions=(SENDERS[(n + 1) % 3],) if n % 5 == 0 else None,
            )
        )
    return out


# ---------------------------------------------------------------- what each rule set outputs


def chunker_output() -> Any:
    windows = []
    for timeline in split_timelines(_messages()).values():
        for w in chunk(timeline, gap_seconds=1800, max_bytes=350, names=NAMES):
            payload = window_payload(w, names=NAMES, versions={}, max_bytes=350)
            # The versions (and the hash over them) are what is being tested, not output.
            payload.pop("versions")
            payload.pop("content_hash")
            payload["point_id"] = point_id(w.room_id, w.thread_root, w.first_event_id)
            windows.append(payload)
    return windows


def scrub_output() -> Any:
    return [scrub(t) for t in TEXTS + SCRUB_TEXTS]


def lexical_output() -> Any:
    def vector(v: Any) -> list[tuple[int, float]]:
        return [(i, round(x, 6)) for i, x in zip(v.indices, v.values, strict=True)]

    texts = TEXTS + LEXICAL_TEXTS
    return [(tokens(t), vector(document_vector(t)), vector(query_vector(t))) for t in texts]


RULES: dict[str, tuple[int, Callable[[], Any]]] = {
    "chunker": (CHUNKER_VERSION, chunker_output),
    "scrub": (SCRUB_VERSION, scrub_output),
    "lexical": (LEXICAL_VERSION, lexical_output),
}
VERSION_NAMES = {
    "chunker": "CHUNKER_VERSION",
    "scrub": "SCRUB_VERSION",
    "lexical": "LEXICAL_VERSION",
}


def fingerprint(output: Any) -> str:
    canonical = json.dumps(output, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- the test


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_version_changes_with_its_output(rule: str) -> None:
    """A change of the rule set's output on the fixed corpus comes with a version bump."""
    version, output = RULES[rule]
    name = VERSION_NAMES[rule]
    assert rule in GOLDEN, (
        f"no golden value for {rule}: run `python -m tests.ingest.rules.test_rule_versions`"
    )
    recorded_version, recorded = GOLDEN[rule]
    now = fingerprint(output())
    if version == recorded_version:
        assert now == recorded, (
            f"the {rule}'s output changed but {name} is still {version}: bump {name} (a new "
            "generation re-indexes every room under the new rules), then re-record with "
            "`python -m tests.ingest.rules.test_rule_versions`"
        )
    else:
        pytest.fail(
            f"{name} is {version}, the golden value was recorded at {recorded_version}: "
            "re-record with `python -m tests.ingest.rules.test_rule_versions` and commit it with "
            "the bump"
        )


def test_fingerprint_sees_a_one_character_change() -> None:
    """The fingerprint is of the whole output: one changed character changes it."""
    out = scrub_output()
    changed = [*out[:-1], out[-1] + "."]
    assert fingerprint(out) != fingerprint(changed)


# ---------------------------------------------------------------- re-recording


def record(path: Path = Path(__file__)) -> str:
    """Rewrite the GOLDEN block of this file with today's versions and fingerprints."""
    lines = ["GOLDEN: dict[str, tuple[int, str]] = {"]
    for rule in sorted(RULES):
        version, output = RULES[rule]
        lines.append(f'    "{rule}": ({version}, "{fingerprint(output())}"),')
    lines.append("}")
    block = "\n".join(lines)
    source = path.read_text(encoding="utf-8")
    pattern = re.compile(r"(# golden: begin[^\n]*\n).*?(\n# golden: end)", re.S)
    path.write_text(pattern.sub(lambda m: m.group(1) + block + m.group(2), source, count=1))
    return block


if __name__ == "__main__":
    sys.stdout.write(record() + "\n")
