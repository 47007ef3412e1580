"""What a command reads of the rooms before it answers: a room's log (refused when a bridge
puppet is in it, rule 4) and the rooms an `in:` names.

A part of the command handler (`bot.chat.handlers`) that the commands share (`bot.chat.pins`,
`bot.chat.searching`); it holds no policy of its own.
"""

from __future__ import annotations

import logging

from bot.chat.ports import Aliases, RoomLogSource
from bot.errors import CommandError
from ingest.errors import MatrixError
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import puppet_in_events
from ingest.search.logs.recent import RecentEvents
from ingest.search.logs.request import RoomView
from ingest.search.logs.roomlog import RoomLog
from ingest.types import Refusal, RoomID

__all__ = ["RoomReads", "RoomRefused"]

log = logging.getLogger("muninn.chat")


class RoomRefused(CommandError):
    """A command's read of a room found it refused by scope (a bridge puppet in its log)."""

    def __init__(self, room_id: RoomID, puppet: str) -> None:
        super().__init__(f"{room_id} is not a room Muninn indexes")
        self.room_id = room_id
        self.puppet = puppet


class RoomReads:
    def __init__(
        self,
        source: RoomLogSource,
        aliases: Aliases,
        rooms: RoomCache,
        logs: RecentEvents,
        transcript_limit: int,
    ) -> None:
        self._source = source
        self._aliases = aliases
        self._rooms = rooms
        self._logs = logs
        self._limit = transcript_limit

    async def read_log(self, room_id: RoomID, bound: int | None = None) -> RoomLog:
        """The room's latest raw events; a bridge puppet among them refuses the room (rule 4).
        A query: the command handler records the refusal in the room verdicts."""
        bound = bound or self._limit
        raw, cut = await self._logs.latest(self._source, room_id, bound)
        puppet = puppet_in_events(raw, self._rooms.scope)
        if puppet is not None:
            log.warning("refusing room %s: bridged, sender %s is a puppet", room_id, puppet)
            raise RoomRefused(room_id, puppet)
        return RoomLog(room_id, raw, bound, cut)

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
