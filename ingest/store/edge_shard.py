"""qdrant-edge shards as Muninn configures them: the config, the payload indexes, filters,
creation and compaction (`ingest.store.edge` holds the store and its collections).
"""

from __future__ import annotations

import json
import logging
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
        # as fast (bench/store_latency.py); the graph cost minutes of CPU and memory at 100k.
        hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=COMPACT_ABOVE_KB),
        # The WAL makes an acknowledged update survive a killed process, and its file lock is
        # what keeps a second process out of the shard: never turn it off.
        wal_enabled=True,
    )


def create_shard(shard_dir: Path, dense_dim: int) -> Any:
    """A new shard with today's config and indexes."""
    shard = qe.EdgeShard.create(str(shard_dir), shard_config(dense_dim))
    ensure_indexes(shard)
    return shard


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
    "SHARD_MARKER",
    "compact_shard",
    "condition",
    "create_shard",
    "ensure_indexes",
    "shard_config",
    "shard_filter",
    "stored_dense_dim",
]
