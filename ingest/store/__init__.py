"""The vector store: one synchronous interface, two adapters (embedded qdrant-edge, Qdrant server).

Callers on the event loop await the async facade (`ingest.store.aio`: `AsyncStore`,
`AsyncCollection`, `open_async`), the one place a store call goes to a worker thread
(qdrant-edge has no async API). `ingest.index.refresh` is the only writer; `ingest.search` only
reads the active generation.

    store = await open_async(cfg.index, cfg.base_dir)
    gen = generation_name(cfg.index.collection, compat_record)
    coll = await store.open(gen, dense_dim=384, create=True)
    await coll.upsert([...]); await coll.put_meta("cursor/!room", {...}); await coll.flush()
    await store.activate(gen)    # once the generation is complete
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ingest.config import IndexConfig
from ingest.store.aio import AsyncCollection, AsyncPurges, AsyncStore
from ingest.store.contract import (
    DENSE,
    LEXICAL,
    Collection,
    PointFilter,
    PointRecord,
    Store,
    generation_name,
)

__all__ = [
    "DENSE",
    "LEXICAL",
    "AsyncCollection",
    "AsyncPurges",
    "AsyncStore",
    "Collection",
    "PointFilter",
    "PointRecord",
    "Store",
    "embedded_path",
    "generation_name",
    "open_async",
    "open_store",
]

_DEFAULT_PATH = Path("data/qdrant")


def embedded_path(cfg: IndexConfig, base_dir: Path) -> Path | None:
    """The embedded store's directory (a relative path against `base_dir`); None for a server."""
    if cfg.store.url is not None:
        return None
    path = cfg.store.path if cfg.store.path is not None else _DEFAULT_PATH
    return path if path.is_absolute() else base_dir / path


def open_store(cfg: IndexConfig, base_dir: Path) -> Store:
    """The embedded store when `cfg.store.url` is None, else a Qdrant server store.

    A relative `cfg.store.path` is resolved against `base_dir` (the config file's folder).
    Raises StoreUnavailable when the embedded path is held by another process.
    """
    # Imported here so that a process using one adapter never loads the other's engine.
    if cfg.store.url is not None:
        from ingest.store.server import ServerStore

        return ServerStore.connect(cfg.store.url, cfg.collection, cfg.store.api_key)
    from ingest.store.edge import EdgeStore
    from ingest.store.space import MIB, SpaceGuard

    path = embedded_path(cfg, base_dir)
    assert path is not None
    return EdgeStore(path, cfg.collection, SpaceGuard(path, cfg.store.min_free_mb * MIB))


async def open_async(cfg: IndexConfig, base_dir: Path) -> AsyncStore:
    """`open_store` off the loop (the embedded engine loads its shards), behind the facade."""
    return AsyncStore(await asyncio.to_thread(open_store, cfg, base_dir))
