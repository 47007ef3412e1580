"""MCP `search`'s reads of issue 49 through the reference SDK client: `has`, `context`, `match`,
`reply_to` and `indexing`, against a help desk indexed from the real Synapse
(`tests.bot.answers`), with the privacy every answer keeps."""

from __future__ import annotations

import json

import pytest_asyncio

from bot.config import parse_config
from bot.demo.synapse import free_port
from bot.service.run import Service
from ingest.rules import lexical
from tests.bot.answers import EDITED_AWAY, REDACTED, SECRET, Desk, said, seed_desk
from tests.bot.mcp.harness import call, muninn_mcp, names, refusal
from tests.bot.search_contract import check_contract
from tests.homeserver import Homeserver
from tests.indexing import shared_embedder, write_config

HIDDEN = (REDACTED, EDITED_AWAY, SECRET)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def desk(hs: Homeserver, tmp_path_factory: object) -> Desk:
    return await seed_desk(hs, tmp_path_factory.mktemp("desk"))  # type: ignore[attr-defined]


async def test_mcp_search_lists_its_new_arguments_and_msgtype(desk: Desk) -> None:
    """The schema takes `has`, `context` (0-10), `match` and `reply_to`, `query` is optional
    (with `reply_to`), and the descriptions name them and `msgtype`; the result's schema names
    `indexing` and a message's `msgtype` and `context`."""
    async with muninn_mcp(desk.config) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    search = tools["search"]
    props = search.input_schema["properties"]
    assert {"has", "context", "match", "reply_to", "has_link"} <= set(props)
    assert "query" not in search.input_schema.get("required", [])
    assert (props["context"]["minimum"], props["context"]["maximum"]) == (0, 10)
    for word in ("msgtype", "indexing", "`has`", "`context: N`", '`match: "words"`', "reply_to"):
        assert word in (search.description or ""), word
    assert "msgtype" in (tools["context"].description or "")
    schema = json.dumps(search.output_schema)
    assert all(k in schema for k in ('"indexing"', '"msgtype"', '"context"', '"before"'))


async def test_mcp_search_has_keeps_links_and_media_and_refuses_other_kinds(desk: Desk) -> None:
    """`has: "image"` lists images only (msgtype m.image, found by caption), a list keeps any
    of its kinds, `has: "link"` is `has_link`; another kind is refused naming `has`."""
    ids = desk.ids
    async with muninn_mcp(desk.config) as session:
        images = await call(session, "search", query="server cabinet key", has="image", limit=20)
        either = await call(
            session, "search", query="cabinet", has=["file", "image"], room=desk.desk, limit=20
        )
        links = await call(session, "search", query="key policy", has="link", room=desk.desk)
        linked = await call(session, "search", query="key policy", has_link=True, room=desk.desk)
        bad = await refusal(session, "search", query="cabinet", has="pdf")
        many = await refusal(session, "search", query="cabinet", has=["image"] * 6)
    check_contract(images, desk.server_name)
    assert ids["image"] in said(images)
    assert {m["msgtype"] for m in said(images).values()} == {"m.image"}
    assert said(images)[ids["image"]]["body"] == "IMG_5512.jpg — the server cabinet key hook"
    assert {ids["image"], ids["file"]} <= set(said(either))
    assert {m["msgtype"] for m in said(either).values()} == {"m.image", "m.file"}
    assert list(said(links)) == list(said(linked)) == [ids["wiki"]]
    assert names("has", bad) and "link" in bad and "audio" in bad
    assert names("has", many)


