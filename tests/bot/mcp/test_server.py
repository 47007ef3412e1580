"""`muninn mcp` as an agent host runs it (`tests.bot.mcp.harness`): the four tools, what they
answer and never answer, their refusals, and beside a running `muninn run`.
"""

from __future__ import annotations

import json

from bot.config import parse_config
from bot.demo.synapse import free_port
from bot.service.run import Service
from tests.bot.mcp.harness import (
    EDITED_AWAY,
    IN_DM,
    PURGED,
    REDACTED,
    SECRET,
    Seeded,
    call,
    event_ids,
    muninn_mcp,
    names,
    refusal,
)
from tests.bot.search_contract import check_contract
from tests.indexing import shared_embedder, write_config
from tests.inprocess import muninn_here


async def test_mcp_lists_the_four_read_only_tools_with_argument_schemas(seeded: Seeded) -> None:
    """An agent host sees search, context, pins and rooms, each with a JSON schema of its
    arguments (bounds included) and of its result, and marked read-only."""
    async with muninn_mcp(seeded.config) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"search", "context", "pins", "rooms"}
    search = tools["search"].input_schema
    # `query` is optional since issue 49: `reply_to` lists answers without one
    assert "query" in search["properties"] and search.get("required", []) == []
    assert {"room", "sender", "after", "before", "limit", "cursor"} <= set(search["properties"])
    assert (
        search["properties"]["limit"]["minimum"],
        search["properties"]["limit"]["maximum"],
    ) == (
        1,
        50,
    )
    assert tools["context"].input_schema["required"] == ["event"]
    assert tools["pins"].input_schema["required"] == ["room"]
    assert all(t.annotations and t.annotations.read_only_hint for t in tools.values())
    # Results are documented too: the §4.3 document, the board, the rooms, the context.
    outputs = {name: t.output_schema or {} for name, t in tools.items()}
    assert {"hits", "next_offset"} <= set(outputs["search"]["properties"])
    assert {"room_id", "pins"} <= set(outputs["pins"]["properties"])
    assert {"rooms"} <= set(outputs["rooms"]["properties"])
    assert {"event_id", "messages"} <= set(outputs["context"]["properties"])
    assert all(t.description for t in tools.values())


async def test_mcp_search_pages_with_a_cursor_and_cites_permalinks(seeded: Seeded) -> None:
    """`search` returns the `muninn search --json` document; `next_offset` as `cursor` gives
    the next page, which repeats no message; `room` takes a short alias."""
    async with muninn_mcp(seeded.config) as session:
        first = await call(session, "search", query="kiwi", limit=2)
        check_contract(first, seeded.server_name)
        assert len(first["hits"]) == 2 and first["next_offset"] is not None
        for hit in first["hits"]:
            assert hit["permalink"].startswith("https://matrix.to/#/")
        second = await call(session, "search", query="kiwi", limit=2, cursor=first["next_offset"])
        check_contract(second, seeded.server_name)
        assert second["hits"] and not set(event_ids(first)) & set(event_ids(second))
        short = "#" + seeded.kiwi_alias[1:].split(":")[0]
        only = await call(session, "search", query=["kiwi", "orchard"], room=short, limit=20)
    assert only["hits"] and {h["room_id"] for h in only["hits"]} == {seeded.kiwi}


async def test_mcp_context_pins_and_rooms_answer_as_the_cli(seeded: Seeded) -> None:
    """`context` reads the conversation around a hit from its permalink; `pins` is the board
    `muninn pins --json` prints; `rooms` lists the searchable rooms with their freshness."""
    ids = seeded.ids
    async with muninn_mcp(seeded.config) as session:
        hit = (await call(session, "search", query="kiwi export paperwork"))["hits"][0]
        assert ids["export"] in hit["event_ids"]
        ctx = await call(session, "context", event=hit["permalink"], before=1, after=1)
        bare = await call(session, "context", event=ids["export"], room=seeded.kiwi, after=0)
        board = await call(session, "pins", room=seeded.kiwi_alias)
        rooms = await call(session, "rooms")
    assert ctx["room_id"] == seeded.kiwi and ctx["event_id"] == ids["export"]
    assert [m["event_id"] for m in ctx["messages"]] == [
        ids["harvest"],
        ids["export"],
        ids["truck"],
    ]
    assert ctx["messages"][1]["body"] == "kiwi export paperwork is done"
    assert all(m["permalink"].startswith("https://matrix.to/#/") for m in ctx["messages"])
    assert [m["event_id"] for m in bare["messages"]][-1] == ids["export"]
    cli = await muninn_here(seeded.config, "pins", seeded.kiwi_alias, "--json")
    assert board == json.loads(cli.out)
    assert [(p["target"], p["label"]) for p in board["pins"]] == [(ids["harvest"], "season")]
    listed = {r["room_id"]: r for r in rooms["rooms"]}
    assert set(listed) == {seeded.kiwi, seeded.other}  # never the DM
    kiwi = listed[seeded.kiwi]
    assert (kiwi["room_alias"], kiwi["name"], kiwi["indexed"]) == (seeded.kiwi_alias, "kiwi", True)
    assert kiwi["points"] > 0 and kiwi["lag_seconds"] >= 0


