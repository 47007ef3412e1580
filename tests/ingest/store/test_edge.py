"""The embedded store's layout on disk: payload indexes only for what a query filters on, and a
generation compacted at close so that the next process maps it cold (bench/RESULTS.md §10), a
long write in bounded steps; both reach generations an older release built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from ingest.config import IndexConfig, StoreConfig
from ingest.store import PointFilter, edge_rewrite, edge_shard, open_store
from ingest.store.contract import INTEGER_FIELDS, KEYWORD_FIELDS
from tests.ingest.store.storekit import COLLECTION, DIM, GEN, names, pid, point

CFG = IndexConfig(store=StoreConfig(path=Path("qdrant")), collection=COLLECTION)


def indexed(shard_dir: Path) -> set[str]:
    shard = qe.EdgeShard.load(str(shard_dir))
    try:
        return set(shard.info().payload_schema)
    finally:
        shard.close()


def test_edge_generation_drops_the_content_hash_index_and_still_filters(tmp_path: Path) -> None:
    """No query filters on `content_hash`, so no generation keeps its index (~0.5 KB a point
    of memory): a new one is built without it, one built with it loses it when opened, and a
    `content_hashes` filter still answers."""
    store = open_store(CFG, tmp_path)
    store.open(GEN, dense_dim=DIM, create=True).upsert([point("A"), point("B")])
    store.close()
    shard_dir = tmp_path / "qdrant" / GEN
    assert indexed(shard_dir) == {*KEYWORD_FIELDS, *INTEGER_FIELDS}
    assert "content_hash" not in KEYWORD_FIELDS

    old = qe.EdgeShard.load(str(shard_dir))  # as a release before this one built it
    old.update(qe.UpdateOperation.create_field_index("content_hash", qe.PayloadSchemaType.Keyword))
    old.close()
    assert "content_hash" in indexed(shard_dir)

    store = open_store(CFG, tmp_path)
    try:
        coll = store.open(GEN, dense_dim=DIM, create=False)
        assert names(coll.scroll(PointFilter(content_hashes=("h-B",)))) == {"B"}
        assert coll.count() == 2
    finally:
        store.close()
    assert indexed(shard_dir) == {*KEYWORD_FIELDS, *INTEGER_FIELDS}


def dense_storage(shard_dir: Path) -> list[str]:
    """Each segment's dense vector storage: `Mmap` is an immutable segment mapped cold;
    `ChunkedMmap` an appendable one mapped cold, `InRamChunkedMmap` one read whole at open."""
    return sorted(
        json.loads((seg / "segment.json").read_text())["config"]["vector_data"]["dense"][
            "storage_type"
        ]
        for seg in (shard_dir / "segments").iterdir()
    )


def test_edge_generation_is_compacted_at_close_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the store moves the generation's points into an immutable segment mapped cold
    (the next open reads only what its searches touch) beside an empty appendable one; the
    reopened generation answers as before and takes new writes."""
    monkeypatch.setattr(edge_shard, "COMPACT_ABOVE_KB", 1)  # as if these 4-d points were many
    store = open_store(CFG, tmp_path)
    coll = store.open(GEN, dense_dim=DIM, create=True)
    coll.upsert([point(n, dense=(1.0, i, 0.0, 0.0)) for i, n in enumerate("ABCD")])
    # The optimizer then compacts a segment from 1 KB of vectors: 100 more 4-d points.
    coll.upsert([point(f"fill{i}", dense=(0.0, 0.0, 1.0, i)) for i in range(100)])
    before = [h.id for h in coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 4)]
    store.close()
    shard_dir = tmp_path / "qdrant" / GEN
    assert dense_storage(shard_dir) == ["ChunkedMmap", "Mmap"]

    store = open_store(CFG, tmp_path)
    try:
        coll = store.open(GEN, dense_dim=DIM, create=False)
        assert [h.id for h in coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 4)] == before
        assert [p.id for p in coll.retrieve([pid("B")])] == [pid("B")]
        coll.upsert([point("E")])
        assert coll.count() == 105
    finally:
        store.close()


