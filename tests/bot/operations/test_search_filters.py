"""`muninn search --has-link / --in-thread / --outside-threads / --mentions` against a room
indexed from the real Synapse: the filters the chat's has:link, is:thread and mentions: are,
and a message redacted since indexing never shown through one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.bot.search_contract import check_contract, search_json
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, reader_config, reader_config_doc, utc_ms, write_config


def _events(doc: dict[str, Any]) -> set[str]:
    return {m["event_id"] for h in doc["hits"] for m in h["messages"]}


async def test_cli_search_link_thread_and_mention_filters(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """Each flag keeps only the messages it names; a redacted link is not shown."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    for user in (seeder, reader, bob):
        await user.join(room)
    ts = utc_ms("2024-07-01T10:00")
    hour = 3_600_000
    link = await seeder.send_text(room, "lantern notes: https://example.org/lantern", ts=ts)
    gone = await seeder.send_text(room, "lantern tickets: https://t.example.org", ts=ts + hour)
    plain = await seeder.send_text(room, "lantern planning is on monday", ts=ts + 2 * hour)
    root = await seeder.send_text(room, "lantern volunteers, reply here", ts=ts + 3 * hour)
    reply = await seeder.send_thread_reply(room, root, "lantern: I carry lamps", ts=ts + 4 * hour)
    content = {
        "msgtype": "m.text",
        "body": "Bob, the lantern budget is yours",
        "m.mentions": {"user_ids": [bob.user_id]},
    }
    mention = await seeder.send(room, "m.room.message", content, ts=ts + 5 * hour)
    indexer = Indexer(reader_config(hs, reader, tmp_path))
    try:
        await indexer.refresh()
    finally:
        await indexer.close()
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    await seeder.redact(room, gone)

    links = await search_json(config, "lantern", "--has-link", "--limit", "20")
    check_contract(links, hs.server_name)
    assert _events(links) == {link}
    threads = await search_json(config, "lantern", "--in-thread", "--limit", "20")
    assert _events(threads) == {reply}
    mentioned = await search_json(
        config, "lantern", "--mentions", bob.user_id, "--outside-threads", "--limit", "20"
    )
    assert _events(mentioned) == {mention}
    assert plain not in _events(links) | _events(threads) | _events(mentioned)
