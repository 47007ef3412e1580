"""The `muninn mcp` test harness: one seeded homeserver and index for the session, and the
server run as an agent host runs it, a child process driven by the reference SDK's own stdio
client (`mcp.client.stdio.stdio_client`, `ClientSession`).

The index: a kiwi room holding messages that go stale after indexing (redacted, edited,
purged), a secret and a pin; a second room; a DM of the reader.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.homeserver import Homeserver
from tests.indexing import (
    PROJECT,
    Indexer,
    reader_config,
    reader_config_doc,
    utc_ms,
    write_config,
)
from tests.inprocess import muninn_here

# Words only the messages no tool may return carry (each also in a message that stays, "kiwi").
REDACTED, EDITED_AWAY, PURGED, SECRET, IN_DM = (
    "zebrafence",
    "quokkaprice",
    "wombatvault",
    "hunter2kiwisecret",
    "platypusnote",
)


@dataclass
class Seeded:
    config: Path
    doc: dict[str, Any]  # the config's document
    folder: Path
    narrowed: Path  # the same index, `mcp.rooms` listing only the kiwi room
    server_name: str
    kiwi: str  # room ids
    other: str
    dm: str
    kiwi_alias: str
    ids: dict[str, str]  # key → event id
    seeder: str  # the user id who sent every kiwi and other message


async def seed(hs: Homeserver, folder: Path) -> Seeded:
    """Seed the homeserver, index it into `folder` and write the configs."""
    reader = await hs.register(displayname="Reader")
    owner = await hs.register(displayname="Owner")
    seeder = await hs.seed_user()
    local = f"kiwi-{folder.name}".replace("_", "-").lower()
    kiwi = await owner.create_room(name="kiwi", alias_localpart=local)
    other = await hs.fresh_room(owner, name="other")
    for room in (kiwi, other):
        for user in (seeder, reader):
            await user.join(room)
    ids: dict[str, str] = {}
    for key, when, body in (
        ("harvest", "2024-07-01T10:00", "kiwi harvest starts monday"),
        ("export", "2024-07-01T10:01", "kiwi export paperwork is done"),
        ("truck", "2024-07-01T10:02", "kiwi shipping to the port goes by truck"),
        ("redacted", "2024-07-03T10:00", f"kiwi {REDACTED} plan for the orchard"),
        ("edited", "2024-07-05T10:00", f"kiwi {EDITED_AWAY} is ten euros a crate"),
        ("purged", "2024-07-07T10:00", f"kiwi {PURGED} location is the old barn"),
        ("secret", "2024-07-09T10:00", f"kiwi vault password={SECRET} for the shed"),
        ("other", "2024-07-11T10:00", "kiwi tasting in the other room on friday"),
    ):
        room = other if key == "other" else kiwi
        ids[key] = await seeder.send_text(room, body, ts=utc_ms(when))
    dm_peer = await hs.register()
    dm = await hs.make_dm(dm_peer, reader)
    ids["dm"] = await dm_peer.send_text(dm, f"kiwi {IN_DM} only for you")
    indexer = Indexer(reader_config(hs, reader, folder))
    try:
        await indexer.refresh()
    finally:
        await indexer.close()  # the store is the CLI's now
    # Changed since indexing: no refresh has applied these yet, every tool must.
    await seeder.redact(kiwi, ids["redacted"])
    await seeder.send_edit(kiwi, ids["edited"], "kiwi price is twelve euros a crate")
    ids["pin"] = await owner.send_reply(kiwi, ids["harvest"], "!pin #season harvest date")
    doc = reader_config_doc(hs, reader, folder)
    config = write_config(folder / "config.yaml", doc)
    purge = await muninn_here(
        config, "purge", "--room", kiwi, "--from", "2024-07-07T09:59", "--to", "2024-07-07T10:01"
    )
    assert purge.rc == 0, purge.err
    alias = f"#{local}:{hs.server_name}"
    narrowed_doc = reader_config_doc(hs, reader, folder, mcp={"rooms": [f"#{local}"]})
    narrowed = write_config(folder / "narrowed.yaml", narrowed_doc)
    return Seeded(
        config, doc, folder, narrowed, hs.server_name, kiwi, other, dm, alias, ids, seeder.user_id
    )


@asynccontextmanager
async def muninn_mcp(config: Path, errlog: TextIO = sys.stderr) -> AsyncIterator[ClientSession]:
    """`muninn --config FILE mcp` in a child process, as an agent host starts it (its stderr,
    the log, to `errlog`)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.cli.main", "--config", str(config), "mcp"],
        cwd=PROJECT,
    )
    async with stdio_client(params, errlog) as streams, ClientSession(*streams) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's result document; the call must succeed."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    doc = result.structured_content
    assert isinstance(doc, dict)
    text = result.content[0]
    assert json.loads(getattr(text, "text", "")) == doc  # the same record as text, for hosts
    return doc


async def refusal(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A tool error's text; the call must fail."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


def names(argument: str, said: str) -> bool:
    """Whether a refusal names `argument`: `room: …` (ours) or the SDK's schema error, which
    puts the argument on a line of its own."""
    return re.search(rf"(^|\s){argument}(: |\n)", said) is not None


def event_ids(doc: dict[str, Any]) -> list[str]:
    return [e for h in doc["hits"] for e in h["event_ids"]]