async def test_mcp_search_context_reads_each_hit_as_the_context_tool_does(desk: Desk) -> None:
    """`context: 2` puts before and after each hit's best message the messages the `context`
    tool shows around it, read now: edits applied, redactions gone, secrets scrubbed; 11 is
    refused naming `context`; 0 adds nothing."""
    async with muninn_mcp(desk.config) as session:
        doc = await call(session, "search", query="spare key server cabinet", context=2, limit=5)
        plain = await call(session, "search", query="spare key server cabinet", limit=5)
        widest = await call(session, "search", query="key", context=10, limit=20)
        tools = []
        for hit in doc["hits"]:
            tools.append(await call(session, "context", event=hit["permalink"], before=2, after=2))
        bad = await refusal(session, "search", query="key", context=11)
    check_contract(doc, desk.server_name)
    check_contract(widest, desk.server_name)
    assert doc["hits"] and not any("context" in m for m in said(plain).values())
    for hit, shown in zip(doc["hits"], tools, strict=True):
        best = next(m for m in hit["messages"] if m["event_id"] == hit["best_event_id"])
        around = shown["messages"]
        centre = [m["event_id"] for m in around].index(hit["best_event_id"])
        assert best["context"] == {"before": around[:centre], "after": around[centre + 1 :]}
        others = [m for m in hit["messages"] if m is not best]
        assert not any("context" in m for m in others)
    sides = [c for m in said(widest).values() for c in m.get("context", {}).values()]
    beside = {c["event_id"]: c["body"] for side in sides for c in side}
    assert desk.ids["edited"] in beside and desk.ids["redacted"] not in beside
    assert beside[desk.ids["edited"]] == "ask the night guard at reception for the key"
    text = json.dumps(widest)
    assert not any(word in text for word in HIDDEN)
    assert names("context", bad)


async def test_mcp_search_match_words_lists_only_messages_holding_every_word(desk: Desk) -> None:
    """`match: "words"` answers from the words alone (retrievers: lexical, no model): every
    message listed holds each word of the query in some form (any case, `word*`), the messages
    holding one of them only are not listed; the default reads by meaning too."""
    ids = desk.ids
    async with muninn_mcp(desk.config) as session:
        words = await call(session, "search", query="px-4471 GASKET", match="words", limit=20)
        prefix = await call(session, "search", query="PX-4471 gask*", match="words", limit=20)
        meaning = await call(session, "search", query="px-4471 GASKET", limit=20)
        bad = await refusal(session, "search", query="gasket", match="exact")
    check_contract(words, desk.server_name)
    assert words["retrievers"] == ["lexical"] and "dense" in meaning["retrievers"]
    listed = said(words)
    assert {ids["answer"], ids["gasket"]} <= set(listed) and ids["part"] not in listed
    for m in listed.values():
        assert {"px-4471", "gasket"} <= set(lexical.tokens(m["body"])), m["body"]
    assert set(said(prefix)) == set(listed) and meaning["hits"]
    assert names("match", bad) and "words" in bad


