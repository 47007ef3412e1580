"""The store, awaited: the one place a store call leaves the event loop (docs/ARCHITECTURE.md §2).

`AsyncStore` and `AsyncCollection` wrap the synchronous `Store` and `Collection` (qdrant-edge has
no async API) and run each call in a worker thread, so callers on the loop await a method instead
of deciding the threading themselves. Work that was one thread hop stays one (`run`): a caller
hands the facade the unit (a function of the synchronous store or collection) rather than
splitting it into several awaits. The adapters' own write lock (`base.py`) still serialises
writes; the facade keeps no state of its own, so wrapping the same store twice is safe.
`AsyncPurges` does the same for the purge file beside the store (`ingest.store.purges`).

    store = await open_async(cfg.index, cfg.base_dir)  # ingest.store
    col = await store.open(generation, dense_dim=384, create=True)
    await col.put_meta("cursor/!room", {...}); await col.flush()
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ingest.store.contract import Collection, PointFilter, PointRecord, Store
from ingest.store.purges import PurgeLog
from ingest.types import SparseVector, StoredPoint

T = TypeVar("T")


class AsyncCollection:
    """One generation; every method runs the synchronous one in a worker thread."""

    def __init__(self, sync: Collection) -> None:
        self.sync = sync  # for what stays synchronous (a `WindowSet`'s lookup, tests)
        self.name, self.dense_dim = sync.name, sync.dense_dim  # fixed for a generation

    @property
    def damage(self) -> str | None:
        return self.sync.damage

    async def run(self, unit: Callable[[Collection], T]) -> T:
        """Several calls that stay one thread hop: `unit(collection)`, off the loop."""
        return await asyncio.to_thread(unit, self.sync)

    async def upsert(self, points: Sequence[PointRecord]) -> None:
        await asyncio.to_thread(self.sync.upsert, points)

    async def delete(self, ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.sync.delete, ids)

    async def retrieve(self, ids: Sequence[str]) -> list[StoredPoint]:
        return await asyncio.to_thread(self.sync.retrieve, ids)

    async def scroll(self, flt: PointFilter | None = None) -> list[StoredPoint]:
        """Every chat point `flt` matches, read in one hop."""
        return await asyncio.to_thread(lambda: list(self.sync.scroll(flt)))

    async def point_ids(self, flt: PointFilter | None = None) -> list[str]:
        """The ids of the chat points `flt` matches (their payloads are not kept)."""
        return await asyncio.to_thread(lambda: [p.id for p in self.sync.scroll(flt)])

    async def count(self, flt: PointFilter | None = None) -> int:
        return await asyncio.to_thread(self.sync.count, flt)

    async def dense_search(
        self, vector: Sequence[float], flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]:
        return await asyncio.to_thread(self.sync.dense_search, vector, flt, limit)

    async def dense_searches(
        self,
        vectors: Sequence[Sequence[float]],
        flt: PointFilter | None,
        limit: int,
    ) -> list[list[StoredPoint]]:
        """Several dense lists in one hop (`Collection.dense_searches`)."""
        return await asyncio.to_thread(self.sync.dense_searches, vectors, flt, limit)

    async def sparse_search(
        self, vector: SparseVector, flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]:
        return await asyncio.to_thread(self.sync.sparse_search, vector, flt, limit)

    async def get_meta(self, key: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.sync.get_meta, key)

    async def put_meta(self, key: str, value: Mapping[str, Any]) -> None:
        await asyncio.to_thread(self.sync.put_meta, key, value)

    async def delete_meta(self, key: str) -> None:
        await asyncio.to_thread(self.sync.delete_meta, key)

    async def list_meta(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        return await asyncio.to_thread(self.sync.list_meta, prefix)

    async def flush(self) -> None:
        await asyncio.to_thread(self.sync.flush)

    def forget_removed(self) -> None:
        """A flag for the next close (rule 13b): no engine call, so no thread."""
        self.sync.forget_removed()


class AsyncStore:
    """The generations behind one collection name; every method runs in a worker thread."""

    def __init__(self, sync: Store) -> None:
        self.sync = sync  # what the writer, the searcher and `read_facts` are built over

    @property
    def location(self) -> str:
        return self.sync.location

    async def run(self, unit: Callable[[Store], T]) -> T:
        """Several calls that stay one thread hop (`read_facts`): `unit(store)`, off the loop."""
        return await asyncio.to_thread(unit, self.sync)

    async def active(self) -> str | None:
        return await asyncio.to_thread(self.sync.active)

    async def open(
        self, generation: str, *, dense_dim: int | None, create: bool
    ) -> AsyncCollection:
        col = await asyncio.to_thread(
            self.sync.open, generation, dense_dim=dense_dim, create=create
        )
        return AsyncCollection(col)

    async def activate(self, generation: str) -> None:
        await asyncio.to_thread(self.sync.activate, generation)

    async def drop(self, generation: str) -> None:
        await asyncio.to_thread(self.sync.drop, generation)

    async def set_aside(self, generation: str) -> str:
        return await asyncio.to_thread(self.sync.set_aside, generation)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)


class AsyncPurges:
    """The purge file beside the store (`ingest.store.purges`), awaited: a read, or a durable
    append."""

    def __init__(self, sync: PurgeLog) -> None:
        self.sync = sync

    async def read(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync.read)

    async def append(self, record: Mapping[str, Any]) -> None:
        await asyncio.to_thread(self.sync.append, record)
