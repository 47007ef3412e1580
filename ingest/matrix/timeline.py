"""Timeline reads: the forward `/messages` walk, latest events, single events, an event's
context and what follows it, relations.

Events stay the homeserver's JSON, seen through the typed `ClientEvent` view: normalising them
is the job of `ingest.rules.events` (stricter than mautrix's event classes, which would parse what
Muninn must refuse).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence, Set
from dataclasses import dataclass

from ingest.errors import MatrixBadPaging, MatrixForbidden, MatrixNotFound
from ingest.event import ClientEvent, as_event, events_in
from ingest.matrix.http import JSONDict, MatrixHTTP, Path, endpoint
from ingest.types import RoomID

__all__ = ["MAX_RELATION_PAGES", "Page", "TimelineReader"]

MAX_RELATION_PAGES = 50  # of one event's relations: 5,000 edits at the default page size


@dataclass(frozen=True)
class Page:
    """One `/messages` response: events oldest first, and the tokens around them.

    `end` is the token to store as a cursor: a later `walk(room, page.end)` starts right after
    the last event of this page.
    """

    events: list[ClientEvent]
    start: str | None
    end: str | None


def _messages(room_id: RoomID | str) -> str:
    return endpoint(Path.v3.rooms[room_id].messages)


class TimelineReader(MatrixHTTP):
    """The request layer plus the reads of a room's timeline."""

    async def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]:
        """Walk a room forward (`/messages?dir=f`), one page at a time, to the timeline's end.

        Without `from_token` the walk starts at the room's creation event. Every yielded page
        has `end` set: store it as the cursor once the page is written, and a later
        `walk(room, end)` yields exactly the events sent since, none of this page again.

        What Synapse 1.163 does at the end of a forward walk (found by experiment; pinned by
        `test_synapse_forward_walk_end_omits_end_and_resumes`):
        - the last page holding events still carries an `end` (`t<depth>-<stream>_...`);
        - the request from that `end` answers `{"chunk": [], "start": <that same token>}` with
          **no** `end`. That stops the walk and is not yielded (it holds nothing to store);
        - asked again from the same token after new events were sent, Synapse returns exactly
          those new events and a new `end`, so the last `end` is a lossless resume cursor;
        - a page can be empty yet carry an `end`: under `joined`/`invited` history visibility
          the events before the reader's join are filtered out. Such pages are yielded, so the
          cursor moves past history the reader may not see instead of re-asking for it.
        An `end` equal to the token asked from also stops the walk, so a server that never
        omits `end` cannot spin it forever. A faulty one cannot either (`MatrixBadPaging`): an
        `end` this walk was already given, or a page holding an event of the page before (a
        forward walk never serves one twice), ends it; the caller bounds its pages and time.
        """
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        path = _messages(room_id)
        token = from_token
        seen: set[str] = set() if from_token is None else {from_token}
        before: set[str] = set()  # the event ids of the page before
        while True:
            query: dict[str, str | int] = {"dir": "f", "limit": page_size}
            if token is not None:
                query["from"] = token
            page = _page(await self._get_object(path, query))
            if page.end is None or page.end == token:
                if page.events:  # not seen from Synapse; yield rather than drop events
                    yield page
                return
            ids = {i for e in page.events if isinstance(i := e.get("event_id"), str)}
            if page.end in seen or ids & before:
                what = "a token it gave before" if page.end in seen else "events it gave before"
                raise MatrixBadPaging(
                    f"/messages of {room_id} answered {what} (after {len(seen)} pages): the "
                    "walk would not end"
                )
            seen.add(page.end)
            before = ids
            yield page
            token = page.end

    async def page_after(
        self, room_id: RoomID | str, token: str, *, types: Sequence[str], limit: int
    ) -> Page:
        """One forward `/messages` page of the events after `token` of the given `types` (a
        `RoomEventFilter`, spec: `filter` on `/messages`). Like `walk`, a page without `end`
        (or with `end == token`) is the timeline's end."""
        query: dict[str, str | int] = {
            "dir": "f",
            "from": token,
            "limit": limit,
            "filter": json.dumps({"types": list(types)}, separators=(",", ":")),
        }
        return _page(await self._get_object(_messages(room_id), query))

    async def latest(
        self, room_id: RoomID | str, limit: int, page_size: int = 500
    ) -> list[ClientEvent]:
        """Up to `limit` of the room's newest events, newest first (`/messages?dir=b`)."""
        path = _messages(room_id)
        events: list[ClientEvent] = []
        token: str | None = None
        while len(events) < limit:
            size = min(limit - len(events), page_size)
            query: dict[str, str | int] = {"dir": "b", "limit": size}
            if token is not None:
                query["from"] = token
            page = _page(await self._get_object(path, query))
            events.extend(page.events)
            if page.end is None or page.end == token:
                break
            token = page.end
        return events[:limit]

    async def newer_than(
        self,
        room_id: RoomID | str,
        known: Set[str],
        limit: int,
        page_size: int = 50,
        first_page: int = 10,
    ) -> tuple[list[ClientEvent], bool]:
        """The room's events newer than the newest one in `known`, newest first.

        Returns `(events, met)`: `met` is False when `limit` events were read without reaching
        a known one (the caller's copy is then too old to extend and `events` replaces it).
        The first page is short: between two commands a room has a few new events, and the
        homeserver's cost of a page grows with the events it serves.
        """
        path = _messages(room_id)
        events: list[ClientEvent] = []
        token: str | None = None
        while len(events) < limit:
            size = first_page if token is None else page_size
            query: dict[str, str | int] = {
                "dir": "b",
                "limit": min(size, limit - len(events)),
            }
            if token is not None:
                query["from"] = token
            page = _page(await self._get_object(path, query))
            for event in page.events:
                if event.get("event_id") in known:
                    return events, True
                events.append(event)
            if page.end is None or page.end == token:
                return events, True  # the room's start: everything newer is here
            token = page.end
        return events[:limit], False

    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None:
        """One event as the reader may see it; None if it does not exist or is not visible."""
        try:
            return as_event(
                await self._get_object(endpoint(Path.v3.rooms[room_id].event[event_id]))
            )
        except MatrixNotFound:
            return None

    async def context(
        self, room_id: RoomID | str, event_id: str, limit: int
    ) -> tuple[list[ClientEvent], ClientEvent, list[ClientEvent]] | None:
        """The events around `event_id` (`/context`; the homeserver splits `limit` either
        side): (before, newest first; the event; after, oldest first). None if the event does
        not exist or the reader may not see it."""
        path = endpoint(Path.v3.rooms[room_id].context[event_id])
        try:
            resp = await self._get_object(path, {"limit": limit})
        except (MatrixNotFound, MatrixForbidden):
            return None
        event = as_event(resp.get("event"))
        if event is None:
            return None
        return events_in(resp.get("events_before")), event, events_in(resp.get("events_after"))

    async def following(
        self,
        room_id: RoomID | str,
        event_id: str,
        *,
        types: Sequence[str],
        limit: int,
        page_size: int = 100,
    ) -> tuple[ClientEvent, list[ClientEvent]] | None:
        """The event and up to `limit` events of `types` sent after it, oldest first: its
        `/context` (the events after it and a token there), then forward `/messages` pages.
        None if the event does not exist or the reader may not see it."""
        path = endpoint(Path.v3.rooms[room_id].context[event_id])
        flt = json.dumps({"types": list(types)}, separators=(",", ":"))
        size = min(page_size, limit)
        try:  # the homeserver splits `limit` either side: 2 × size gives `size` after it
            resp = await self._get_object(path, {"limit": 2 * size, "filter": flt})
        except (MatrixNotFound, MatrixForbidden):
            return None
        event = as_event(resp.get("event"))
        if event is None:
            return None
        events = events_in(resp.get("events_after"))
        token = resp.get("end")
        while len(events) < limit and isinstance(token, str):
            left = min(page_size, limit - len(events))
            page = await self.page_after(room_id, token, types=types, limit=left)
            events.extend(page.events)
            if page.end is None or page.end == token:
                break
            token = page.end
        return event, events[:limit]

    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[ClientEvent]:
        """Every event relating to `event_id` with `rel_type`, oldest first, all pages; a
        `next_batch` given before, or more than `MAX_RELATION_PAGES`, is `MatrixBadPaging`."""
        path = endpoint(Path.v1.rooms[room_id].relations[event_id][rel_type])
        events: list[ClientEvent] = []
        token: str | None = None
        seen: set[str] = set()
        while True:
            if token is not None and (token in seen or len(seen) >= MAX_RELATION_PAGES):
                why = "a token it gave before" if token in seen else "too many pages"
                raise MatrixBadPaging(
                    f"/relations of {event_id} in {room_id}: {why} (after {len(seen)} pages)"
                )
            if token is not None:
                seen.add(token)
            query: dict[str, str | int] = {"dir": "f", "limit": page_size}
            if token is not None:
                query["from"] = token
            resp = await self._get_object(path, query)
            events.extend(events_in(resp.get("chunk")))
            batch = resp.get("next_batch")
            if not batch or not isinstance(batch, str):
                return events
            token = batch


def _page(resp: JSONDict) -> Page:
    events = events_in(resp.get("chunk"))
    start, end = resp.get("start"), resp.get("end")
    return Page(
        events=events,
        start=start if isinstance(start, str) else None,
        end=end if isinstance(end, str) else None,
    )
