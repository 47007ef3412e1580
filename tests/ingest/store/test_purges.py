"""`ingest.store.purges`: the purges every reply honours, readable without the vector store."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import cast

import pytest

from bot.chat.searching import tombstones
from bot.demo.synapse import free_port
from bot.errors import CommandError
from ingest.config import IndexConfig, StoreConfig, parse_config
from ingest.errors import StoreError
from ingest.index.records import TOMBSTONE_PREFIX, Tombstone
from ingest.index.refresh import RoomSource, Writer
from ingest.search import Searcher
from ingest.store import open_store
from ingest.store.purges import PurgeLog, PurgesUnreadable, purge_log_path
from ingest.types import RoomID
from tests.indexing import shared_embedder

STONE = {"room_id": "!r:x", "from_ts": 10, "to_ts": 20}


def test_purge_log_reads_back_what_was_appended(tmp_path: Path) -> None:
    log = PurgeLog(tmp_path / "store" / "purges.jsonl")
    assert log.read() == []
    log.append({**STONE, "created_ms": 5})
    log.append({**STONE, "room_id": "!s:x"})
    assert log.read() == [STONE, {**STONE, "room_id": "!s:x"}]
    assert (log.path.stat().st_mode & 0o777) == 0o600


def test_a_line_a_crash_cut_short_is_ignored_and_then_dropped(tmp_path: Path) -> None:
    """An append cut short (never reported written) is no purge and does not block reading;
    the next append removes it, so that only the last line can ever be torn."""
    log = PurgeLog(tmp_path / "purges.jsonl")
    log.append(STONE)
    with log.path.open("a") as f:
        f.write('{"room_id": "!t:x", "from')
    assert log.read() == [STONE]
    log.append({**STONE, "room_id": "!u:x"})
    assert log.read() == [STONE, {**STONE, "room_id": "!u:x"}]


def test_a_bad_record_makes_the_purges_unreadable(tmp_path: Path) -> None:
    """A damaged record might have been a purge: nothing may be shown then, not a guess."""
    log = PurgeLog(tmp_path / "purges.jsonl")
    log.path.write_text(
        '{"room_id": "!r:x"}\n' + '{"room_id": "!s:x", "from_ts": 1, "to_ts": 2}\n'
    )
    with pytest.raises(PurgesUnreadable, match="line 1"):
        log.read()


def test_purge_file_path_is_beside_the_store(tmp_path: Path) -> None:
    embedded = IndexConfig(store=StoreConfig(path=Path("state/qdrant")))
    assert purge_log_path(embedded, tmp_path) == tmp_path / "state/purges-muninn_chat.jsonl"
    server = IndexConfig(store=StoreConfig(url="http://qdrant:6333"), collection="c")
    assert purge_log_path(server, tmp_path) == tmp_path / "data/purges-c.jsonl"
    given = IndexConfig(store=StoreConfig(url="http://qdrant:6333"), purges=Path("/s/p.jsonl"))
    assert purge_log_path(given, tmp_path) == Path("/s/p.jsonl")


async def test_searcher_reads_the_purges_with_the_store_down(tmp_path: Path) -> None:
    """A Qdrant server no one answers: the purges still come from the file; without the file
    (or with an unreadable one) the bot's reader refuses to show log text."""
    url = f"http://127.0.0.1:{free_port()}"
    down = open_store(IndexConfig(store=StoreConfig(url=url)), tmp_path)
    try:
        log = PurgeLog(tmp_path / "purges.jsonl")
        log.append(STONE)
        assert await Searcher(down, None, server_name="x", purges=log).tombstones() == [
            Tombstone.from_meta(STONE)
        ]
        with pytest.raises(CommandError, match="purge records cannot be read"):
            await tombstones(Searcher(down, None, server_name="x"))
        log.path.write_text("not json\n")
        with pytest.raises(StoreError):
            await Searcher(down, None, server_name="x", purges=log).tombstones()
    finally:
        down.close()


async def test_a_store_rebuilt_from_nothing_gets_its_purges_back(tmp_path: Path) -> None:
    """Deleting the index costs speed only: the purge file lives beside the store's folder,
    and the writer of a new store records its purges there again (never re-indexed)."""
    cfg = parse_config(
        {
            "homeserver": {"url": "http://127.0.0.1:9", "server_name": "x"},
            "reader": {"user_id": "@r:x", "access_token": "t"},
            "index": {"store": {"path": "state/qdrant"}},
        },
        tmp_path,
    )
    purges = PurgeLog(purge_log_path(cfg.index, cfg.base_dir))

    def writer() -> Writer:
        store = open_store(cfg.index, cfg.base_dir)
        return Writer(cfg, cast(RoomSource, None), store, shared_embedder(), purges=purges)

    first = writer()
    await first.add_tombstone(RoomID("!r:x"), 10, 20)
    first.store.close()
    shutil.rmtree(tmp_path / "state/qdrant")
    second = writer()
    try:
        col = await second.open()
        stones = col.list_meta(TOMBSTONE_PREFIX).values()
        assert [(s["room_id"], s["from_ts"], s["to_ts"]) for s in stones] == [("!r:x", 10, 20)]
    finally:
        second.store.close()
