"""`muninn run` against the real Synapse: a secret written in prose, in four languages, reaches
no reply, no command-room JSON and no stored payload; talk about passwords stays searchable
(docs/ARCHITECTURE.md §3 rule 8b; issue 46). One service for the module (tests/bot/conftest.py).
"""

from __future__ import annotations

import asyncio
import json

from bot.demo.client import unique_localpart
from ingest.store import PointFilter
from ingest.types import RoomID
from tests.bot.botenv import Env, body_of, link
from tests.botkit import ask
from tests.homeserver import MatrixUser

# (message, its secret); made up, with only the shape of real ones.
PROSE = [
    ("the password for the kestrel build box is hunter2xyz", "hunter2xyz"),
    ("das Passwort für den Kestrel-Server ist Tr0ub4dor", "Tr0ub4dor"),
    ("la contraseña del wifi kestrel es gatito2024", "gatito2024"),
    ("le mot de passe du routeur kestrel est soleil!42", "soleil!42"),
    ("Zq9mmx7! is the kestrel vpn password, don't share it", "Zq9mmx7!"),
]
TALK = "the kestrel password is wrong again, ask the helpdesk"


async def test_bot_prose_secrets_reach_no_reply_or_payload_and_talk_stays_searchable(
    env: Env, alice: MatrixUser
) -> None:
    """Regression (issue 46): each prose secret was indexed and quoted. Now `!search` in the
    room and in the command room (its JSON too) shows each message with the password
    marker and never the value; no stored payload holds a value; the line that only talks
    about the password is indexed word for word and found by its words."""
    local = unique_localpart("prose")
    room = await env.room(alice, alias_localpart=local)
    sent = [await alice.send_text(room, text) for text, _ in PROSE]
    talk = await alice.send_text(room, TALK)
    await env.settle(room)

    _, reply = await ask(alice, room, "!search kestrel password limit:20", env.bot_id)
    alias = f"#{local}:{env.synapse.server_name}"
    command = f"!search kestrel password in:{alias} limit:20"
    _, json_reply = await ask(env.persona, env.command_room, command, env.bot_id)
    col = await env.service.writer.open()
    flt = PointFilter(room_ids=(RoomID(room),))
    points = await asyncio.to_thread(lambda: list(col.scroll(flt)))
    stored = json.dumps([p.payload for p in points], ensure_ascii=False)

    for text in (body_of(reply), str(json_reply["content"]), stored):
        assert "[redacted:password]" in text
        for _, secret in PROSE:
            assert secret not in text, secret
    for text, secret in PROSE:  # indexed word for word but the value
        assert text.replace(secret, "[redacted:password]") in stored
    assert TALK in stored
    assert link(room, sent[0]) in body_of(reply)

    _, found = await ask(alice, room, "!search kestrel wrong again helpdesk", env.bot_id)
    assert link(room, talk) in body_of(found) and "wrong again" in body_of(found)
