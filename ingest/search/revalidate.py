"""Revalidation of search hits against the homeserver, for every caller of the read path.

A hit is shown only while, right now, its room still passes the scope rules and every event it
cites still exists unredacted and says what the index holds, by the record the room was built
from: the homeserver, or for a room indexed by `muninn import` its export (`SourcedCheck`). A
source that cannot answer is an error naming it, never a hit shown unconfirmed.

The writer's records can lag: a
room that became bridged, a DM, encrypted or excluded since the last refresh, or that the
reader left, keeps its points until the next refresh purges them; a message redacted or edited
since keeps its indexed text until the writer's walk reaches the redaction or the edit (longer
while the embedder is down, or while a new generation is built beside the active one). None of
that may reach a reply (docs/ARCHITECTURE.md §3 rules 6, 7, 15).

Room verdicts are the writer's own (`ingest.rules.scope` through `RoomCache`), never a second rule
set.
For the events, the index is current up to the room's cursor (the writer saves a cursor only
after the page's points are written; the read path takes the cursors before the points): what
can have made a hit stale since is in the room's timeline after that cursor — a redaction, or
a newer valid edit. So a reply reads that tail once a room, filtered to redactions and
messages (`/messages?dir=f&from=<cursor>&filter={"types": …}`: one request when the writer is
caught up, two when a few events are new), instead of one `GET /event` per cited event; while
the cursor has not moved (a burst of replies between two refreshes) each read goes on from the
room's last one instead of reading the whole tail again. A caller that has just read the room's
log for its query (the bot, for the command's transcript) needs no read at all when that log
reaches back to the cursor's newest walked event (`tail_since`; the tail's rules are
`ingest.search.tails`). Only
when the tail is longer than `tail_pages` pages, the cursor is unknown, or the read fails, does
it fall back to fetching each cited event (`GET /event`, whose bundled latest edit,
`unsigned.m.relations.m.replace`, shows an edit).

An edited message drops its whole hit rather than showing the new text: the index ranked the
window for its old words, and showing it for them — with any text — tells the asker those
words were there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from ingest.errors import MatrixError, MatrixUnavailable
from ingest.matrix import ClientEvent, Page, content_of
from ingest.matrix.export import ExportError, ExportReader
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import RoomScope
from ingest.search.hits import WindowPayload, cited_events
from ingest.search.tails import TAIL_TYPES, Tail, bundled_edit_ok, current, read_tail
from ingest.types import RoomID

__all__ = [
    "EventSource",
    "LiveCheck",
    "SourcedCheck",
    "TailSource",
    "export_check",
]


class EventSource(Protocol):
    """Where events are re-read: the homeserver (`MatrixReader`) or a room export."""

    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None: ...


@runtime_checkable
class TailSource(Protocol):
    """A source with a timeline to read after a cursor (the homeserver; an export has none,
    and is checked event by event)."""

    async def page_after(
        self, room_id: RoomID | str, token: str, *, types: Sequence[str], limit: int
    ) -> Page: ...


log = logging.getLogger("muninn.search")

_K = TypeVar("_K")

TAIL_PAGE = 1000  # Synapse's cap on `/messages?limit=`
ARRIVALS = 3  # reads beyond `tail_pages` for events that arrive while the tail is read
MAX_TAILS = 256  # rooms whose last tail is kept (each at most `tail_pages` pages of events)


@dataclass(frozen=True)
class _Read:
    """A room's tail read up to `token`, from `cursor`: the next read of the same cursor goes
    on from `token` (asked again from it, the homeserver gives exactly the newer events)."""

    cursor: str
    token: str
    tail: Tail
    events: int  # read since the cursor


class LiveCheck:
    """`Searcher(live_check=LiveCheck(reader, rooms))`: which of these windows may be shown?

    Called once a reply with every window it would show and the cursors the read path took
    before reading them. Room verdicts come from `rooms` (cached for its ttl; the bot drops an
    entry on any state event in the room). A room's tail is read in at most `tail_pages`
    requests; the fallback fetches events in parallel, at most `parallel` at a time. A read
    that fails counts the windows as gone (showing less is the safe error).
    """

    def __init__(
        self,
        reader: EventSource,
        rooms: RoomCache,
        *,
        parallel: int = 16,
        tail_pages: int = 2,
    ) -> None:
        self.reader = reader
        self.rooms = rooms
        self.tail_pages = tail_pages
        self._gate = asyncio.Semaphore(parallel)
        # Several rooms are checked at once: one verdict lookup at a time, so a cold cache
        # fetches a room's state once.
        self._verdicts = asyncio.Lock()
        self._reported: set[tuple[str, str]] = set()
        # Each room's last tail, so a burst of replies between two refreshes (the cursor
        # unmoved) reads only what is new each, not the whole tail since the cursor each.
        self._reads: dict[str, _Read] = {}

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

    async def tail(self, room_id: str, cursor: str | None) -> Tail | None:
        """The room's redactions and edits after `cursor`; None if they cannot be told whole.

        Goes on from the room's last read of the same cursor: what it held is still after the
        cursor, and anything since (a redaction, an edit, also of what it held) is read now.
        It can only hold more than a read from the cursor would (an edit since redacted), so
        a hit is at worst hidden until the writer moves the cursor, never shown stale.
        """
        if cursor is None or not isinstance(self.reader, TailSource):
            return None
        known = self._reads.get(room_id)
        if known is not None and known.cursor == cursor:
            tail, token, read = known.tail.copy(), known.token, known.events
        else:
            tail, token, read = Tail(), cursor, 0
        limit = self.tail_pages * TAIL_PAGE
        try:
            # A page with events is followed by one more read, until one finds nothing newer;
            # during a burst each reply's read finds the replies sent meanwhile, so pages are
            # bounded by `limit` events, plus ARRIVALS short reads, not by `tail_pages` reads
            # (which sent 8 replies at once to fetching every cited event, ~6 requests each).
            for _ in range(self.tail_pages + ARRIVALS if self.tail_pages else 0):
                page = await self.reader.page_after(
                    room_id, token, types=TAIL_TYPES, limit=TAIL_PAGE
                )
                read_tail(page.events, tail)
                read += len(page.events)
                if read > limit:
                    break
                if page.end is None or page.end == token:
                    if not page.events:  # else they would be served again from `token`
                        self._remember(room_id, _Read(cursor, token, tail, read))
                    return tail
                token = page.end
        except MatrixError as e:
            log.warning(
                "cannot read %s since its cursor, checking events one by one: %s", room_id, e
            )
            return None
        self._reads.pop(room_id, None)
        log.info(
            "%s has more than %d pages unindexed: checking events one by one",
            room_id,
            self.tail_pages,
        )
        return None

    def _remember(self, room_id: str, read: _Read) -> None:
        self._reads.pop(room_id, None)
        self._reads[room_id] = read
        while len(self._reads) > MAX_TAILS:
            del self._reads[next(iter(self._reads))]  # the least recently read room

    async def _fetch(self, room_id: str, event_id: str) -> ClientEvent | None:
        async with self._gate:
            try:
                event = await self.reader.get_event(room_id, event_id)
            except MatrixError as e:
                log.warning("cannot revalidate %s: %s", event_id, e)
                return None
        unsigned = event.get("unsigned") if event else None
        redacted = isinstance(unsigned, dict) and "redacted_because" in unsigned
        return event if event and content_of(event) and not redacted else None

    async def _one_by_one(self, room_id: str, payload: WindowPayload) -> bool:
        ids = cited_events(payload)
        fetched = await asyncio.gather(*(self._fetch(room_id, e) for e in ids))
        if any(event is None for event in fetched):
            return False
        events = {e: event for e, event in zip(ids, fetched, strict=True) if event is not None}
        return all(
            bundled_edit_ok(m, events[str(m["event_id"])])
            for m in payload.get("messages", [])
            if str(m["event_id"]) in events
        )

    def early(self, cursors: Mapping[str, str | None]) -> dict[str, asyncio.Future[Any]]:
        """Start reading these rooms' tails now; `windows` takes each at most once."""
        return {
            room: asyncio.ensure_future(self.tail(room, cursor))
            for room, cursor in cursors.items()
            if cursor is not None
        }

    async def _room(
        self,
        room_id: str,
        cursor: str | None,
        payloads: Sequence[WindowPayload],
        early: asyncio.Future[Any] | None,
        known: Tail | None,
    ) -> list[bool]:
        # Started when the cursors were taken (before the points): the same guarantee as a
        # read now, its snapshot only the ranking's few milliseconds older.
        reading: asyncio.Future[Any] | None = None
        if known is None and early is None:
            reading = asyncio.ensure_future(self.tail(room_id, cursor))
        elif known is None:
            reading = early
        elif early is not None:
            early.cancel()
        try:
            ok = await self._room_ok(room_id)
        except BaseException:  # the homeserver is down: the caller fails, naming it
            if reading is not None:
                reading.cancel()
            raise
        if not ok:
            if reading is not None:
                reading.cancel()
            return [False] * len(payloads)
        tail: Tail | None = known if reading is None else await reading
        if tail is not None:
            return [current(p, tail) for p in payloads]
        return list(await asyncio.gather(*(self._one_by_one(room_id, p) for p in payloads)))

    async def windows(
        self,
        payloads: Sequence[WindowPayload],
        cursors: Mapping[str, str | None],
        early: dict[str, asyncio.Future[Any]] | None = None,
        known: Mapping[str, Tail] | None = None,
    ) -> list[bool]:
        """Which of `payloads` may be shown. `known`: rooms whose tail since the cursor the
        caller has already read (`tail_since`); the others read theirs (`early`'s if given)."""
        early = early if early is not None else {}
        known = known or {}
        rooms = _grouped(payloads, lambda room: room)
        answers = await asyncio.gather(
            *(
                self._room(
                    r, cursors.get(r), [payloads[i] for i in idx], early.pop(r, None), known.get(r)
                )
                for r, idx in rooms.items()
            )
        )
        return _scattered(len(payloads), rooms.values(), answers)


