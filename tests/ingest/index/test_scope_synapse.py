"""Scope rules 1–4 end to end: which rooms the writer reads, against the real Synapse.

Every test has its own client-mode reader user, so its joined-room set is its own. What "never
read" means is proved on the wire: `CountingReader` records every request path the writer made.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.demo.client import unique_localpart
from ingest.errors import EmbedUnavailable, StoreError
from ingest.index.records import CURSOR_PREFIX, REFUSED_PREFIX
from ingest.index.refresh import Writer
from ingest.index.reports import RefreshReport, RoomReport
from ingest.types import EmbedderIdentity, RoomID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    CountingReader,
    FlakyCollection,
    Indexer,
    PartialStateReader,
    RecordingEmbedder,
    RenamedEmbedder,
    admit,
    reader_config,
    shared_embedder,
)

READS = ("/messages", "/event/", "/relations/", "/context/")


def _by_room(report: RefreshReport) -> dict[str, RoomReport]:
    return {r.room_id: r for r in report.rooms}


def _reads(reader: CountingReader, room_id: str) -> list[str]:
    """Requests that read a room's timeline (state reads are how scope decides)."""
    return [p for p in reader.touched(room_id) if any(r in p for r in READS)]


def _indexer(
    hs: Homeserver,
    reader: MatrixUser,
    tmp_path: Path,
    reader_class: type[CountingReader] = CountingReader,
    **extra: object,
) -> Indexer:
    cfg = reader_config(hs, reader, tmp_path, **extra)
    return Indexer(cfg, reader=reader_class.counting(cfg))


