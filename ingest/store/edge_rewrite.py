"""Forgetting removed text in the embedded store: a shard rewritten whole (rule 13b).

qdrant-edge keeps what a redaction, an edit or a purge took out in two places after the change
is applied and flushed: its write-ahead log (32 MiB segments, appended to, dropped only once
a later segment fills) and the payload pages of an appendable segment, whose overwritten and
deleted values stay as freed blocks. It offers no call that truncates the log, and deleting
the log's files is not one: a new log numbers its operations from 0 again, below the versions
the segments recorded, and every later update of an existing point is then silently ignored
(measured). Optimising rebuilds only segments over its thresholds. So a generation text was
taken out of is copied, at its close, point by point (vectors and payloads as stored, no
re-embedding) into a fresh shard beside it, which replaces it in two renames: the fresh log
and segments hold what the index holds now, nothing else. About 1 s per 10,000 points on 2
cores; paid only by a close after such a change.

A crash between the renames is finished at the next open (`sweep`): the old shard, complete,
is put back, and the text it still holds waits for the next rewrite.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ingest.store import edge_shard

log = logging.getLogger("muninn.store")

_FRESH = ".rewrite-"  # the copy being written
_REPLACED = ".replaced-"  # the shard it replaces, between the two renames
_BATCH = 256


def copy_points(source: Any, target: Any, target_dir: Path) -> int:
    """Every point of `source` (chat and meta, vectors and payloads as stored) into `target`,
    compacted each `SEGMENT_POINTS` as a write is (`ingest.store.edge`): a copy of a large
    shard holds no more memory than its writer did."""
    offset: Any = None
    copied = uncompacted = 0
    while True:
        request = qe.ScrollRequest(
            offset=offset, limit=_BATCH, with_payload=True, with_vector=True
        )
        records, offset = source.scroll(request)
        if records:
            points = [qe.Point(r.id, dict(r.vector or {}), dict(r.payload or {})) for r in records]
            target.update(qe.UpdateOperation.upsert_points(points))
            copied += len(points)
            uncompacted += len(points)
            if uncompacted >= edge_shard.SEGMENT_POINTS:
                target.flush()
                edge_shard.compact_shard(target, target_dir)
                uncompacted = 0
        if offset is None:
            return copied


def rewrite(shard_dir: Path, source: Any, create: Callable[[Path], Any]) -> Any:
    """A fresh shard at `<store>/.rewrite-<generation>` holding what `source` holds (flushed,
    not yet in place: `replace` swaps it in once `source` is closed)."""
    fresh_dir = shard_dir.with_name(f"{_FRESH}{shard_dir.name}")
    shutil.rmtree(fresh_dir, ignore_errors=True)
    fresh = create(fresh_dir)
    try:
        copy_points(source, fresh, fresh_dir)
        fresh.flush()
    except BaseException:
        fresh.close()
        shutil.rmtree(fresh_dir, ignore_errors=True)
        raise
    return fresh


def replace(shard_dir: Path) -> None:
    """Swap the closed rewrite in for the closed shard at `shard_dir`, then delete the old."""
    fresh_dir = shard_dir.with_name(f"{_FRESH}{shard_dir.name}")
    old_dir = shard_dir.with_name(f"{_REPLACED}{shard_dir.name}")
    os.replace(shard_dir, old_dir)
    os.replace(fresh_dir, shard_dir)
    fsync_dir(shard_dir.parent)
    shutil.rmtree(old_dir)


def sweep(path: Path) -> None:
    """Finish what a crash interrupted: a shard replaced but its rewrite not yet in place is
    put back; a rewrite never swapped in is deleted."""
    for old_dir in path.glob(f"{_REPLACED}*"):
        shard_dir = path / old_dir.name.removeprefix(_REPLACED)
        if shard_dir.exists():
            shutil.rmtree(old_dir, ignore_errors=True)
        else:
            os.replace(old_dir, shard_dir)
            log.warning("%s: a rewrite was cut short; the shard as it was is back", shard_dir)
    for fresh_dir in path.glob(f"{_FRESH}*"):
        shutil.rmtree(fresh_dir, ignore_errors=True)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["copy_points", "fsync_dir", "replace", "rewrite", "sweep"]
