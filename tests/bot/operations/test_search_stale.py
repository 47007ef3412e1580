"""`muninn search` after the room changed since the last refresh: a redaction, an edit, a purge,
the reader leaving, the room turning bridged, encrypted or excluded. Each test seeds its own
room (two kiwi windows), indexes it in-process, releases the store, and runs the real CLI
(`bot.cli.main.main`, in this process: `tests.inprocess`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bot.search_contract import check_contract, search_json
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    Indexer,
    reader_config,
    reader_config_doc,
    utc_ms,
    write_config,
)
from tests.inprocess import muninn_here


@dataclass
class Kiwi:
    config: Path
    room_id: str
    harvest: str  # event id of the window that will go stale
    export: str  # event id of the window that stays
    reader: MatrixUser


async def kiwi_room(hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path) -> Kiwi:
    """Two one-message windows about kiwis, indexed by a fresh reader; the store is released."""
    reader = await hs.register()
    room_id = await hs.fresh_room(alice)
    for user in (seeder, reader):
        await user.join(room_id)
    harvest = await seeder.send_text(
        room_id, "kiwi harvest starts monday", ts=utc_ms("2024-07-01T10:00")
    )
    export = await seeder.send_text(
        room_id, "kiwi export paperwork is done", ts=utc_ms("2024-07-03T10:00")
    )
    indexer = Indexer(reader_config(hs, reader, tmp_path))
    try:
        await indexer.refresh()
        assert len(await indexer.points()) == 2
    finally:
        await indexer.close()
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    return Kiwi(config, room_id, harvest, export, reader)


def event_ids(doc: dict[str, Any]) -> list[str]:
    return [e for h in doc["hits"] for e in h["event_ids"]]


async def test_cli_search_drops_a_hit_redacted_since_indexing(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A window whose message was redacted after the last refresh is dropped and counted."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    before = await search_json(kiwi.config, "kiwi")
    assert set(event_ids(before)) == {kiwi.harvest, kiwi.export}
    await seeder.redact(kiwi.room_id, kiwi.harvest)
    after = await search_json(kiwi.config, "kiwi")
    check_contract(after, hs.server_name)
    assert event_ids(after) == [kiwi.export]
    assert after["dropped_stale"] == 1


async def test_cli_search_drops_a_hit_whose_edit_was_redacted_since_indexing(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """The indexed window shows an edit's text; once that edit is redacted, the window is
    stale though the message it edited still stands."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    edit = await seeder.send_edit(kiwi.room_id, kiwi.harvest, "kiwi harvest moved to gooseberry")
    indexer = Indexer(reader_config(hs, kiwi.reader, tmp_path))
    try:
        await indexer.refresh()
    finally:
        await indexer.close()
    before = await search_json(kiwi.config, "gooseberry")
    assert kiwi.harvest in event_ids(before)
    await seeder.redact(kiwi.room_id, edit)
    run = await muninn_here(kiwi.config, "search", "gooseberry", "--json")
    assert "gooseberry" not in run.out
    assert run.doc()["dropped_stale"] >= 1


async def test_cli_search_never_shows_the_words_an_edit_since_indexing_took_back(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """Index, edit, (no refresh), search: the old words are not shown. The window the index
    ranked for them is dropped and counted (with its new text it would still say they were
    there); the next refresh indexes the new text."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    await seeder.send_edit(kiwi.room_id, kiwi.harvest, "kiwi harvest is postponed")
    run = await muninn_here(kiwi.config, "search", "kiwi harvest monday", "--json")
    assert "monday" not in run.out
    assert run.doc()["dropped_stale"] == 1
    assert event_ids(run.doc()) == [kiwi.export]


async def test_cli_search_drops_a_hit_inside_a_pending_purge(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A window inside a purge tombstone not yet applied by a refresh is dropped and counted."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    purge = await muninn_here(
        kiwi.config,
        "purge",
        "--room",
        kiwi.room_id,
        "--from",
        "2024-07-01",
        "--to",
        "2024-07-02",
        "--json",
    )
    assert purge.rc == 0, purge.err
    doc = await search_json(kiwi.config, "kiwi")
    assert event_ids(doc) == [kiwi.export]
    assert doc["dropped_stale"] == 1


async def test_cli_search_drops_hits_of_a_room_the_reader_left(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """After the reader leaves a room its windows are stale at once, before any refresh."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    await kiwi.reader.leave(kiwi.room_id)
    doc = await search_json(kiwi.config, "kiwi")
    assert doc["hits"] == []
    assert doc["dropped_stale"] == 2


@pytest.mark.parametrize("change", ["bridged", "encrypted", "excluded"])
async def test_cli_search_hides_a_room_refused_since_indexing(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path, change: str
) -> None:
    """A room that became bridged, encrypted or excluded after the last refresh shows nothing
    at once: its windows are still in the store, but no text of theirs reaches the output."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    config = kiwi.config
    if change == "bridged":
        bridge = {"bridgebot": alice.user_id, "protocol": {"id": "irc"}, "channel": {"id": "#k"}}
        await alice.send_state(kiwi.room_id, "m.bridge", bridge, "irc/#k")
    elif change == "encrypted":
        await alice.enable_encryption(kiwi.room_id)
    else:
        doc = reader_config_doc(hs, kiwi.reader, tmp_path)
        doc["scope"] = {"exclude_room_ids": [kiwi.room_id]}
        config = write_config(tmp_path / "excluded.yaml", doc)
    runs = [await muninn_here(config, "search", "kiwi", *args) for args in (["--json"], [])]
    for run in runs:
        assert run.rc == 0, run.err
        assert "kiwi" not in run.out  # not one excerpt
        assert kiwi.room_id not in run.out
    doc = runs[0].doc()
    assert doc["hits"] == [] and doc["dropped_stale"] == 2
