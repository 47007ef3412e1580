"""A help desk indexed from the real Synapse, for the search reads of issue 49 (`has`, `context`,
`match`, `reply_to`, `indexing`) through MCP and the CLI alike.

The desk room holds a question with rich replies and a thread, media, a link and part numbers;
since indexing, one reply was redacted, one edited, and a message sent (the room is behind). An
annex room was joined since (never read); a quiet room is current. A DM and a room bridged since
indexing hold a question and a reply each, never to be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.search.permalink import permalink
from tests.homeserver import Homeserver
from tests.indexing import Indexer, reader_config, reader_config_doc, utc_ms, write_config

# Words only messages no answer may show carry.
REDACTED, EDITED_AWAY, SECRET = "zebramatword", "quokkadesk", "Hunter2DeskSecret77"


@dataclass
class Desk:
    config: Path
    doc: dict[str, Any]  # the config's document
    folder: Path
    server_name: str
    desk: str  # room ids
    annex: str  # joined since indexing: never read
    quiet: str  # indexed and unchanged since
    dm: str
    bridged: str
    ids: dict[str, str]  # key → event id

    def link(self, key: str, room: str | None = None) -> str:
        return permalink(room or self.desk, self.ids[key], self.server_name)


async def seed_desk(hs: Homeserver, folder: Path) -> Desk:
    """Seed the rooms, index them into `folder`, then change what the index has not read."""
    reader = await hs.register(displayname="Reader")
    owner = await hs.register(displayname="Owner")
    seeder = await hs.seed_user()
    desk = await hs.fresh_room(owner, name="desk")
    quiet = await hs.fresh_room(owner, name="quiet")
    bridged = await hs.fresh_room(owner, name="bridged")
    for room in (desk, quiet, bridged):
        for user in (seeder, reader):
            await user.join(room)
    ids: dict[str, str] = {}
    start, minute = utc_ms("2024-08-01T09:00"), 60_000

    async def said(key: str, body: str, n: int, room: str = desk) -> None:
        ids[key] = await seeder.send_text(room, body, ts=start + n * minute)

    async def replied(key: str, to: str, body: str, n: int, room: str = desk) -> None:
        ids[key] = await seeder.send_reply(room, ids[to], body, ts=start + n * minute)

    await said("coffee", "the coffee machine on floor two is fixed", 0)
    await said("question", "where is the spare key for the server cabinet?", 1)
    await replied("answer", "question", "the spare key hangs behind the PX-4471 gasket box", 2)
    await said("part", "the PX-4471 order arrived today", 3)
    ids["thread1"] = await seeder.send_thread_reply(
        desk, ids["question"], "in the blue drawer of the cabinet, I think", ts=start + 4 * minute
    )
    ids["thread2"] = await seeder.send_thread_reply(
        desk,
        ids["question"],
        "no, facilities took the cabinet key",
        in_reply_to=ids["thread1"],
        ts=start + 5 * minute,
    )
    ids["image"] = await seeder.send_media(
        desk, "m.image", "IMG_5512.jpg", "the server cabinet key hook", ts=start + 6 * minute
    )
    ids["file"] = await seeder.send_media(
        desk, "m.file", "cabinet-inventory.xlsx", ts=start + 7 * minute
    )
    await said("wiki", "the key policy is at https://wiki.example.org/cabinet-keys", 8)
    await said("gasket", "a new gasket for the PX-4471 pump is on order", 9)
    # An hour later (a window of its own: a window with a message changed since indexing is
    # not shown until the next pass, rule 15), the replies that change.
    await replied("redacted", "question", f"the key is under the {REDACTED} by the door", 60)
    await replied("edited", "question", f"ask {EDITED_AWAY} at reception for the key", 61)
    await replied("secret", "question", f"the cabinet alarm password={SECRET}", 62)
    await said("lunch", "lunch is at noon today", 63)
    await said("quiet", "the quiet room key is with the caretaker", 0, quiet)
    await said("bridged_q", "where is the bridged cabinet key?", 0, bridged)
    await replied("bridged_a", "bridged_q", "the bridged cabinet key is in the safe", 1, bridged)
    peer = await hs.register()
    dm = await hs.make_dm(peer, reader)
    ids["dm_q"] = await peer.send_text(dm, "where is the private cabinet key?")
    ids["dm_a"] = await peer.send_reply(dm, ids["dm_q"], "the private cabinet key is mine")
    async with Indexer(reader_config(hs, reader, folder)) as indexer:
        await indexer.refresh()
    # Since indexing: what every read must apply, and what makes the desk behind.
    await seeder.redact(desk, ids["redacted"])
    await seeder.send_edit(desk, ids["edited"], "ask the night guard at reception for the key")
    await said("late", "late news: the cabinet lock is being replaced", 20)
    await owner.set_bridge_state(bridged, "desk-bridge")
    annex = await hs.fresh_room(owner, name="annex")
    await reader.join(annex)
    await owner.send_text(annex, "the annex cabinet key is on the hook")
    doc: dict[str, Any] = reader_config_doc(hs, reader, folder)
    config = write_config(folder / "config.yaml", doc)
    return Desk(config, doc, folder, hs.server_name, desk, annex, quiet, dm, bridged, ids)


def said(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every message of a search document's hits, by event id."""
    return {m["event_id"]: m for h in doc["hits"] for m in h["messages"]}
