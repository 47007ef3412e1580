"""The embedded store: qdrant-edge shards in-process, one directory per generation.

Layout of the store path:

    <path>/                created 0700: chat text lives here (and the listener's token)
    <path>/LOCK            flock held while a process has the store open (pid inside)
    <path>/ACTIVE          the active generation's name, replaced atomically
    <path>/<generation>/   one EdgeShard (its own WAL, segments and edge_config.json)

qdrant-edge allows one open EdgeShard per directory: a second `EdgeShard.load` of a held shard
fails ("Can't init WAL: WouldBlock") in the same or another process, and there is no read-only
mode. The store-level LOCK turns that into one clear `StoreUnavailable` at `open_store`.

qdrant-edge holds the GIL for the whole of every call (measured: queries, upserts, and
`optimize()`, which at 100k × 384-d took minutes on 2 cores with the main thread frozen).
The facade's worker thread (`ingest.store.aio`) therefore keeps the loop from awaiting, not
from stalling: each call stalls it for the call's duration. Fine for 1-20 ms queries; a
whole-store `optimize()` never runs in a process that must keep answering, and a compaction
step (below) stalls a serving process only as a backfill writes past each 5,000 points: the
price of a bounded peak (a close compacting 100k points at once took 1 GiB, RESULTS §15).

Memory: writes land in an appendable segment, whose id tracker, sparse index and payload
indexes live on the heap and whose vectors are read whole at open (~11 KB a point at 100k
points with the WAL, bench/RESULTS.md §10). Closing the store therefore compacts it: the
optimizer turns every appendable segment of more than ~1,000 points into an immutable one
(no HNSW graph: `m=0`), whose vectors, sparse index, id tracker and payload indexes are
files mapped cold, so the next process touches only the pages its searches read. A pass holds
the segment it converts and the copy it writes at once, so a long write is compacted in steps:
the first flush after `SEGMENT_POINTS` chat points compacts the appendable segment (a stall of
~1.5-3 s on 2 cores, GIL held), and no merge grows a segment past that bound (unbounded, a
close merged its new points into the generation's one segment, copying all of it again).
After a redaction, an edit or a purge the close rewrites the shard whole instead, so that no
file keeps the removed text (`ingest.store.edge_rewrite`, `.rewrite-`/`.replaced-` beside it).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import qdrant_edge as qe

from ingest.errors import DiskFull, StoreError, StoreUnavailable
from ingest.store import edge_rewrite, edge_shard
from ingest.store.base import CollectionBase
from ingest.store.contract import (
    CHAT,
    DENSE,
    LEXICAL,
    PointRecord,
    Raw,
    Scored,
    Term,
)
from ingest.store.edge_rewrite import fsync_dir
from ingest.store.edge_shard import (
    SHARD_MARKER,
    compact_shard,
    create_shard,
    ensure_indexes,
    load_shard,
    shard_config,
    shard_filter,
    stored_dense_dim,
)
from ingest.store.space import SpaceGuard, allocated_bytes
from ingest.store.storebase import StoreBase

_ACTIVE = "ACTIVE"
_LOCK = "LOCK"
_DROPPING = ".dropping-"  # a generation being deleted is renamed first, so it never half-exists
# In a shard whose removed text waits for a rewrite; the rewritten shard holds none.
_REWRITE_DUE = "muninn_rewrite_due"
log = logging.getLogger("muninn.store")


class EdgeCollection(CollectionBase):
    """One qdrant-edge shard."""

    def __init__(
        self, name: str, dense_dim: int | None, shard: Any, path: Path, space: SpaceGuard
    ) -> None:
        super().__init__(name, dense_dim)
        self._shard = shard
        self._path = path
        self._space = space
        # Text was taken out and no rewrite has forgotten it yet: a process killed before its
        # clean stop leaves the mark, so the next clean stop rewrites (rule 13b).
        self._removed_text = (path / _REWRITE_DUE).is_file()
        self._uncompacted = 0  # chat points this process wrote since its last compaction

    def forget_removed(self) -> None:
        if not self._removed_text:
            try:
                (self._path / _REWRITE_DUE).touch()
                fsync_dir(self._path)
            except OSError as e:  # the rewrite still runs at this process's clean stop
                log.warning("cannot mark %s for a rewrite: %s", self._path, e)
        super().forget_removed()

    def _before_write(self) -> None:
        self._space.check()

    @contextlib.contextmanager
    def _guard(self, op: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except Exception as e:  # qdrant-edge raises bare Exception for every engine failure
            raise StoreError(f"qdrant-edge {op} on {self._path}: {e}") from e

    def _upsert_chat(self, points: Sequence[PointRecord], payloads: list[dict[str, Any]]) -> None:
        batch = [
            qe.Point(
                p.id,
                {
                    DENSE: [float(x) for x in p.dense],
                    LEXICAL: qe.SparseVector(list(p.sparse.indices), list(p.sparse.values)),
                },
                payload,
            )
            for p, payload in zip(points, payloads, strict=True)
        ]
        self._shard.update(qe.UpdateOperation.upsert_points(batch))
        self._uncompacted += len(batch)

    def _upsert_bare(self, point_id: str, payload: dict[str, Any]) -> None:
        self._shard.update(qe.UpdateOperation.upsert_points([qe.Point(point_id, {}, payload)]))

    def _delete(self, ids: list[str]) -> None:
        self._shard.update(qe.UpdateOperation.delete_points(list(ids)))

    def _retrieve(self, ids: list[str]) -> list[Raw]:
        records = self._shard.retrieve(list(ids), with_payload=True, with_vector=False)
        return [(str(r.id), dict(r.payload or {})) for r in records]

    def _scroll(self, corpus: str, terms: list[Term], batch: int) -> Iterator[Raw]:
        offset: Any = None
        flt = shard_filter(corpus, terms)
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=batch, filter=flt, with_payload=True, with_vector=False
            )
            records, offset = self._shard.scroll(request)
            for r in records:
                yield str(r.id), dict(r.payload or {})
            if offset is None:
                return

    def _count(self, corpus: str, terms: list[Term]) -> int:
        return int(
            self._shard.count(qe.CountRequest(exact=True, filter=shard_filter(corpus, terms)))
        )

    def _search(self, using: str, vector: Any, terms: list[Term], limit: int) -> list[Scored]:
        if using == LEXICAL:
            vector = qe.SparseVector(list(vector.indices), list(vector.values))
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector, using=using),
            filter=shard_filter(CHAT, terms),
            with_payload=True,
            with_vector=False,
        )
        return [
            (str(h.id), dict(h.payload or {}), float(h.score)) for h in self._shard.query(request)
        ]

    def _dense_sample(self, n: int) -> list[list[float]]:
        # Point ids are uuid5s, so the ids from a random one on are points from anywhere in
        # the files; from the first id on again when that end holds fewer than `n`.
        found: dict[str, list[float]] = {}
        flt = shard_filter(CHAT, [])
        for offset in (str(uuid.uuid4()), None):
            request = qe.ScrollRequest(
                offset=offset, limit=n, filter=flt, with_payload=False, with_vector=True
            )
            for r in self._shard.scroll(request)[0]:
                vector = (r.vector or {}).get(DENSE)
                if vector is not None and len(found) < n:
                    found[str(r.id)] = [float(x) for x in vector]
            if len(found) >= n:
                break
        return list(found.values())

    def flush(self) -> None:
        """Persist segments (the WAL already holds every acknowledged update); past
        `SEGMENT_POINTS` written, compact the appendable segment (module docstring)."""
        with self._guard("flush"):
            self._shard.flush()
        if self._uncompacted >= edge_shard.SEGMENT_POINTS and self._room_to_compact(False):
            compact_shard(self._shard, self._path)
            self._uncompacted = 0

    def optimize(self) -> None:
        """Make appendable segments immutable and mapped cold, merge segments, vacuum
        deletions (no HNSW graph: filtered searches scan a room's points, as fast). Blocks and
        holds the GIL: run by `close`, never while a process must keep answering."""
        with self._guard("optimize"):
            self._shard.optimize()

    def close(self, *, compact: bool = False) -> None:
        """Flush, compact (`optimize`) if asked, release the shard. Asked to compact after
        text was taken out (`forget_removed`), the shard is rewritten instead (rule 13b)."""
        fresh = None
        with self._guard("close"):
            try:
                self._shard.flush()
                compact = compact and self._room_to_compact(self._removed_text)
                fresh = self._rewritten() if compact and self._removed_text else None
                if compact and fresh is None:
                    compact_shard(self._shard, self._path)
            finally:
                self._shard.close()
            if fresh is not None:
                try:
                    compact_shard(fresh, self._path)
                finally:
                    fresh.close()
                edge_rewrite.replace(self._path)

    def _room_to_compact(self, rewrite: bool) -> bool:
        """Compacting and rewriting write new segments (a rewrite, a whole copy): not on a disk
        without room for them (rule 13c); the shard stays as flushed."""
        try:
            need = allocated_bytes(self._path) if rewrite else 0
            self._space.check(need)
        except DiskFull as e:
            log.warning("not compacting %s: %s", self._path, e)
            return False
        return True

    def _rewritten(self) -> Any:
        try:
            return edge_rewrite.rewrite(
                self._path, self._shard, lambda d: create_shard(d, self._dense_dim)
            )
        except Exception as e:  # the index is whole as it is; only the forgetting waits
            log.warning(
                "qdrant-edge could not rewrite %s to forget removed text: %s", self._path, e
            )
            return None


class EdgeStore(StoreBase):
    """Generations as shard directories under one path, held by one process at a time."""

    def __init__(self, path: Path, collection: str, space: SpaceGuard | None = None) -> None:
        super().__init__(collection)
        self._path = path
        self._lock_file = self._acquire(path)
        self.space = space or SpaceGuard(path)
        self._sweep()

    def check_space(self) -> None:
        self.space.check()

    @property
    def location(self) -> str:
        return f"qdrant-edge at {self._path}"

    @staticmethod
    def _acquire(path: Path) -> IO[str]:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                # Whatever the umask: every room's text is in here, for the owner only.
                path.mkdir(mode=0o700)
                os.chmod(path, 0o700)
            except FileExistsError:
                pass  # an operator's own mode on an existing store is theirs to choose
            handle = (path / _LOCK).open("a+", encoding="utf-8")
        except OSError as e:
            raise StoreUnavailable(f"qdrant-edge at {path}: cannot open the store: {e}") from e
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise StoreUnavailable(
                f"qdrant-edge at {path} is held by another process (pid {holder}); "
                "the embedded store allows one process per path"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle

    def _sweep(self) -> None:
        """Finish drops and rewrites a crash interrupted."""
        for leftover in self._path.glob(f"{_DROPPING}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        edge_rewrite.sweep(self._path)

    def generations(self) -> list[str]:
        prefix = f"{self.collection}-"
        return sorted(
            d.name
            for d in self._path.iterdir()
            if d.is_dir() and d.name.startswith(prefix) and (d / SHARD_MARKER).is_file()
        )

    def active(self) -> str | None:
        try:
            name = (self._path / _ACTIVE).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"{self.location}: cannot read {_ACTIVE}: {e}") from e
        return name or None

    def _open_generation(
        self, generation: str, dense_dim: int | None, create: bool
    ) -> CollectionBase:
        shard_dir = self._path / generation
        exists = (shard_dir / SHARD_MARKER).is_file()
        if not exists and not create:
            raise StoreError(f"{self.location}: no generation {generation!r}")
        # Loading writes too (it maps and fills index pages): on a full disk it dies of SIGBUS.
        self.space.check()
        try:
            if exists:
                # Loading with today's config moves a shard built by an older release to it
                # (the dimension is checked as before, by the schema record).
                dim = stored_dense_dim(shard_dir)
                config = shard_config(dim) if dim is not None else None
                shard = load_shard(shard_dir, config)
                ensure_indexes(shard)
            else:
                assert dense_dim is not None  # StoreBase.open refuses a creation without it
                shard = create_shard(shard_dir, dense_dim)
        except Exception as e:
            raise StoreError(f"qdrant-edge open {shard_dir}: {e}") from e
        known = dense_dim if dense_dim is not None else stored_dense_dim(shard_dir)
        coll = EdgeCollection(generation, known, shard, shard_dir, self.space)
        try:
            coll.ensure_schema(create=create)
            coll.check_integrity()
        except BaseException:
            coll.close()
            raise
        return coll

    def _set_active(self, generation: str) -> None:
        _write_atomically(self._path / _ACTIVE, f"{generation}\n")

    def _remove(self, generation: str, was_active: bool) -> None:
        try:
            if was_active:
                (self._path / _ACTIVE).unlink(missing_ok=True)
                fsync_dir(self._path)
            doomed = self._path / f"{_DROPPING}{generation}"
            os.replace(self._path / generation, doomed)
            fsync_dir(self._path)
            shutil.rmtree(doomed)
        except OSError as e:
            raise StoreError(f"{self.location}: cannot drop {generation}: {e}") from e

    def _rename(self, generation: str, new_name: str, was_active: bool) -> None:
        try:
            if was_active:  # first: a crash between the two leaves the damaged one in place
                self._set_active(new_name)
            os.replace(self._path / generation, self._path / new_name)
            fsync_dir(self._path)
        except OSError as e:
            raise StoreError(f"{self.location}: cannot rename {generation}: {e}") from e

    def _close_collection(self, coll: CollectionBase, *, compact: bool) -> None:
        assert isinstance(coll, EdgeCollection)
        coll.close(compact=compact)

    def _shutdown(self) -> None:
        # Closing the descriptor releases the flock.
        self._lock_file.close()


def _write_atomically(path: Path, text: str) -> None:
    """Temp file + fsync + os.replace + fsync of the folder: readers see old or new, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        raise StoreError(f"cannot write {path}: {e}") from e
