"""Which searched rooms the index has not caught up with: the search document's `indexing`
(`muninn search --json`, MCP `search`; docs/ARCHITECTURE.md §4.3).

A room is behind when its homeserver holds events the writer's walk has not read: the walk's
stored cursor (`cursor:<room>`, the token its next walk starts from, and `updated_ms`, when it
last read the room: what `rooms`' `lag_seconds` counts from) is asked for one event after it,
as the next walk would ask. A room scope admits that has no cursor yet was never read. Rooms the
index built from an export (`muninn import`) or the writer refused are not read from the
homeserver and are never listed. Empty: every searched room is current, and "no hits" means
nothing said there matched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ingest.errors import MatrixBadPaging
from ingest.index.facts import StoreFacts
from ingest.index.records import CURSOR_PREFIX, EXPORT_PREFIX, REFUSED_PREFIX, exported_rooms
from ingest.matrix import MatrixReader
from ingest.matrix.rooms import RoomCache
from ingest.search.hits import Behind
from ingest.store import Store
from ingest.types import RoomID

__all__ = ["Indexed", "indexing"]

AT_ONCE = 8  # rooms asked at once: a search of every room must not flood the homeserver


@dataclass(frozen=True)
class Indexed:
    """The store's records `indexing` reads: each room's cursor, and the rooms never read from
    the homeserver (refused by the writer, or built from an export)."""

    cursors: Mapping[str, Mapping[str, Any]]
    skip: frozenset[str]

    @classmethod
    def of_facts(cls, facts: StoreFacts) -> Indexed:
        """From `muninn status`'s read (the running service's, while it holds the store)."""
        return cls(facts.cursors, frozenset(facts.refused) | frozenset(facts.imported))

    @classmethod
    def of_store(cls, store: Store) -> Indexed:
        """From the active generation's records (blocking: run it in a thread)."""
        active = store.active()
        if active is None:
            return cls({}, frozenset())
        col = store.open(active, dense_dim=None, create=False)
        raw = col.list_meta(CURSOR_PREFIX)
        exported = exported_rooms(col.list_meta(EXPORT_PREFIX), raw, cursor_prefix=CURSOR_PREFIX)
        refused = {k.removeprefix(REFUSED_PREFIX) for k in col.list_meta(REFUSED_PREFIX)}
        cursors = {k.removeprefix(CURSOR_PREFIX): v for k, v in raw.items()}
        return cls(cursors, frozenset(refused) | frozenset(exported))


async def indexing(
    reader: MatrixReader,
    rooms: RoomCache,
    indexed: Indexed,
    searched: Sequence[str] | None,
    now_ms: int,
) -> list[Behind]:
    """`[{room_id, room_alias, reason, indexed_ts, lag_seconds}]`, by room id: each searched
    room (None: every room, the indexed ones and the joined ones scope admits) the index has
    not caught up with, `reason` `not_read` (no cursor) or `behind` (events after it)."""
    if searched is None:
        joined = set(await reader.joined_rooms())
        searched = sorted((set(indexed.cursors) | joined) - indexed.skip)
    gate = asyncio.Semaphore(AT_ONCE)

    async def judged(room_id: str) -> Behind | None:
        async with gate:
            return await _judged(reader, rooms, indexed.cursors.get(room_id), room_id, now_ms)

    found = await asyncio.gather(*(judged(r) for r in sorted(set(searched) - indexed.skip)))
    return [f for f in found if f is not None]


async def _judged(
    reader: MatrixReader,
    rooms: RoomCache,
    cursor: Mapping[str, Any] | None,
    room_id: str,
    now_ms: int,
) -> Behind | None:
    """One room's entry, or None when it is current (or scope refuses it: never read)."""
    if cursor is not None and not await _behind(reader, room_id, cursor.get("token")):
        return None
    info = await rooms.get(room_id)
    if not info.verdict.eligible or info.state is None:
        return None
    updated = cursor.get("updated_ms") if cursor is not None else None
    stamp = int(updated) if isinstance(updated, int | float) else None
    return Behind(
        room_id=room_id,
        room_alias=info.state.canonical_alias,
        reason="not_read" if cursor is None else "behind",
        indexed_ts=stamp,
        lag_seconds=(now_ms - stamp) / 1000 if stamp is not None else None,
    )


async def _behind(reader: MatrixReader, room_id: str, token: object) -> bool:
    """Whether the room has an event after the walk's `token`, as the writer's next walk would
    read it (no token: its walk has not got anywhere yet)."""
    if not isinstance(token, str):
        return True
    pages = reader.walk(RoomID(room_id), token, page_size=1)
    try:
        async for page in pages:
            return bool(page.events)
    except MatrixBadPaging:
        return False  # a walk the writer cannot go on with either: its `muninn status` says
    finally:
        await pages.aclose()  # type: ignore[attr-defined]
    return False
