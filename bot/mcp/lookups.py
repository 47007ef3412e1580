"""What `muninn mcp`'s tools answer, by the CLI's own paths and no wider (docs/ARCHITECTURE.md
§3 rule 29, §4.7).

`search` is `muninn search` (`bot.operations.search.find`: the store, or the running service's
listener while `muninn run` holds it; every hit revalidated); `pins` is `muninn pins`
(`bot.operations.pins.board`); `rooms` reads the scope verdicts and the store's facts as
`muninn status` does (with the homeserver down, the store's rooms, their homeserver's fields
marked unknown); `context` reads the homeserver's `/context` and shows it through
`bot.mcp.context.around`. `mcp.rooms` narrows every tool to the rooms it lists. Users are taken
as the CLI's `--sender` takes them (`bot.operations.common.cli_users`), and a room no tool could
answer for is refused by name, never searched into 0 hits. Beside a running `muninn run`, the
listener is asked with the read token only (`bot.mcp.service`). One call runs at a time, and
each opens the embedded store for itself and closes it before it answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bot.chat.commands.arguments import ArgumentError
from bot.chat.commands.dates import instant
from bot.config import ServiceConfig
from bot.mcp import service
from bot.operations.common import cli_reader, cli_users, resolve_room
from bot.operations.context import (
    Around,
    EventRef,
    around,
    event_ref,
    read_around,
    showing_for,
    with_context,
)
from bot.operations.enrich import enriched
from bot.operations.freshness import Indexed
from bot.operations.pins import board, recorded_purges
from bot.operations.replies import Narrowing, replies
from bot.operations.search import fail_fast, find
from bot.operations.status import store_facts
from bot.service import wiring
from ingest.embed import Embedder
from ingest.errors import MatrixUnavailable, QueryError
from ingest.index.facts import StoreFacts
from ingest.matrix import MatrixReader
from ingest.matrix.rooms import RoomCache
from ingest.search.filters import MessageFilter
from ingest.search.hits import SearchResult
from ingest.types import RoomID, RoomState

__all__ = ["Lookups", "Reading", "listed", "named"]

# The read path's field names, as the tools call them (a refusal names the tool's argument).
_ARGUMENT = {"texts": "query", "offset": "cursor", "exclude_senders": "exclude_sender"}


def named(error: QueryError) -> QueryError:
    """`error` naming the tool's argument instead of the read path's field."""
    field = _ARGUMENT.get(error.field, error.field)
    if field == error.field:
        return error
    return QueryError(field, str(error).split(": ", 1)[1])


def moment(argument: str, text: str | None) -> int | None:
    """A time argument in the chat's date grammar (`bot.chat.commands.dates.instant`), named when
    bad."""
    if text is None:
        return None
    try:
        return instant(text, int(time.time() * 1000))
    except ArgumentError as e:
        raise QueryError(argument, e.problem) from None


def listed(value: str | Sequence[str] | None) -> list[str]:
    """One text or several, as a list (a tool takes either; its schema bounds both)."""
    return [value] if isinstance(value, str) else list(value or ())


@dataclass(frozen=True)
class Reading:
    """How `search` reads past its filters: `match` (`meaning` or `words`), each hit's
    `context` (messages either side), or the replies to `reply_to` instead of the index."""

    match: str = "meaning"
    context: int = 0
    reply_to: str | None = None


class Lookups:
    def __init__(self, cfg: ServiceConfig, embedder: Embedder) -> None:
        self.cfg = service.without_listener(cfg)  # what the CLI's read paths are given
        self.service = cfg  # the running service's listener, asked with the read token
        self.embedder = embedder
        self._one = asyncio.Lock()

    def users(self, value: str | Sequence[str] | None, argument: str) -> list[str]:
        """User ids as `muninn search --sender` takes them: `@bob:server`, or `@bob` / `bob`
        on this homeserver; one that cannot be a user id is an error naming `argument`."""
        return cli_users(listed(value), self.cfg.homeserver.server_name, argument) or []

    def unreachable(self, reads: str) -> MatrixUnavailable:
        """The homeserver is down: what a tool that `reads` from it answers (no CLI flag)."""
        return MatrixUnavailable(
            f"the homeserver {self.cfg.homeserver.url} is unreachable (`muninn status` says "
            f"why): {reads}"
        )

    async def _facts(self) -> StoreFacts:
        """The store's facts, from the store, or from the running service that holds it."""
        return await service.store_or_service(
            self.service, lambda: store_facts(self.cfg), lambda: service.status(self.service)
        )

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[MatrixReader]:
        """A call's reader, holding the one-call lock: it fails fast, as `muninn search`'s."""
        async with self._one:
            reader = cli_reader(self.cfg)
            fail_fast(reader)
            try:
                yield reader
            finally:
                await reader.close()

    async def _served(self, reader: MatrixReader) -> list[RoomID] | None:
        """`mcp.rooms` as room ids (None: every room); an alias that no longer resolves
        serves nothing rather than failing every call."""
        if self.cfg.mcp.rooms is None:
            return None
        out: list[RoomID] = []
        for room in self.cfg.mcp.rooms:
            try:
                out.append(await resolve_room(reader, room))
            except QueryError:
                continue
        return out

    async def _room(self, reader: MatrixReader, room: str, served: list[RoomID] | None) -> RoomID:
        room_id = await resolve_room(reader, room)
        if served is not None and room_id not in served:
            raise QueryError("room", f"{room} is not served here (mcp.rooms)")
        return room_id

    async def _known(self, reader: MatrixReader, rooms: Sequence[tuple[str, RoomID]]) -> None:
        """Each (given, id) is a room the reader has joined or the index holds (an imported
        one): any other is refused by name, never searched into 0 hits."""
        if not rooms:
            return
        try:
            joined: set[RoomID] | None = set(await reader.joined_rooms())
        except MatrixUnavailable:
            joined = None  # the index may still hold it: imported rooms need no homeserver
        missing = [(given, r) for given, r in rooms if joined is None or r not in joined]
        if not missing:
            return
        facts = await self._facts()
        for given, room_id in missing:
            if room_id in facts.cursors:
                continue
            if joined is None:
                raise self.unreachable(f"whether the reader is in {given} is not known")
            raise QueryError(
                "room",
                f"{given} is no room the reader has joined or the index holds "
                "(`rooms` lists those that can be searched)",
            )

    async def search(
        self,
        texts: list[str],
        room: list[str],
        sender: list[str],
        when: tuple[str | None, str | None],
        limit: int,
        cursor: int | None,
        flt: MessageFilter,
        sort: str,
        read: Reading = Reading(),
    ) -> dict[str, Any]:
        """`search`: `muninn search --json`'s document; `when` is (after, before); `read`: how
        the words match, each hit's context, or the replies to one message instead."""
        after, before = moment("after", when[0]), moment("before", when[1])
        shape: dict[str, Any] = {
            "senders": sender or None,
            "after": after,
            "before": before,
            "limit": limit,
            "flt": flt,
            "sort": sort,
            "offset": cursor or 0,
        }
        try:
            async with self._reader() as reader:
                if read.reply_to is not None:
                    return await self._replies(reader, read, room, texts, shape)
                served = await self._served(reader)
                rooms = [await self._room(reader, r, served) for r in room]
                await self._known(reader, list(zip(room, rooms, strict=True)))
                if not rooms and served is not None:
                    if not served:
                        raise QueryError("room", "none of the rooms in mcp.rooms resolves")
                    rooms = served
                asked = {**shape, "match": read.match}
                result = await service.store_or_service(
                    self.service,
                    lambda: find(
                        self.cfg,
                        texts=texts,
                        rooms=rooms or None,
                        embedder=self.embedder,
                        context=read.context,
                        **asked,
                    ),
                    lambda: self._from_service(reader, texts, rooms or None, read.context, asked),
                )
        except QueryError as e:
            raise named(e) from None
        except MatrixUnavailable:
            raise self.unreachable(
                "hits are confirmed against it before they are shown, so none is; rooms indexed "
                "by `muninn import` are searched without it (name them in `room`)"
            ) from None
        return result.as_json()

    async def _from_service(
        self,
        reader: MatrixReader,
        texts: list[str],
        rooms: list[RoomID] | None,
        context: int,
        asked: dict[str, Any],
    ) -> SearchResult:
        """The running service's search, with what the listener's document does not carry
        (`indexing`, `context`) read here: the store's records from its status."""
        result = await service.search(self.service, texts, rooms, **asked)
        indexed = Indexed.of_facts(await service.status(self.service))
        stones = await recorded_purges(self.cfg)  # the purge file: the service holds the store
        return await enriched(self.cfg, reader, result, rooms, context, indexed, stones)

    async def _replies(
        self,
        reader: MatrixReader,
        read: Reading,
        room: list[str],
        texts: list[str],
        shape: dict[str, Any],
    ) -> dict[str, Any]:
        """`search` with `reply_to`: the replies to that message and its thread, read from the
        homeserver now (`bot.operations.replies`)."""
        assert read.reply_to is not None
        ref = event_ref(read.reply_to, "reply_to")
        if ref.room is None and len(room) != 1:
            raise QueryError("room", "a bare event id in reply_to needs its one room")
        given = ref.room or room[0]
        room_id = await self._room(reader, given, await self._served(reader))
        keys = ("senders", "after", "before", "flt", "limit", "offset", "sort")
        asked = Narrowing(texts=texts, **{k: v for k, v in shape.items() if k in keys and v})
        showing = await showing_for(self.cfg, reader)
        cache = RoomCache(reader, await wiring.room_scope_now(self.cfg, reader))
        found = await replies(reader, cache, room_id, given, ref.event_id, showing, asked)
        return (await with_context(reader, cache, found, read.context, showing)).as_json()

    async def pins(self, room: str) -> dict[str, Any]:
        try:
            async with self._reader() as reader:
                room_id = await self._room(reader, room, await self._served(reader))
                return (await board(self.cfg, room_id)).as_json()
        except MatrixUnavailable:
            raise self.unreachable("the board is read from the room as it is now") from None

    async def rooms(self) -> dict[str, Any]:
        """The searchable rooms; with the homeserver down, the index's, marked so."""
        now = int(time.time() * 1000)
        facts: StoreFacts | None = None
        try:
            async with self._reader() as reader:  # the one-call lock: the store is one holder
                facts = await self._facts()
                return {"rooms": await self._joined(reader, facts, now), "warnings": []}
        except MatrixUnavailable:
            if facts is None:
                raise
            return self._indexed(facts, now)

    async def _joined(
        self, reader: MatrixReader, facts: StoreFacts, now: int
    ) -> list[dict[str, Any]]:
        """Joined rooms scope admits (and `mcp.rooms` lists), as the homeserver says now."""
        out: list[dict[str, Any]] = []
        served = await self._served(reader)
        cache = RoomCache(reader, await wiring.room_scope_now(self.cfg, reader))
        for room_id in sorted(await reader.joined_rooms()):
            if served is not None and room_id not in served:
                continue
            info = await cache.get(room_id)
            cursor, refused, _failing, points = facts.room(room_id)
            if not info.verdict.eligible or info.state is None or refused is not None:
                continue
            state = info.state
            out.append(_record(room_id, state.canonical_alias, state.name, cursor, points, now))
        return out

    def _indexed(self, facts: StoreFacts, now: int) -> dict[str, Any]:
        """The homeserver is down: the rooms the index holds and has not refused (and
        `mcp.rooms` lists by id: an alias cannot be resolved now, so its room is left out),
        each with the fields only the homeserver knows marked unknown."""
        listed_ids = self.cfg.mcp.rooms and {r for r in self.cfg.mcp.rooms if r.startswith("!")}
        out = []
        for room_id in sorted(set(facts.cursors) - set(facts.refused)):
            if listed_ids is not None and room_id not in listed_ids:
                continue
            cursor, _refused, _failing, points = facts.room(room_id)
            record = _record(RoomID(room_id), None, None, cursor, points, now)
            out.append({**record, "unknown": list(HOMESERVER_FIELDS)})
        warning = str(
            self.unreachable(
                "these are the rooms the index holds, not checked against it now (whether the "
                "reader is still in each and scope admits it); their "
                f"{' and '.join(HOMESERVER_FIELDS)} are unknown"
            )
        )
        return {"rooms": out, "warnings": [warning]}

    async def context(
        self, event: str, room: str | None, before: int, after: int
    ) -> dict[str, Any]:
        ref = event_ref(event)
        given = room or ref.room
        if given is None:
            raise QueryError("room", "a bare event id needs its room (or give the permalink)")
        try:
            async with self._reader() as reader:
                room_id, state, read = await self._around(reader, ref, given, before, after)
                showing = await showing_for(self.cfg, reader)
        except MatrixUnavailable:
            raise self.unreachable("the messages are read from it as they are now") from None
        messages = around(
            room_id,
            ref.event_id,
            read,
            before=before,
            after=after,
            reader_id=showing.reader_id,
            prefix=showing.prefix,
            stones=showing.stones,
            server_name=showing.server_name,
        )
        return {
            "room_id": room_id,
            "room_alias": state.canonical_alias,
            "event_id": ref.event_id,
            "messages": messages,
        }

    async def _around(
        self, reader: MatrixReader, ref: EventRef, given: str, before: int, after: int
    ) -> tuple[RoomID, RoomState, Around]:
        """The room, its state and the homeserver's `/context` read (scope held)."""
        room_id = await self._room(reader, given, await self._served(reader))
        cache = RoomCache(reader, await wiring.room_scope_now(self.cfg, reader))
        state, read = await read_around(
            reader, cache, room_id, given, ref.event_id, max(before, after)
        )
        return room_id, state, read


# A room's fields only the homeserver knows: `unknown` lists them while it cannot be asked.
HOMESERVER_FIELDS = ("room_alias", "name")


def _record(
    room_id: RoomID,
    alias: str | None,
    name: str | None,
    cursor: dict[str, Any] | None,
    points: int,
    now: int,
) -> dict[str, Any]:
    """A `rooms` entry: the room, and how fresh its index is."""
    updated = int(cursor["updated_ms"]) if cursor else None
    return {
        "room_id": room_id,
        "room_alias": alias,
        "name": name,
        "indexed": cursor is not None,
        "points": points,
        "indexed_ts": updated,
        "lag_seconds": (now - updated) / 1000 if updated is not None else None,
        "unknown": [],
    }