class SourcedCheck:
    """Each room's windows revalidated against the record the room was built from.

    `exports` maps a room indexed by `muninn import` (`ingest.index.records.exported_rooms`) to a
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
        async with self._loading:  # windows are checked at once: read each export once
            if room_id not in self._loaded:
                self._loaded[room_id] = await load()
            return self._loaded[room_id]

    def early(self, cursors: Mapping[str, str | None]) -> dict[str, asyncio.Future[Any]]:
        live = {room: cursor for room, cursor in cursors.items() if room not in self.exports}
        return self.homeserver.early(live)

    async def windows(
        self,
        payloads: Sequence[WindowPayload],
        cursors: Mapping[str, str | None],
        early: dict[str, asyncio.Future[Any]] | None = None,
        known: Mapping[str, Tail] | None = None,
    ) -> list[bool]:
        # Homeserver rooms in one call (their tails are read in parallel), each export apart:
        # an export is its room's record, so a homeserver log read (`known`) says nothing of it.
        groups = _grouped(payloads, lambda room: room if room in self.exports else None)
        answered: list[Sequence[bool]] = []
        for room_id, idx in groups.items():
            check = self.homeserver if room_id is None else await self._check(room_id)
            asked = [payloads[i] for i in idx]
            try:
                answers = await check.windows(
                    asked, cursors, early, known if room_id is None else None
                )
            except MatrixUnavailable as e:
                rooms = room_id or ", ".join(sorted({str(p.get("room_id")) for p in asked}))
                raise MatrixUnavailable(
                    f"cannot revalidate the hits of {rooms}: {e}. No hit is shown "
                    "unconfirmed; rooms indexed by `muninn import` are checked against their "
                    "export instead"
                ) from None
            answered.append(answers)
        return _scattered(len(payloads), groups.values(), answered)


async def export_check(path: Path, *, user_id: str, scope: RoomScope) -> LiveCheck:
    """Revalidation of an imported room against its export: the same check as against the
    homeserver, its state and events read from the file (a redaction there hides the hit)."""
    try:
        reader = await ExportReader.load(path, user_id=user_id)
    except ExportError as e:
        raise ExportError(
            f"{e}. This room was indexed from that export and its hits are revalidated against "
            "it: restore the file, or import the room again"
        ) from None
    return LiveCheck(reader, RoomCache(reader, scope))


def _grouped(payloads: Sequence[WindowPayload], key: Callable[[str], _K]) -> dict[_K, list[int]]:
    """The payloads' positions, grouped by `key` of their room."""
    groups: dict[_K, list[int]] = {}
    for i, p in enumerate(payloads):
        groups.setdefault(key(str(p.get("room_id"))), []).append(i)
    return groups


def _scattered(
    n: int, groups: Iterable[Sequence[int]], answers: Iterable[Sequence[bool]]
) -> list[bool]:
    """Each group's answers put back at its payloads' positions."""
    verdicts = [False] * n
    for idx, answer in zip(groups, answers, strict=True):
        for i, ok in zip(idx, answer, strict=True):
            verdicts[i] = ok
    return verdicts
