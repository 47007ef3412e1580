"""What `muninn mcp`'s tools answer, by the CLI's own paths and no wider (docs/ARCHITECTURE.md
§3 rule 29, §4.7).

`search` is `muninn search` (`bot.operations.search.find`: the store, or the running service's
listener while `muninn run` holds it; every hit revalidated); `pins` is `muninn pins`
(`bot.operations.pins.board`); `rooms` reads the scope verdicts and the store's facts as
`muninn status` does; `context` reads the homeserver's `/context` and shows it through
`bot.mcp.context.around`. `mcp.rooms` narrows every tool to the rooms it lists. One call runs at
a time: the embedded store allows one holder, and this process is one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from bot.chat.commands.arguments import ArgumentError
from bot.chat.commands.dates import instant
from bot.config import ServiceConfig
from bot.mcp.context import around, event_ref
from bot.operations.common import cli_reader, resolve_room
from bot.operations.pins import _recorded_purges, board
from bot.operations.search import fail_fast, find
from bot.operations.status import store_facts
from bot.service.http_api.wire import MAX_IDS
from ingest.embed import Embedder
from ingest.errors import QueryError
from ingest.matrix import MatrixReader
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import RoomScope, puppet_in_events
from ingest.search.filters import MessageFilter
from ingest.types import RoomID

__all__ = ["Lookups", "listed"]

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


def listed(value: str | Sequence[str] | None, argument: str) -> list[str]:
    """One text or several, as a list (a tool takes either); at most the listener's bound."""
    out = [value] if isinstance(value, str) else list(value or ())
    if len(out) > MAX_IDS:
        raise QueryError(argument, f"at most {MAX_IDS} entries, got {len(out)}")
    return out


class Lookups:
    def __init__(self, cfg: ServiceConfig, embedder: Embedder) -> None:
        self.cfg = cfg
        self.embedder = embedder
        self.scope = RoomScope.from_config(cfg.scope, cfg.homeserver.server_name)
        self._one = asyncio.Lock()

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
    ) -> dict[str, Any]:
        """`search`: `muninn search --json`'s document; `when` is (after, before)."""
        after, before = moment("after", when[0]), moment("before", when[1])
        async with self._reader() as reader:
            served = await self._served(reader)
            rooms = [await self._room(reader, r, served) for r in room]
            if not rooms and served is not None:
                if not served:
                    raise QueryError("room", "none of the rooms in mcp.rooms resolves")
                rooms = served
            try:
                result = await find(
                    self.cfg,
                    texts=texts,
                    rooms=rooms or None,
                    senders=sender or None,
                    after=after,
                    before=before,
                    limit=limit,
                    flt=flt,
                    sort=sort,
                    offset=cursor or 0,
                    embedder=self.embedder,
                )
            except QueryError as e:
                raise named(e) from None
        return result.as_json()

    async def pins(self, room: str) -> dict[str, Any]:
        async with self._reader() as reader:
            room_id = await self._room(reader, room, await self._served(reader))
            return (await board(self.cfg, room_id)).as_json()

    async def rooms(self) -> dict[str, Any]:
        out: list[dict[str, Any]] = []
        async with self._reader() as reader:
            facts = await store_facts(self.cfg)
            now = int(time.time() * 1000)
            served = await self._served(reader)
            cache = RoomCache(reader, self.scope)
            for room_id in sorted(await reader.joined_rooms()):
                if served is not None and room_id not in served:
                    continue
                info = await cache.get(room_id)
                cursor, refused, _failing, points = facts.room(room_id)
                if not info.verdict.eligible or info.state is None or refused is not None:
                    continue
                updated = int(cursor["updated_ms"]) if cursor else None
                out.append(
                    {
                        "room_id": room_id,
                        "room_alias": info.state.canonical_alias,
                        "name": info.state.name,
                        "indexed": cursor is not None,
                        "points": points,
                        "indexed_ts": updated,
                        "lag_seconds": (now - updated) / 1000 if updated is not None else None,
                    }
                )
        return {"rooms": out}

    async def context(
        self, event: str, room: str | None, before: int, after: int
    ) -> dict[str, Any]:
        ref = event_ref(event)
        given = room or ref.room
        if given is None:
            raise QueryError("room", "a bare event id needs its room (or give the permalink)")
        async with self._reader() as reader:
            room_id = await self._room(reader, given, await self._served(reader))
            info = await RoomCache(reader, self.scope).get(room_id)
            if not info.verdict.eligible or info.state is None:
                raise QueryError("room", f"{given} is refused ({info.verdict.reason})")
            # The homeserver splits the limit either side; other events than messages count.
            read = await reader.context(room_id, ref.event_id, 4 * max(before, after, 1))
            if read is None:
                raise QueryError("event", f"no event {ref.event_id} in {given}")
            if (puppet := puppet_in_events([*read[0], read[1], *read[2]], self.scope)) is not None:
                raise QueryError("room", f"{given} is refused (bridged: {puppet} is a puppet)")
            reader_id = str(await reader.whoami())
            stones = await _recorded_purges(self.cfg)
        messages = around(
            room_id,
            ref.event_id,
            read,
            before=before,
            after=after,
            reader_id=reader_id,
            prefix=self.cfg.bot.prefix,
            stones=stones,
            server_name=self.cfg.homeserver.server_name,
        )
        return {
            "room_id": room_id,
            "room_alias": info.state.canonical_alias,
            "event_id": ref.event_id,
            "messages": messages,
        }
