"""Secrets written in prose never reach an agent (issue 46, rule 8b): through the reference MCP
client, `search` and `context` over a room where people wrote passwords as sentences in five
languages, indexed by the writer and read live from the homeserver; talk about a password
stays found by its words."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bot.mcp.harness import call, muninn_mcp
from tests.homeserver import Homeserver
from tests.indexing import Indexer, reader_config, reader_config_doc, utc_ms, write_config

# (a message, the value in it no tool may return)
PROSE = (
    ("the admin password for the plum shed is Plum7shed", "Plum7shed"),
    ("das Passwort für den Pflaumenkeller ist Keller9pflaume", "Keller9pflaume"),
    ("la contraseña del almacén de ciruelas es Ciruela4alma", "Ciruela4alma"),
    ("le mot de passe du hangar à prunes est Prune8hangar", "Prune8hangar"),
    ("a senha do armazém de ameixas é Ameixa5arma", "Ameixa5arma"),
)
TALK = "the plum shed password is wrong again, ask the owner"


async def test_mcp_returns_no_secret_written_in_prose(hs: Homeserver, tmp_path: Path) -> None:
    """Each value, asked for by the words around it, is in no `search` or `context` result,
    whether the writer indexed the message or it is read from the homeserver now (a message
    sent after the pass); the talk about a wrong password is found, word for word."""
    reader = await hs.register(displayname="Reader")
    owner = await hs.register(displayname="Owner")
    seeder = await hs.seed_user()
    room = await owner.create_room(name="plums")
    for user in (seeder, reader):
        await user.join(room)
    ids = [
        await seeder.send_text(room, body, ts=utc_ms(f"2024-08-0{k + 1}T10:00"))
        for k, (body, _) in enumerate(PROSE)
    ]
    talk = await seeder.send_text(room, TALK, ts=utc_ms("2024-08-09T10:00"))
    indexer = Indexer(reader_config(hs, reader, tmp_path))
    try:
        await indexer.refresh()
    finally:
        await indexer.close()
    late = await seeder.send_text(room, "the plum shed password is now Late3plum")  # unindexed
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    texts = []
    async with muninn_mcp(config) as session:
        for body, _ in PROSE:
            doc = await call(session, "search", query=body.rsplit(" ", 1)[0], room=room, limit=10)
            texts.append(json.dumps(doc, ensure_ascii=False))
        around = await call(session, "context", event=ids[2], room=room, before=10, after=10)
        texts.append(json.dumps(around, ensure_ascii=False))
        found = await call(session, "search", query="password wrong again", room=room)
    for _, value in (*PROSE, ("", "Late3plum")):
        assert not any(value in t for t in texts), value
    assert late in {m["event_id"] for m in around["messages"]}  # read live, and scrubbed
    listed = [m for h in found["hits"] for m in h["messages"]]
    assert any(m["event_id"] == talk and m["body"] == TALK for m in listed)
