"""The embedded store's payload indexes: only what a query filters on, in old generations too."""

from __future__ import annotations

from pathlib import Path

import qdrant_edge as qe

from ingest.config import IndexConfig, StoreConfig
from ingest.store import PointFilter, open_store
from ingest.store.contract import INTEGER_FIELDS, KEYWORD_FIELDS
from tests.ingest.test_store_contract import COLLECTION, DIM, GEN, names, point

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
