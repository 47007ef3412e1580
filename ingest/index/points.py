"""`ingest.index.points`: a room's windows as stored points, and stored points as windows.

Builds a window's payload (what search reads, and the writer reads back to re-chunk a room),
and writes a `WindowSet`'s changes: only windows whose content hash changed are embedded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ingest.embed import Embedder, WindowVectors
from ingest.embed.linecodec import LINES, encode_line
from ingest.index.chunker import (
    DENSE_LINE,
    LineFormat,
    Names,
    content_hash,
    window_payload,
    window_text,
)
from ingest.index.windows import StoredWindow, WindowSet, messages_from_payload
from ingest.rules import lexical
from ingest.store import AsyncCollection, Collection, PointFilter, PointRecord
from ingest.types import EventID, RoomID, RoomState, StoredPoint, Window


def build_payload(
    window: Window,
    names: Names,
    compat: Mapping[str, Any],
    max_bytes: int,
    dense: LineFormat = DENSE_LINE,
) -> dict[str, Any]:
    """The §4 payload of a window, with applied edits recorded so redactions can find them."""
    edit_ids = [m.edit_event_id for m in window.messages if m.edit_event_id is not None]
    versions = {
        "chunker": compat["chunker"],
        "scrub": compat["scrub"],
        "lexical": compat["lexical"],
        "embedder": compat["embedder"]["model"],
    }
    payload = window_payload(
        window,
        names=names,
        versions=versions,
        max_bytes=max_bytes,
        extra_event_ids=edit_ids,
        dense=dense,
    )
    for raw, m in zip(payload["messages"], window.messages, strict=True):
        if m.edit_event_id is not None:
            raw["edit_event_id"] = m.edit_event_id
            raw["edit_ts"] = m.edit_ts
    # The writer skips a window whose hash is unchanged, so the hash must cover the whole point:
    # the embedded text is cut to max_bytes, while the lexical vector reads every word and the
    # payload keeps every body and applied edit id. Hashing the cut text alone left an edit past
    # the cut (and its old words) unwritten.
    whole = {k: v for k, v in payload.items() if k != "content_hash"}
    payload["content_hash"] = content_hash(
        json.dumps(whole, sort_keys=True, default=str), versions
    )
    return payload


def line_payload(
    payload: Mapping[str, Any], vectors: WindowVectors, dense: LineFormat = DENSE_LINE
) -> dict[str, Any]:
    """`{"lines": {event id: code}}`: each message's line vector from the window's pass
    (`linecodec`), for a window of two or more messages (one message is its own quote); a
    message whose line the model did not read (cut at the text's bound) has none. Written
    after `content_hash`: vectors follow from the hashed text and versions."""
    messages = payload.get("messages", [])
    if len(messages) < 2:
        return {}
    first = 1 if dense.speakers else 0  # the speakers' line opens the text
    lines: dict[str, str] = {}
    for m, vector in zip(messages, vectors.lines[first:], strict=False):
        if vector is not None:
            lines[str(m["event_id"])] = encode_line(vector)
    return {LINES: lines}


class CollectionLookup:
    """`WindowLookup` over one room's points in a collection."""

    def __init__(self, collection: Collection, room_id: RoomID) -> None:
        self.collection = collection
        self.room_id = room_id

    def stored(self, point: StoredPoint) -> StoredWindow:
        root = point.payload.get("thread_root")
        return StoredWindow(
            point_id=str(point.id),
            messages=messages_from_payload(self.room_id, point.payload),
            thread_root=EventID(root) if root else None,
            content_hash=point.payload.get("content_hash"),
        )

    def windows_of_events(self, event_ids: Sequence[EventID]) -> list[StoredWindow]:
        flt = PointFilter(room_ids=(self.room_id,), event_ids=tuple(event_ids))
        return [self.stored(p) for p in self.collection.scroll(flt)]

    def window_by_id(self, point_id: str) -> StoredWindow | None:
        found = self.collection.retrieve([point_id])
        return self.stored(found[0]) if found else None


class WriteTally(Protocol):
    """What writing a window set's changes counts (a `RoomReport`)."""

    windows_written: int
    windows_embedded: int
    windows_deleted: int


async def commit_changes(
    col: AsyncCollection,
    ws: WindowSet,
    state: RoomState,
    names: Names,
    tally: WriteTally,
    *,
    embedder: Embedder,
    compat: Mapping[str, Any],
    max_bytes: int,
    dense: LineFormat = DENSE_LINE,
) -> None:
    """Embed what changed, upsert, then delete superseded points (the cursor comes after)."""
    upserts, deletes = ws.changes()
    pending: list[tuple[str, dict[str, Any], str]] = []
    for pid, (thread_root, messages) in upserts.items():
        window = Window(state.room_id, thread_root, messages, state.canonical_alias)
        payload = build_payload(window, names, compat, max_bytes, dense)
        if payload["content_hash"] != ws.stored_hash(pid):
            # The dense side reads the (cut) embedded text; the lexical side every word of
            # every whole line.
            pending.append((pid, payload, window_text(window, names)))
    if pending:
        vectors = await embedder.embed_windows([p["text"] for _, p, _ in pending])
        points = []
        for (pid, p, full), v in zip(pending, vectors, strict=True):
            p.update(line_payload(p, v, dense))
            points.append(
                PointRecord(
                    id=pid, dense=v.window, sparse=lexical.document_vector(full), payload=p
                )
            )
        await col.upsert(points)
        tally.windows_written += len(points)
        tally.windows_embedded += len(points)
    if deletes:
        await col.delete(deletes)
        tally.windows_deleted += len(deletes)


__all__ = [
    "CollectionLookup",
    "WriteTally",
    "build_payload",
    "commit_changes",
    "line_payload",
]