async def test_mcp_never_returns_a_dm_redacted_edited_purged_or_secret_text(
    seeded: Seeded,
) -> None:
    """Every tool, asked for each hidden word and around each hidden message: a DM's message,
    one redacted, the words an edit took back and one a pending purge covers (all since
    indexing), and a secret, are in no result; around a hidden message nothing is quoted."""
    ids, texts = seeded.ids, []
    hidden = (REDACTED, EDITED_AWAY, PURGED, SECRET, IN_DM)
    async with muninn_mcp(seeded.config) as session:
        for word in hidden:
            doc = await call(session, "search", query=f"kiwi {word}", limit=50)
            texts.append(json.dumps(doc))
        whole = await call(session, "context", event=ids["truck"], room=seeded.kiwi, after=25)
        texts += [json.dumps(whole), json.dumps(await call(session, "rooms"))]
        texts.append(json.dumps(await call(session, "pins", room=seeded.kiwi)))
        for key in ("redacted", "purged"):
            said = await refusal(session, "context", event=ids[key], room=seeded.kiwi)
            assert names("event", said)
        said = await refusal(session, "context", event=ids["dm"], room=seeded.dm)
        assert "refused" in said and IN_DM not in said
        texts.append(await refusal(session, "pins", room=seeded.dm))
    shown = [m["event_id"] for m in whole["messages"]]
    assert ids["edited"] in shown and ids["secret"] in shown  # shown, as they read now
    assert ids["redacted"] not in shown and ids["purged"] not in shown
    edited = next(m for m in whole["messages"] if m["event_id"] == ids["edited"])
    assert edited["body"] == "kiwi price is twelve euros a crate"
    for word in hidden:
        assert not any(word in t for t in texts), word


async def test_mcp_bad_arguments_are_errors_naming_them_and_the_next_call_answers(
    seeded: Seeded,
) -> None:
    """An unknown room, a bad date, a limit out of range, an unknown or malformed event, a
    wrong type and hostile sizes are tool errors naming the argument; the server goes on
    answering."""
    async with muninn_mcp(seeded.config) as session:
        bad = {
            "room": ("search", {"query": "kiwi", "room": "#no-such-room"}),
            "after": ("search", {"query": "kiwi", "after": "last blue moon"}),
            "limit": ("search", {"query": "kiwi", "limit": 500}),
            "cursor": ("search", {"query": "kiwi", "cursor": -1}),
            "query": ("search", {"query": ""}),
            "exclude": ("search", {"query": "kiwi", "exclude": [f"w{i}" for i in range(20)]}),
            "sender": ("search", {"query": "kiwi", "sender": ["@a:hs"] * 101}),
            "event": ("context", {"event": "$nope:x", "room": seeded.kiwi}),
        }
        for argument, (tool, arguments) in bad.items():
            assert names(argument, await refusal(session, tool, **arguments)), argument
        assert names("event", await refusal(session, "context", event="not an event"))
        assert names("room", await refusal(session, "pins", room=42))
        # Hostile sizes: a megabyte of query or event id is refused by name, not read.
        assert names("query", await refusal(session, "search", query="kiwi " * 200_000))
        assert names("event", await refusal(session, "context", event="$" + "e" * 1_000_000))
        doc = await call(session, "search", query="kiwi harvest")
    assert seeded.ids["harvest"] in event_ids(doc)


async def test_mcp_rooms_in_the_config_narrow_every_tool(seeded: Seeded) -> None:
    """With `mcp.rooms` listing the kiwi room, no tool answers from or about another room."""
    async with muninn_mcp(seeded.narrowed) as session:
        doc = await call(session, "search", query="kiwi tasting friday", limit=50)
        rooms = await call(session, "rooms")
        said = await refusal(session, "pins", room=seeded.other)
        again = await refusal(session, "search", query="kiwi", room=seeded.other)
        ctx = await refusal(session, "context", event=seeded.ids["other"], room=seeded.other)
    assert {h["room_id"] for h in doc["hits"]} <= {seeded.kiwi}
    assert seeded.ids["other"] not in event_ids(doc)
    assert [r["room_id"] for r in rooms["rooms"]] == [seeded.kiwi]
    assert all("mcp.rooms" in t and names("room", t) for t in (said, again, ctx))


async def test_mcp_asks_the_running_service_while_it_holds_the_store(seeded: Seeded) -> None:
    """Beside `muninn run` (which holds the embedded store), `search` and `rooms` answer
    through its loopback listener, as `muninn search` and `muninn status` do, but with the read
    token only (issue 46): with the write token's file spoiled they still answer, so the
    process never used it (it read that file and was refused)."""
    port = free_port()
    doc = {**seeded.doc, "metrics": {"port": port}}
    config = write_config(seeded.folder / "serving.yaml", doc)
    service = Service(
        parse_config(doc, seeded.folder), embedder=shared_embedder(), full_at_start=False
    )
    await service.start()
    try:
        assert service.api is not None and service.api.token_file is not None
        service.api.token_file.write_text("not-the-token\n")  # the service keeps its own copy
        async with muninn_mcp(config) as session:
            found = await call(session, "search", query="kiwi harvest monday")
            rooms = await call(session, "rooms")
    finally:
        await service.stop()
    assert seeded.ids["harvest"] in event_ids(found)
    assert seeded.kiwi in {r["room_id"] for r in rooms["rooms"]}