def test_edge_generation_too_small_to_gain_is_not_compacted(tmp_path: Path) -> None:
    """A close does not pay an optimizer pass (~120 ms, ~45 MiB) for a segment of a few points:
    it stays appendable, and answers the same when reopened."""
    store = open_store(CFG, tmp_path)
    coll = store.open(GEN, dense_dim=DIM, create=True)
    coll.upsert([point(f"fill{i}", dense=(0.0, 0.0, 1.0, i)) for i in range(100)])
    before = [h.id for h in coll.dense_search([0.0, 0.0, 1.0, 0.0], None, 4)]
    store.close()
    assert dense_storage(tmp_path / "qdrant" / GEN) == ["ChunkedMmap"]
    store = open_store(CFG, tmp_path)
    try:
        coll = store.open(GEN, dense_dim=DIM, create=False)
        assert [h.id for h in coll.dense_search([0.0, 0.0, 1.0, 0.0], None, 4)] == before
    finally:
        store.close()


def _page(coll: Any, page: int) -> None:
    """50 points, as a writer's page of windows."""
    coll.upsert([point(f"p{page}-{i}", dense=(0.0, 1.0, page, i)) for i in range(50)])


def test_edge_long_write_is_compacted_a_segment_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long write (an import) is compacted as it goes, not whole at its close: the first flush
    past `SEGMENT_POINTS` makes the appendable segment immutable, and no pass merges full
    segments again, so what a pass holds is one segment, not the generation (the 100k-message
    import's peak: 831 → 369 MiB writer-only). The generation answers as one, then and after."""
    monkeypatch.setattr(edge_shard, "COMPACT_ABOVE_KB", 1)
    monkeypatch.setattr(edge_shard, "SEGMENT_POINTS", 100)  # 1.6 KB of 4-d vectors
    store = open_store(CFG, tmp_path)
    coll = store.open(GEN, dense_dim=DIM, create=True)
    shard_dir = tmp_path / "qdrant" / GEN
    for page in range(1, 7):  # flushed after each page, as the writer does
        _page(coll, page)
        coll.flush()
        assert dense_storage(shard_dir).count("Mmap") == page // 2
    query = [0.0, 1.0, 3.0, 7.0]
    before = [h.id for h in coll.dense_search(query, None, 5)]
    assert before[0] == pid("p3-7")
    store.close()
    assert dense_storage(shard_dir) == ["ChunkedMmap", "Mmap", "Mmap", "Mmap"]

    assert reopened(tmp_path, query) == (before, 300)


def reopened(tmp_path: Path, query: list[float]) -> tuple[list[str], int]:
    """The generation opened again by a new store: its first five answers to `query`, and
    how many points it holds."""
    store = open_store(CFG, tmp_path)
    try:
        coll = store.open(GEN, dense_dim=DIM, create=False)
        return [h.id for h in coll.dense_search(query, None, 5)], coll.count()
    finally:
        store.close()


def test_edge_rewrite_is_compacted_a_segment_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The close's rewrite after removed text (rule 13b) copies the generation in the same
    bounded steps, so it holds no more memory than its writer did: several segments, the
    same answers."""
    monkeypatch.setattr(edge_shard, "COMPACT_ABOVE_KB", 1)
    monkeypatch.setattr(edge_shard, "SEGMENT_POINTS", 100)
    monkeypatch.setattr(edge_rewrite, "_BATCH", 50)
    store = open_store(CFG, tmp_path)
    coll = store.open(GEN, dense_dim=DIM, create=True)
    for page in range(1, 6):  # never flushed: the write itself leaves one segment
        _page(coll, page)
    coll.delete([pid("p2-0")])
    coll.forget_removed()
    query = [0.0, 1.0, 2.0, 0.0]
    before = [h.id for h in coll.dense_search(query, None, 5)]
    store.close()
    shard_dir = tmp_path / "qdrant" / GEN
    assert dense_storage(shard_dir).count("Mmap") >= 2

    assert reopened(tmp_path, query) == (before, 249)
