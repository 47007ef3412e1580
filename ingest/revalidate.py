"""Revalidation of search hits against the homeserver, for every caller of the read path.

A hit is shown only while, right now, its room still passes the scope rules and every event it
cites still exists unredacted. The writer's records can lag: a room that became bridged, a DM,
encrypted or excluded since the last refresh, or that the reader left, keeps its points until
the next refresh purges them, and none of them may reach a reply meanwhile (DESIGN.md §3).
The verdict is the writer's own (`ingest.scope` through `RoomCache`), never a second rule set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ingest.errors import MatrixError
from ingest.matrix import MatrixReader
from ingest.rooms import RoomCache

__all__ = ["LiveCheck"]

log = logging.getLogger("muninn.revalidate")


class LiveCheck:
    """`Searcher(live_check=LiveCheck(reader, rooms))`: is this hit still fit to show?

    Room verdicts come from `rooms` (cached for its ttl; the bot drops an entry on any state
    event in the room). Events are fetched in parallel, at most `parallel` at a time; an event
    that cannot be fetched counts as gone (showing less is the safe error).
    """

    def __init__(self, reader: MatrixReader, rooms: RoomCache, *, parallel: int = 16) -> None:
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