async def test_mcp_search_reply_to_lists_the_replies_and_the_thread(desk: Desk) -> None:
    """`reply_to` a question lists its rich replies and its thread, in the order sent, as they
    read now (the edited one by its new words, the redacted one gone, the secret scrubbed);
    with `query`, those holding its words; a bare event id takes its one room; a DM's or a
    bridged room's message is refused naming `room`, a redacted one naming `reply_to`."""
    ids = desk.ids
    async with muninn_mcp(desk.config) as session:
        doc = await call(session, "search", reply_to=desk.link("question"), limit=20)
        newest = await call(
            session, "search", reply_to=desk.link("question"), sort="recent", limit=2
        )
        bare = await call(session, "search", reply_to=ids["question"], room=desk.desk, limit=20)
        worded = await call(
            session, "search", query="gasket", reply_to=ids["question"], room=desk.desk
        )
        thread = await call(session, "search", reply_to=desk.link("question"), in_thread=True)
        beside = await call(session, "search", reply_to=desk.link("question"), context=1)
        dm = await refusal(session, "search", reply_to=desk.link("dm_q", desk.dm))
        bridged = await refusal(session, "search", reply_to=desk.link("bridged_q", desk.bridged))
        gone = await refusal(session, "search", reply_to=desk.link("redacted"))
        lonely = await refusal(session, "search", reply_to=ids["question"])
        neither = await refusal(session, "search", limit=3)
    check_contract(doc, desk.server_name)
    order = [h["best_event_id"] for h in doc["hits"]]
    assert order == [ids[k] for k in ("answer", "thread1", "thread2", "edited", "secret")]
    assert doc["next_offset"] is None and doc["indexing"] == []
    assert said(doc)[ids["edited"]]["body"] == "ask the night guard at reception for the key"
    assert SECRET not in json.dumps(doc) and REDACTED not in json.dumps(doc)
    assert [h["best_event_id"] for h in newest["hits"]] == [ids["secret"], ids["edited"]]
    assert newest["next_offset"] == 2
    assert [h["best_event_id"] for h in bare["hits"]] == order
    assert [h["best_event_id"] for h in worded["hits"]] == [ids["answer"]]
    assert [h["best_event_id"] for h in thread["hits"]] == [ids["thread1"], ids["thread2"]]
    assert all(h["thread_root"] == ids["question"] for h in thread["hits"])
    check_contract(beside, desk.server_name)
    for hit in beside["hits"]:  # each reply with the message before and after it
        around = hit["messages"][0]["context"]
        assert len(around["before"]) == len(around["after"]) == 1
    assert names("room", dm) and "private cabinet" not in dm
    assert names("room", bridged) and "refused" in bridged
    assert names("reply_to", gone) and names("room", lonely)
    assert names("query", neither)


async def test_mcp_search_indexing_names_the_rooms_not_read_or_behind(desk: Desk) -> None:
    """`indexing` lists a searched room joined since the last pass as `not_read` and one that
    was said more in since as `behind` (with its lag), never a DM or a refused room; a search
    of current rooms only says `[]`."""
    async with muninn_mcp(desk.config) as session:
        every = await call(session, "search", query="cabinet key", limit=3)
        current = await call(session, "search", query="quiet room key", room=desk.quiet)
        annex = await call(session, "search", query="annex cabinet key", room=desk.annex)
    check_contract(every, desk.server_name)
    listed = {r["room_id"]: r for r in every["indexing"]}
    assert desk.dm not in listed and desk.bridged not in listed and desk.quiet not in listed
    assert listed[desk.annex]["reason"] == "not_read"
    assert listed[desk.annex]["indexed_ts"] is None and listed[desk.annex]["lag_seconds"] is None
    assert listed[desk.desk]["reason"] == "behind" and listed[desk.desk]["lag_seconds"] >= 0
    assert current["indexing"] == [] and current["hits"]
    assert annex["hits"] == [] and [r["reason"] for r in annex["indexing"]] == ["not_read"]


async def test_mcp_search_reads_the_same_beside_the_running_service(desk: Desk) -> None:
    """While `muninn run` holds the store, `search` asks its listener (read token) and still
    matches by words alone, reads each hit's context and says which rooms are not read (from
    the service's status)."""
    doc = {**desk.doc, "metrics": {"port": free_port()}}
    config = write_config(desk.folder / "serving.yaml", doc)
    service = Service(
        parse_config(doc, desk.folder), embedder=shared_embedder(), full_at_start=False
    )
    await service.start()
    try:
        async with muninn_mcp(config) as session:
            words = await call(
                session, "search", query="PX-4471 gasket", match="words", context=1, limit=20
            )
    finally:
        await service.stop()
    check_contract(words, desk.server_name)
    assert words["retrievers"] == ["lexical"]
    assert {desk.ids["answer"], desk.ids["gasket"]} <= set(said(words))
    assert desk.ids["part"] not in said(words)
    best = [m for h in words["hits"] for m in h["messages"] if m["event_id"] == h["best_event_id"]]
    assert best and all("context" in m for m in best)
    # the service reads new rooms as it runs: whichever it has not read yet are named
    assert isinstance(words["indexing"], list)
