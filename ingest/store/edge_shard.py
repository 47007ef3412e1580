"""qdrant-edge shards as Muninn configures them: the config, the payload indexes, filters,
creation and compaction (`ingest.store.edge` holds the store and its collections).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ingest.store.contract import (
    DENSE,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    LEXICAL,
    RETIRED_INDEXES,
    IntRange,
    Term,
)

SHARD_MARKER = "edge_config.json"
# Vector kilobytes an appendable segment holds before a close compacts it: ~1,000 MiniLM
# vectors (~11 MiB of heap). Below that an optimizer pass costs more (~120 ms, ~45 MiB
# transient) than it frees; a smaller segment keeps growing across closes until it qualifies.
COMPACT_ABOVE_KB = 1_500
# Points a write puts in the appendable segment before the next flush compacts it, and the
# largest segment a merge builds. The optimizer converts a segment whole, holding the segment
# and its copy at once: bounded, that transient no longer grows with the generation (the
# 100k-message import, writer-only: peak 831 MiB in the close's single pass, 369 in steps of
# 5,000). Its 7 segments against 2 cost a room-wide search 0-2 ms.
SEGMENT_POINTS = 5_000

log = logging.getLogger("muninn.store")


def condition(term: Term) -> Any:
    if isinstance(term, IntRange):
        return qe.FieldCondition(term.key, range=qe.RangeFloat(gte=term.gte, lte=term.lte))
    match = qe.FieldCondition(term.key, match=qe.MatchAny(list(term.values)))
    if not term.or_empty:
        return match
    return qe.Filter(should=[qe.IsEmptyCondition(term.key), match])


def shard_filter(corpus: str, terms: list[Term]) -> Any:
    corpus_is = qe.FieldCondition("corpus", match=qe.MatchValue(corpus))
    return qe.Filter(must=[corpus_is, *(condition(t) for t in terms)])


def compact_shard(shard: Any, path: Path) -> None:
    try:
        shard.optimize()
    except Exception as e:  # an optimisation: the data is flushed and stays as it was
        log.warning("qdrant-edge could not compact %s: %s", path, e)


def segment_kb(dense_dim: int) -> int:
    """`SEGMENT_POINTS` in the optimizer's measure of a segment: its dense vectors' kilobytes."""
    return max(1, SEGMENT_POINTS * dense_dim * 4 // 1024)


def shard_config(dense_dim: int) -> Any:
    cold = qe.Memory.Cold  # mapped, read on demand: what an idle service holds is what it read
    return qe.EdgeConfig(
        vectors={
            DENSE: qe.EdgeVectorParams(size=dense_dim, distance=qe.Distance.Cosine, memory=cold)
        },
        sparse_vectors={LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=cold)},
        payload_memory=cold,
        id_tracker_memory=cold,
        # No HNSW graph (m=0): searches are filtered by room, and a scan of a room's points is
        # as fast (`git show 14975cc:bench/store_latency.py`); the graph cost minutes of CPU
        # and memory at 100k.
        hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        # Bounded segments: the appendable one is compacted alone (a full segment and it are
        # over the bound together), and a merge joins only small ones (several closes' worth).
        optimizers=qe.EdgeOptimizersConfig(
            indexing_threshold=COMPACT_ABOVE_KB, max_segment_size=segment_kb(dense_dim)
        ),
        # The WAL makes an acknowledged update survive a killed process, and its file lock is
        # what keeps a second process out of the shard: never turn it off.
        wal_enabled=True,
    )


def create_shard(shard_dir: Path, dense_dim: int) -> Any:
    """A new shard with today's config and indexes."""
    shard = qe.EdgeShard.create(str(shard_dir), shard_config(dense_dim))
    ensure_indexes(shard)
    return shard


def load_shard(shard_dir: Path, config: Any) -> Any:
    """An existing shard, without what a compaction killed mid-way left: its half-built segment
    (up to a segment's size each time), which qdrant's server deletes at load and qdrant-edge
    does not. The store's LOCK keeps every other process out of it."""
    shutil.rmtree(shard_dir / "temp_segments", ignore_errors=True)
    return qe.EdgeShard.load(str(shard_dir), config)


def stored_dense_dim(shard_dir: Path) -> int | None:
    """The dense dimension a shard was created with, from its own config file."""
    try:
        doc = json.loads((shard_dir / SHARD_MARKER).read_text(encoding="utf-8"))
        return int(doc["vectors"][DENSE]["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ensure_indexes(shard: Any) -> None:
    """Create missing payload indexes and drop retired ones (idempotent, so a change of the
    indexes reaches old generations without a rebuild)."""
    have = set(shard.info().payload_schema)
    for field in RETIRED_INDEXES:
        if field in have:
            shard.update(qe.UpdateOperation.delete_field_index(field))
    wanted: list[tuple[str, Any]] = [(f, qe.PayloadSchemaType.Keyword) for f in KEYWORD_FIELDS]
    # Timestamps are only ever filtered by range: without the exact-value lookup map the index
    # holds ~0.8 KB less a point in memory (bench/RESULTS.md §10).
    wanted += [(f, qe.IntegerIndexParams(lookup=False, range=True)) for f in INTEGER_FIELDS]
    for field, schema in wanted:
        if field not in have:
            shard.update(qe.UpdateOperation.create_field_index(field, schema))


__all__ = [
    "COMPACT_ABOVE_KB",
    "SEGMENT_POINTS",
    "SHARD_MARKER",
    "compact_shard",
    "condition",
    "create_shard",
    "ensure_indexes",
    "load_shard",
    "segment_kb",
    "shard_config",
    "shard_filter",
    "stored_dense_dim",
]
