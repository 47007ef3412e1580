"""`muninn mcp` while the homeserver is down (issue 44): the seeded index, served by a config
whose homeserver nothing listens on. `rooms` answers from the store, marking what only the
homeserver knows; every other tool says the homeserver is unreachable, in the tool's words.
"""

from __future__ import annotations

from bot.demo.synapse import free_port
from tests.bot.mcp.harness import Seeded, call, muninn_mcp, names, refusal
from tests.indexing import write_config


def down(seeded: Seeded, **extra: object) -> dict[str, object]:
    """The seeded config's document, its homeserver a port nothing listens on."""
    url = f"http://127.0.0.1:{free_port()}"
    return {**seeded.doc, "homeserver": {**seeded.doc["homeserver"], "url": url}, **extra}


async def test_mcp_rooms_answers_from_the_store_while_the_homeserver_is_down(
    seeded: Seeded,
) -> None:
    """`rooms` lists the rooms the index holds (never the DM, never refused), each with its
    points and freshness, `room_alias` and `name` null and named in `unknown`, and a warning
    naming the homeserver; it failed as a whole before. `mcp.rooms` by id still narrows it."""
    doc = down(seeded)
    config = write_config(seeded.folder / "down.yaml", doc)
    only_kiwi = down(seeded, mcp={"rooms": [seeded.kiwi]})
    narrowed = write_config(seeded.folder / "down-narrowed.yaml", only_kiwi)
    async with muninn_mcp(config) as session:
        listed = await call(session, "rooms")
    async with muninn_mcp(narrowed) as session:
        kiwi_only = await call(session, "rooms")
    rooms = {r["room_id"]: r for r in listed["rooms"]}
    assert set(rooms) == {seeded.kiwi, seeded.other}
    kiwi = rooms[seeded.kiwi]
    assert kiwi["indexed"] and kiwi["points"] > 0 and kiwi["lag_seconds"] >= 0
    assert (kiwi["room_alias"], kiwi["name"], kiwi["unknown"]) == (
        None,
        None,
        ["room_alias", "name"],
    )
    [warning] = listed["warnings"]
    assert doc["homeserver"]["url"] in warning and "unreachable" in warning  # type: ignore[index]
    assert [r["room_id"] for r in kiwi_only["rooms"]] == [seeded.kiwi]


async def test_mcp_search_context_and_pins_name_the_homeserver_in_the_tools_words(
    seeded: Seeded,
) -> None:
    """Each tool that needs the homeserver says it is unreachable, naming it and what the tool
    reads from it, with no CLI flag (it ended `(--room)`); `search` says how imported rooms
    are still searched: by `room`."""
    async with muninn_mcp(write_config(seeded.folder / "down-2.yaml", down(seeded))) as session:
        said = [
            await refusal(session, "search", query="kiwi harvest"),
            await refusal(session, "search", query="kiwi", room=seeded.kiwi),
            await refusal(session, "context", event=seeded.ids["harvest"], room=seeded.kiwi),
            await refusal(session, "pins", room=seeded.kiwi),
        ]
    for text in said:
        assert text.startswith("the homeserver http://127.0.0.1:") and "unreachable" in text
        assert "--" not in text, text
    assert names("room", said[0]) or "`room`" in said[0]