async def test_scope_refuses_dm_excluded_and_bridged_rooms_indexes_ordinary(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Of DMs, excluded, bridged and puppet rooms and one public room, only the last is indexed."""
    reader = await hs.register(displayname="Reader")
    rooms: dict[str, str] = {}

    # DM, is_direct variant: the reader is invited with is_direct and has no m.direct entry.
    rooms["dm_invite"] = await alice.create_room(
        preset="trusted_private_chat", invite=[reader.user_id], is_direct=True
    )
    await reader.join(rooms["dm_invite"])
    # DM, m.direct variant: an ordinary invite, but the reader's m.direct lists the room.
    rooms["dm_mdirect"] = await hs.fresh_room(alice, preset="private_chat")
    await admit(alice, rooms["dm_mdirect"], reader)
    await reader.add_direct(alice.user_id, rooms["dm_mdirect"])

    canonical, alt = unique_localpart("members"), unique_localpart("patrons")
    rooms["canonical_alias"] = await hs.fresh_room(alice)
    await alice.set_canonical_alias(rooms["canonical_alias"], f"#{canonical}:{hs.server_name}")
    rooms["alt_alias"] = await hs.fresh_room(alice)
    await alice.set_canonical_alias(
        rooms["alt_alias"],
        "#" + unique_localpart("open") + f":{hs.server_name}",
        [f"#{alt}:{hs.server_name}"],
    )
    rooms["room_id"] = await hs.fresh_room(alice)

    rooms["m_bridge"] = await hs.fresh_room(alice)
    key = "org.example.discord://guild/1"
    content = {"bridgebot": alice.user_id, "protocol": {"id": "discord"}, "channel": {"id": "1"}}
    await alice.send_state(rooms["m_bridge"], "m.bridge", content, key)
    rooms["half_shot"] = await hs.fresh_room(alice)
    await alice.send_state(rooms["half_shot"], "uk.half-shot.bridge", content, key)

    # Synapse refuses to register a localpart starting with "_" outside an appservice namespace,
    # so the member is in the other default namespace, `@discord_.*`.
    puppet = await hs.register(unique_localpart("discord_123"))
    rooms["puppet"] = await hs.fresh_room(alice)
    await puppet.join(rooms["puppet"])

    rooms["ordinary"] = await hs.fresh_room(alice)
    for name, room_id in rooms.items():
        if not name.startswith("dm_"):
            await admit(alice, room_id, reader)
        await alice.send_text(room_id, f"secret words of {name} zq{name}zq")

    async with _indexer(
        hs,
        reader,
        tmp_path,
        scope={
            "exclude_aliases": ["#members", f"#{canonical}", f"#{alt}"],
            "exclude_room_ids": [rooms["room_id"]],
        },
    ) as ix:
        report = _by_room(await ix.refresh())
        expected = {
            "dm_invite": "dm",
            "dm_mdirect": "dm",
            "canonical_alias": "excluded",
            "alt_alias": "excluded",
            "room_id": "excluded",
            "m_bridge": "bridged",
            "half_shot": "bridged",
            "puppet": "bridged",
            "ordinary": "eligible",
        }
        assert {name: report[rid].verdict for name, rid in rooms.items()} == expected
        assert "alt alias" in report[rooms["alt_alias"]].detail
        assert "canonical alias" in report[rooms["canonical_alias"]].detail
        assert list((await ix.bodies()).values()) == ["secret words of ordinary zqordinaryzq"]
        dump = await ix.dump()
        for name, room_id in rooms.items():
            if name != "ordinary":
                assert f"zq{name}zq" not in dump
                assert room_id not in dump
                assert _reads(ix.reader, room_id) == []  # type: ignore[arg-type]
        assert _reads(ix.reader, rooms["ordinary"])  # type: ignore[arg-type]


async def _reader_and_room(hs: Homeserver, alice: MatrixUser) -> tuple[MatrixUser, str]:
    """A fresh reader user and a fresh room of alice's it has joined."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await admit(alice, room, reader)
    return reader, room


async def _room_a_puppet_left(
    hs: Homeserver, alice: MatrixUser, said: str
) -> tuple[MatrixUser, str, MatrixUser]:
    """(reader, room, puppet): a room the reader joined where a puppet said `said` and left."""
    reader, room = await _reader_and_room(hs, alice)
    puppet = await hs.register(unique_localpart("discord_"))
    await puppet.join(room)
    await puppet.send_text(room, said)
    await puppet.leave(room)
    return reader, room, puppet


async def test_scope_refuses_a_room_a_puppet_spoke_in_and_left_before_reading_it(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A puppet that spoke and then left still makes the room bridged (rule 4: or sender), and
    the state shows it (its `leave` stays there): refused before a single event is read or
    embedded."""
    reader, room, puppet = await _room_a_puppet_left(hs, alice, "relayed from discord zqrelayzq")
    await alice.send_text(room, "local words zqlocalzq")
    async with _indexer(hs, reader, tmp_path) as ix:
        report = _by_room(await ix.refresh())
        assert report[room].verdict == "bridged"
        assert f"past member {puppet.user_id}" in report[room].detail
        assert not report[room].events_read
        assert _reads(ix.reader, room) == []  # type: ignore[arg-type]
        assert not any("zq" in d for d in ix.embedder.documents)
        dump = await ix.dump()
        assert "zqrelayzq" not in dump and "zqlocalzq" not in dump


async def test_scope_a_puppet_sender_the_state_does_not_name_is_caught_in_the_log(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """When the state the reader gets does not name the puppet (a partial state), the walk
    finds it as a sender: the room is purged, recorded as refused, and not walked again."""
    reader, room, _ = await _room_a_puppet_left(hs, alice, "relayed from discord zqrelayzq")
    await alice.send_text(room, "local words zqlocalzq")
    async with _indexer(hs, reader, tmp_path, PartialStateReader) as ix:
        report = _by_room(await ix.refresh())
        assert report[room].verdict == "bridged"
        assert "sender" in report[room].detail
        assert "zqrelayzq" not in await ix.dump()
        assert "zqlocalzq" not in await ix.dump()
        again = _by_room(await ix.refresh())  # remembered: the timeline is not walked again
        assert again[room].verdict == "bridged"
        assert not again[room].events_read
        dump = await ix.dump()
        assert "zqrelayzq" not in dump
        assert "zqlocalzq" not in dump


class DownEmbedder(RecordingEmbedder):
    """Ollama down from the start: even the identity probe fails."""

    async def probe(self) -> EmbedderIdentity:
        raise EmbedUnavailable("injected: the embedder is down")


async def test_scope_a_puppet_refusal_is_known_with_the_embedder_down_and_after_a_rebuild(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """The record "a puppet spoke here" is what the bot asks before answering in a room whose
    log no longer shows the puppet. A process whose embedder is down at start still reads it
    (the bot degrades instead of refusing every room), and a rebuild into a new generation
    carries it, so the new generation refuses the room without reading it again."""
    reader, room, puppet = await _room_a_puppet_left(hs, alice, "relayed from discord zqcarryzq")
    # Refused by sender: recorded.
    async with _indexer(hs, reader, tmp_path, PartialStateReader) as ix:
        assert _by_room(await ix.refresh())[room].verdict == "bridged"
        down = Writer(ix.cfg, ix.reader, ix.store, DownEmbedder(shared_embedder()))
        assert await down.refused_by_puppet(RoomID(room)) == puppet.user_id
        with pytest.raises(EmbedUnavailable):
            await down.open()  # the premise: this writer cannot open its generation
        rebuild = Writer(ix.cfg, ix.reader, ix.store, RenamedEmbedder(shared_embedder(), "v2"))
        col = await rebuild.open()
        assert rebuild.generation != ix.writer.generation
        assert await asyncio.to_thread(col.get_meta, REFUSED_PREFIX + room) is not None
        full = await rebuild.refresh()
        assert full.activated  # the rebuild is complete: the old generation is dropped
        report = _by_room(full)
        assert report[room].verdict == "bridged"
        assert not report[room].events_read
        assert await rebuild.refused_by_puppet(RoomID(room)) == puppet.user_id


async def test_scope_a_refusal_recorded_before_its_purge_purges_on_the_next_pass(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A writer killed between recording a puppet refusal and purging the room: the next pass
    finds the record and purges, instead of leaving the room's points for good (rules 4, 10)."""
    reader, room = await _reader_and_room(hs, alice)
    await alice.send_text(room, "words before the crash zqcrashzq")
    async with _indexer(hs, reader, tmp_path) as ix:
        await ix.refresh()
        assert "zqcrashzq" in await ix.dump()
        puppet = f"@discord_9:{hs.server_name}"
        marker = {"user_id": puppet, "detail": f"bridged: sender {puppet} is a puppet"}
        col = await ix.collection()
        await asyncio.to_thread(col.put_meta, REFUSED_PREFIX + room, marker)  # then the kill
        report = _by_room(await ix.refresh())
        assert report[room].verdict == "bridged"
        assert "zqcrashzq" not in await ix.dump()


async def test_scope_never_joined_room_is_never_read(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A world-readable room the reader never joined gets no request, even when named in `only`."""
    reader, _ = await _reader_and_room(hs, alice)
    stranger = await hs.fresh_room(alice)
    await alice.set_history_visibility(stranger, "world_readable")
    await alice.send_text(stranger, "peekable words zqpeekzq")
    # The homeserver would answer: reading it is the writer's choice, not a server refusal.
    assert (await reader.messages(stranger))["chunk"]
    async with _indexer(hs, reader, tmp_path) as ix:
        full = _by_room(await ix.refresh())
        assert stranger not in full
        only = _by_room(await ix.refresh([RoomID(stranger)]))
        assert only[stranger].verdict == "not_joined"
        assert ix.reader.touched(stranger) == []  # type: ignore[attr-defined]
        assert "zqpeekzq" not in await ix.dump()


async def test_scope_left_room_is_purged_on_next_refresh(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """After the reader leaves a room, the next refresh deletes its points and cursor."""
    reader = await hs.register()
    left, stays = await hs.fresh_room(alice), await hs.fresh_room(alice)
    for room_id, body in ((left, "words of the left room zqleftzq"), (stays, "kept")):
        await admit(alice, room_id, reader)
        await alice.send_text(room_id, body)
    async with _indexer(hs, reader, tmp_path) as ix:
        await ix.refresh()
        assert "zqleftzq" in await ix.dump()
        await reader.leave(left)
        report = _by_room(await ix.refresh())
        assert report[left].purged_room and report[left].verdict == "not_joined"
        dump = await ix.dump()
        assert "zqleftzq" not in dump
        assert CURSOR_PREFIX + left not in dump
        assert list((await ix.bodies()).values()) == ["kept"]
        await alice.send_text(left, "said after the reader left zqafterzq")
        await ix.refresh()
        assert "zqafterzq" not in await ix.dump()


async def test_scope_left_room_is_purged_after_a_crash_in_its_first_page(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Regression: points written before a room's first cursor save are found when it leaves.

    The writer learnt which rooms it holds from their cursors and saved the first cursor only
    after the first page's upsert, so a fault between the two left points no purge could find.
    """
    reader, room = await _reader_and_room(hs, alice)
    await alice.send_text(room, "written before the crash zqorphanzq")
    async with _indexer(hs, reader, tmp_path) as ix:
        col = await ix.collection()
        ix.writer.collection = FlakyCollection(col, fail_upserts=0, fail_cursor_saves=True)
        with pytest.raises(StoreError, match="cursor"):
            await ix.refresh()
        ix.writer.collection = col
        await reader.leave(room)
        await ix.refresh()
        assert await ix.points() == []
        assert "zqorphanzq" not in await ix.dump()


@pytest.mark.parametrize("change", ["m.bridge", "uk.half-shot.bridge", "puppet", "m.direct"])
async def test_scope_room_refused_after_indexing_is_purged(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path, change: str
) -> None:
    """A room that becomes bridged (or a DM) after it was indexed is purged on the next refresh."""
    reader, room = await _reader_and_room(hs, alice)
    await alice.send_text(room, "indexed before the bridge zqbeforezq")
    async with _indexer(hs, reader, tmp_path) as ix:
        await ix.refresh()
        assert "zqbeforezq" in await ix.dump()
        if change == "puppet":
            puppet = await hs.register(unique_localpart("discord_"))
            await puppet.join(room)
        elif change == "m.direct":
            await reader.add_direct(alice.user_id, room)
        else:
            content = {"bridgebot": alice.user_id, "protocol": {"id": "irc"}}
            await alice.send_state(room, change, content, "org.example.irc://net/chan")
        await alice.send_text(room, "bridged now zqafterzq")
        report = _by_room(await ix.refresh())
        assert report[room].purged_room
        assert report[room].verdict == ("dm" if change == "m.direct" else "bridged")
        dump = await ix.dump()
        assert "zqbeforezq" not in dump and "zqafterzq" not in dump
        assert await ix.points() == []
