"""What the writer's end-to-end tests share: a reader joined to their rooms, a room's report,
the stored windows' hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit


async def reader_in(hs: Homeserver, owner: MatrixUser, *rooms: str) -> MatrixUser:
    """A fresh client-mode reader user joined to exactly these rooms."""
    reader = await hs.register(displayname="Reader")
    for room_id in rooms:
        await admit(owner, room_id, reader)
    return reader


def room_report(report: Any, room_id: str) -> Any:
    return next(r for r in report.rooms if r.room_id == room_id)


async def hashes(ix: Indexer) -> dict[str, str]:
    return {str(p.id): str(p.payload["content_hash"]) for p in await ix.points()}


def write_reader_config(
    path: Path, hs: Homeserver, reader: MatrixUser, store: Path, **extra: Any
) -> None:
    """A client-mode config for `reader` over the store at `store`, written to `path`."""
    doc: dict[str, Any] = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
        "index": {"store": {"path": str(store)}, "collection": "muninn_test"},
        **extra,
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
