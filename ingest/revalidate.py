"""Revalidation of search hits against the homeserver, for every caller of the read path.

A hit is shown only while, right now, its room still passes the scope rules and every event it
cites still exists unredacted, by the record the room was built from: the homeserver, or for a
room indexed by `muninn import` its export (`SourcedCheck`). A source that cannot answer is an
error naming it, never a hit shown unconfirmed.

The writer's records can lag: a room that became bridged, a DM, encrypted or excluded since
the last refresh, or that the reader left, keeps its points until the next refresh purges
them, and none of them may reach a reply meanwhile (DESIGN.md §3).
The verdict is the writer's own (`ingest.scope` through `RoomCache`), never a second rule set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from ingest.errors import MatrixError, MatrixUnavailable
from ingest.rooms import RoomCache
from ingest.types import RoomID

__all__ = ["EventSource", "LiveCheck", "SourcedCheck"]


class EventSource(Protocol):
    """Where events are re-read: the homeserver (`MatrixReader`) or a room export."""

    async def get_event(self, room_id: RoomID | str, event_id: str) -> dict[str, Any] | None: ...


log = logging.getLogger("muninn.revalidate")


class LiveCheck:
    """`Searcher(live_check=LiveCheck(reader, rooms))`: is this hit still fit to show?

    Room verdicts come from `rooms` (cached for its ttl; the bot drops an entry on any state
    event in the room). Events are fetched in parallel, at most `parallel` at a time; an event
    that cannot be fetched counts as gone (showing less is the safe error).
    """

    def __init__(self, reader: EventSource, rooms: RoomCache, *, parallel: int = 16) -> None:
        self.reader = reader
        self.rooms = rooms
        self._gate = asyncio.Semaphore(parallel)
        # The searcher checks several hits at once: one verdict lookup at a time, so a cold
        # cache fetches a room's state once, not once a hit.
        self._verdicts = asyncio.Lock()
        self._reported: set[tuple[str, str]] = set()

    async def _room_ok(self, room_id: str) -> bool:
        async with self._verdicts:
            verdict = (await self.rooms.get(room_id)).verdict
        if verdict.eligible:
            return True
        key = (room_id, str(verdict.reason))
        if key not in self._reported:  # once a room and reason, not once a hit
            self._reported.add(key)
            log.info(
                "hiding indexed windows of %s until a refresh purges them: %s (%s)",
                room_id,
                verdict.reason,
                verdict.detail,
            )
        return False

    async def _live(self, room_id: str, event_id: str) -> bool:
        async with self._gate:
            try:
                event = await self.reader.get_event(room_id, event_id)
            except MatrixError as e:
                log.warning("cannot revalidate %s: %s", event_id, e)
                return False
        unsigned = event.get("unsigned") if event else None
        redacted = isinstance(unsigned, dict) and "redacted_because" in unsigned
        return bool(event and event.get("content")) and not redacted

    async def __call__(self, room_id: str, event_ids: Sequence[str]) -> bool:
        if not await self._room_ok(room_id):
            return False
        results = await asyncio.gather(*(self._live(room_id, e) for e in event_ids))
        return all(results)


class SourcedCheck:
    """Each room's hits revalidated against the record the room was built from.

    `exports` maps a room indexed by `muninn import` (`ingest.export.exported_rooms`) to a
    factory of its export's `LiveCheck`, loaded on the room's first hit; every other room asks
    `homeserver`. A homeserver that does not answer raises `MatrixUnavailable` naming the room
    and the cause: the caller fails, and no hit is shown unconfirmed.
    """

    def __init__(
        self,
        homeserver: LiveCheck,
        exports: Mapping[str, Callable[[], Awaitable[LiveCheck]]] | None = None,
    ) -> None:
        self.homeserver = homeserver
        self.exports = dict(exports or {})
        self._loaded: dict[str, LiveCheck] = {}
        self._loading = asyncio.Lock()

    async def _check(self, room_id: str) -> LiveCheck:
        load = self.exports.get(room_id)
        if load is None:
            return self.homeserver
        async with self._loading:  # hits are checked at once: read each export once
            if room_id not in self._loaded:
                self._loaded[room_id] = await load()
            return self._loaded[room_id]

    async def __call__(self, room_id: str, event_ids: Sequence[str]) -> bool:
        check = await self._check(room_id)
        try:
            return await check(room_id, event_ids)
        except MatrixUnavailable as e:
            raise MatrixUnavailable(
                f"cannot revalidate the hits of {room_id}: {e}. No hit is shown unconfirmed; "
                "rooms indexed by `muninn import` are checked against their export instead"
            ) from None
