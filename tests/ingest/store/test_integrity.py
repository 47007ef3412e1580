"""Rule 13a: a damaged embedded store says so, and a refresh rebuilds it (issue 21 item 7).

Real qdrant-edge shards under tmp_path, damaged on disk as a failing disk or a careless copy
would: a truncated id tracker, random bytes over the dense vectors. The end-to-end test runs
the real Synapse, MiniLM and the `muninn status` CLI.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from pathlib import Path

import pytest

from bot.service.http_api import store_check
from ingest.config import IndexConfig, StoreConfig
from ingest.errors import StoreError
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.store import PointRecord, Store, generation_name, open_store
from ingest.store.contract import meta_id
from ingest.store.integrity import Tally, corrupt_vectors
from ingest.types import SparseVector
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, reader_config, reader_config_doc, write_config
from tests.inprocess import muninn_here

COLLECTION = "muninn_test"
DIM = 8
GEN = generation_name(COLLECTION, {"embedder": "integrity", "dimension": DIM})
POINTS = 120


def _open(root: Path) -> Store:
    return open_store(
        IndexConfig(store=StoreConfig(path=Path("qdrant")), collection=COLLECTION), root
    )


def _point(i: int, rnd: random.Random) -> PointRecord:
    return PointRecord(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"point-{i}")),
        dense=[rnd.uniform(0.1, 1.0) for _ in range(DIM)],
        sparse=SparseVector((i % 5,), (1.0,)),
        payload={"room_id": "!r1", "first_ts": i, "last_ts": i},
    )


def _build(root: Path) -> None:
    """A generation of POINTS chat points written page by page, with cursors, closed cleanly."""
    rnd = random.Random(7)
    points = [_point(i, rnd) for i in range(POINTS)]
    store = _open(root)
    try:
        coll = store.open(GEN, dense_dim=DIM, create=True)
        for start in range(0, POINTS, 40):
            coll.upsert(points[start : start + 40])
            coll.put_meta("cursor/!r1", {"page": start})
            coll.flush()
        coll.upsert(points[:10])  # overwrites: the tally counts points, not writes
        coll.delete([points[0].id, str(uuid.uuid5(uuid.NAMESPACE_URL, "never-written"))])
        store.activate(GEN)
    finally:
        store.close()


def _shard_file(root: Path, name: str) -> Path:
    found = sorted((root / "qdrant" / GEN).rglob(name))
    assert found, f"no {name} under the shard"
    return found[0]


def _damage_of(root: Path) -> str | None:
    store = _open(root)
    try:
        return store.open(GEN, dense_dim=None, create=False).damage
    finally:
        store.close()


def test_tally_explains_either_side_of_a_write_in_flight() -> None:
    """A writer killed between a write and its tally is not damage; anything else is."""
    assert Tally(10).explains(10) and not Tally(10).explains(9)
    assert Tally(10, pending=-3).explains(7) and Tally(10, pending=-3).explains(10)
    assert not Tally(10, pending=-3).explains(6)
    assert Tally(10, pending=2).explains(12) and not Tally(10, pending=2).explains(13)
    assert corrupt_vectors([[0.6, 0.8], [3.0, 0.0], [float("nan"), 0.0]]) == 2
    assert corrupt_vectors([[0.0, 0.0]]) == 0  # stored as given: not damage


def test_edge_store_written_and_reopened_is_not_damaged(tmp_path: Path) -> None:
    _build(tmp_path)
    assert _damage_of(tmp_path) is None
    store = _open(tmp_path)
    try:
        assert store.open(GEN, dense_dim=None, create=False).count() == POINTS - 1
    finally:
        store.close()


def test_edge_truncated_id_tracker_is_reported_as_damage(tmp_path: Path) -> None:
    """The points the truncation loses are named as damage by the open, and /healthz's store
    check fails with it, instead of a store that answers 0 hits as if healthy."""
    _build(tmp_path)
    mappings = _shard_file(tmp_path, "mutable_id_tracker.mappings")
    os.truncate(mappings, 40)
    damage = _damage_of(tmp_path)
    assert damage is not None and GEN in damage
    store = _open(tmp_path)
    try:
        with pytest.raises(StoreError, match="damaged"):
            asyncio.run(store_check(store)())
    finally:
        store.close()


def test_edge_random_bytes_over_the_vectors_are_reported_as_damage(tmp_path: Path) -> None:
    _build(tmp_path)
    vectors = _shard_file(tmp_path, "chunk_0.mmap")
    with vectors.open("r+b") as f:
        f.seek(DIM * 4 * 20)
        f.write(random.Random(3).randbytes(DIM * 4 * 30))
    damage = _damage_of(tmp_path)
    assert damage is not None and "dense vectors are corrupt" in damage


async def test_refresh_rebuilds_a_damaged_store_and_search_finds_the_messages_again(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Truncate the id tracker of a real index: `muninn status` says it is damaged, the next
    refresh builds the generation anew (the cursors of the damaged one said up to date), and
    search finds every message again."""
    room = await hs.fresh_room(alice)
    reader = await hs.register(displayname="Reader")
    await admit(alice, room, reader)
    words = ["aardvark", "bittern", "caracal", "dugong", "echidna", "fossa", "gharial"]
    line = "the {} enclosure needs cleaning before the visitors arrive at nine"
    sent = {w: await alice.send_text(room, line.format(w)) for w in words}
    small = {"max_bytes": 100}  # a window a message: the truncation loses most of them
    cfg = reader_config(hs, reader, tmp_path, chunker=small)
    doc = reader_config_doc(hs, reader, tmp_path, chunker=small)
    config = write_config(tmp_path / "config.yaml", doc)
    async with Indexer(cfg) as ix:
        await ix.refresh()
        generation = ix.writer.generation
        assert set(await ix.bodies()) == set(sent.values())
    os.truncate(next((tmp_path / "qdrant" / generation).rglob("mutable_id_tracker.mappings")), 40)

    status = (await muninn_here(config, "status", "--json")).doc()
    assert status["damage"] is not None and generation in status["damage"]
    assert "DAMAGED" in (await muninn_here(config, "status")).out

    async with Indexer(cfg) as ix:
        report = await ix.refresh()
        assert report.activated and ix.store.active() == generation
        assert ix.store.generations() == [generation]  # the damaged one is dropped
        assert set(await ix.bodies()) == set(sent.values())
        searcher = Searcher(ix.store, ix.embedder, server_name=hs.server_name)
        result = await searcher.search(SearchQuery.build(["dugong enclosure"], room_ids=[room]))
        assert sent["dugong"] in {m["event_id"] for h in result.hits for m in h.messages}
    assert (await muninn_here(config, "status", "--json")).doc()["damage"] is None


def test_a_generation_built_before_the_tally_gets_one_and_is_not_damaged(tmp_path: Path) -> None:
    """An upgrade does not rebuild every index: a generation without a tally (schema 1) is
    counted at its first open and checked from then on."""
    _build(tmp_path)
    store = _open(tmp_path)
    try:
        coll = store.open(GEN, dense_dim=None, create=False)
        coll._delete([meta_id("integrity", "store")])  # as an older release left it
        coll._put_raw("store", "schema", {"version": 1, "dense_dim": DIM})
    finally:
        store.close()
    assert _damage_of(tmp_path) is None
    os.truncate(_shard_file(tmp_path, "mutable_id_tracker.mappings"), 40)
    assert _damage_of(tmp_path) is not None
