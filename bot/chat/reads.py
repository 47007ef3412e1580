"""The one reader of a room's log: chat's commands, `muninn pins` and MCP's `pins` alike.

`LogReader` reads a room's latest raw events (through `RecentEvents`, kept between commands, or
a fresh one a CLI call), bounded by `bot.transcript_limit` and `SCAN_TEXT`, refuses a room a
bridge puppet is in (rule 4: `RoomRefused`), drops what its owner keeps from the room's state
when the read passed a change of it (`on_state`: the room's audience, rule 14), and applies the
recorded purges (`readable`, rule 12). Edits and redactions are the folds' (`RoomLog`, in
`ingest.search.logs`). Only values cross into `ingest`: the source it reads through is the
Matrix layer's (`MatrixReader.latest`), and a `!search` takes the writer's marks, the log and
the audience here, in that order (`read_room`), before it hands them to the read path.

Also what a command reads of the rooms an `in:` names (`resolve_rooms`, `view`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from bot.chat.ports import Aliases, RoomLogSource
from bot.errors import CommandError
from ingest.errors import MatrixError
from ingest.index.records import Tombstone
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import puppet_in_events
from ingest.search.logs.recent import RecentEvents
from ingest.search.logs.request import RoomView
from ingest.search.logs.roomlog import RoomLog
from ingest.types import Refusal, RoomID

__all__ = ["LogReader", "Marker", "RoomRead", "RoomRefused", "read_room"]

log = logging.getLogger("muninn.chat")

Purges = Callable[[], Awaitable[Sequence[Tombstone]]]


class RoomRefused(CommandError):
    """A command's read of a room found it refused by scope (a bridge puppet in its log)."""

    def __init__(self, room_id: RoomID, puppet: str) -> None:
        super().__init__(f"{room_id} is not a room Muninn indexes")
        self.room_id = room_id
        self.puppet = puppet


class LogReader:
    """A room's log, read once a command: events, their bound, scope, the audience's drop and
    the purges. `purges`: every recorded purge (the searcher's in `muninn run`, the purge file
    and the store's in the CLI); `on_state(room_id)`: the read passed a change of the room's
    state."""

    def __init__(
        self,
        source: RoomLogSource,
        aliases: Aliases,
        rooms: RoomCache,
        transcript_limit: int,
        *,
        purges: Purges,
        logs: RecentEvents | None = None,
        on_state: Callable[[str], None] = lambda room_id: None,
    ) -> None:
        self._source = source
        self._aliases = aliases
        self._rooms = rooms
        self._logs = logs or RecentEvents()
        self._limit = transcript_limit
        self._purges = purges
        self._on_state = on_state

    async def read_log(self, room_id: RoomID, bound: int | None = None) -> RoomLog:
        """The room's latest raw events; a bridge puppet among them refuses the room (rule 4).
        A query: the command handler records the refusal in the room verdicts."""
        bound = bound or self._limit
        raw, cut, passed = await self._logs.read(self._source, room_id, bound)
        if passed:
            self._on_state(room_id)
        puppet = puppet_in_events(raw, self._rooms.scope)
        if puppet is not None:
            log.warning("refusing room %s: bridged, sender %s is a puppet", room_id, puppet)
            raise RoomRefused(room_id, puppet)
        return RoomLog(room_id, raw, bound, cut)

    async def readable(self, room_log: RoomLog) -> tuple[RoomLog, list[Tombstone]]:
        """The log with what a purge covers emptied, and the purges (for events fetched
        beyond it). Raises CommandError when the purges cannot be read: nothing is quoted."""
        stones = list(await self._purges())
        return room_log.without_purged(stones), stones

    async def resolve_rooms(self, rooms: tuple[str, ...]) -> list[RoomID]:
        """`in:` rooms to ids; each must be a room Muninn indexes (the command room is not,
        unless `bot.index_command_room`: its log is not searched either)."""
        out: list[RoomID] = []
        for room in rooms:  # the parser bounds their number
            room_id = RoomID(room) if room.startswith("!") else None
            if room_id is None:
                try:
                    room_id = await self._aliases.resolve_alias(room)
                except MatrixError:
                    room_id = None
            info = await self._rooms.get(room_id) if room_id else None
            if info is not None and info.verdict.reason is Refusal.COMMAND_ROOM:
                # Its log is where people ask: never searched unless the operator indexes it.
                raise CommandError(
                    f"{room} is the command room: questions are asked there, not searched."
                )
            if room_id is None or info is None or not info.verdict.eligible:
                raise CommandError(f"{room} is not a room Muninn indexes")
            if room_id not in out:  # an alias and the id of one room: one read, not two
                out.append(room_id)
        return out

    async def view(self, room_id: RoomID) -> RoomView:
        """Another room's transcript, for `in:` in the command room (no visibility cut)."""
        info = await self._rooms.get(room_id)
        alias = info.state.canonical_alias if info.state else None
        return RoomView(await self.read_log(room_id), alias)


V = TypeVar("V")


@dataclass(frozen=True)
class RoomRead(Generic[V]):
    """A room's log read for a `!search`, and the writer's marks taken before it.

    The two ordering rules of a search are this record's order: `read_room` takes the marks
    *before* it reads the log (a log read after them reaches back to them, and so stands in for
    the revalidation's tail read: rule 15), and the room's audience can be asked only from a
    read, so *after* it (the read drops a kept audience on a state event the dispatcher may not
    have seen: rule 14).
    """

    marks: Mapping[str, str]
    log: RoomLog
    _audience: Callable[[RoomID], Awaitable[V]]

    async def audience(self) -> V:
        """Who reads the reply in the room (`bot.chat.visibility`), asked now, after the read."""
        return await self._audience(self.log.room_id)


class Marker(Protocol):
    """What takes the writer's marks (`Searcher.marks`)."""

    async def marks(self) -> dict[str, str]: ...


async def read_room(
    searcher: Marker,
    room_id: RoomID,
    read_log: Callable[[RoomID], Awaitable[RoomLog]],
    audience: Callable[[RoomID], Awaitable[V]],
) -> RoomRead[V]:
    """The writer's marks, then the room's log (`RoomRead`: the audience comes after)."""
    marks = await searcher.marks()
    return RoomRead(marks, await read_log(room_id), audience)
