"""Test helpers for the writer and the read path: a config per test, a refresh, a collection scan."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ingest.config import Config, parse_config
from ingest.embed import Embedder, make_embedder
from ingest.matrix import MatrixReader
from ingest.refresh import RefreshReport, Writer
from ingest.store import Collection, Store, open_store
from ingest.types import EmbedderIdentity, RoomID, StoredPoint
from tests.homeserver import Homeserver, MatrixUser

_EMBEDDER: Embedder | None = None


def shared_embedder() -> Embedder:
    """The real MiniLM embedder, loaded once for the whole session."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = make_embedder(parse_config(_base("x", "@x:x", "t", Path("."))).embedder)
    return _EMBEDDER


class RecordingEmbedder:
    """The real embedder, remembering every text it was given (to prove what never reached it)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.documents: list[str] = []
        self.queries: list[str] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    async def probe(self) -> EmbedderIdentity:
        return await self.inner.probe()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return await self.inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.queries.extend(texts)
        return await self.inner.embed_queries(texts)

    async def close(self) -> None:
        """The shared embedder outlives a test."""


def _base(server_name: str, user_id: str, token: str, store: Path, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": server_name},
        "reader": {"user_id": user_id, "access_token": token},
        "index": {"store": {"path": str(store)}, "collection": "muninn_test"},
    }
    for section, values in extra.items():
        doc[section] = {**doc.get(section, {}), **values}
    return doc


def reader_config(hs: Homeserver, reader: MatrixUser, tmp_path: Path, **extra: Any) -> Config:
    """A client-mode config for `reader` with an embedded store under tmp_path."""
    doc = _base(hs.server_name, reader.user_id, reader.access_token, tmp_path / "qdrant", **extra)
    doc["homeserver"]["url"] = hs.base_url
    return parse_config(doc, tmp_path)


class Indexer:
    """One test's writer: the real reader, the embedded store, the real (recorded) embedder."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.embedder = RecordingEmbedder(shared_embedder())
        self.store: Store = open_store(cfg.index, cfg.base_dir)
        self.reader = MatrixReader.from_config(cfg)
        self.writer = Writer(cfg, self.reader, self.store, self.embedder)

    async def refresh(self, rooms: Sequence[RoomID] | None = None) -> RefreshReport:
        return await self.writer.refresh(only=rooms)

    async def collection(self) -> Collection:
        return await self.writer.open()

    async def points(self) -> list[StoredPoint]:
        col = await self.collection()
        return await asyncio.to_thread(lambda: list(col.scroll()))

    async def dump(self) -> str:
        """Every chat point and every meta entry as one string: what a grep of the index sees."""
        col = await self.collection()
        points = await self.points()
        meta = await asyncio.to_thread(col.list_meta, "")
        return json.dumps([p.payload for p in points] + [meta], ensure_ascii=False)

    async def bodies(self) -> dict[str, str]:
        """event id → indexed body, over the whole collection."""
        out: dict[str, str] = {}
        for p in await self.points():
            for m in p.payload["messages"]:
                assert m["event_id"] not in out, f"{m['event_id']} is in two windows"
                out[m["event_id"]] = m["body"]
        return out

    async def close(self) -> None:
        await self.reader.close()
        await asyncio.to_thread(self.store.close)
