"""A short-lived cache of room state and scope verdicts, for the read side.

The scope rules (`ingest.rules.scope`) decide; this only avoids asking the homeserver for a room's
state on every event (the bot) or every hit (revalidation, `ingest.search.revalidate`). The bot
drops a room's entry on any state event in it; entries expire after `ttl` in any case.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ingest.errors import MatrixError, MatrixForbidden, MatrixNotFound, StoreError
from ingest.rules.scope import RoomScope
from ingest.types import Refusal, RoomID, RoomState, Verdict

__all__ = ["AliasSource", "RoomCache", "RoomInfo", "StateSource", "with_command_room"]

log = logging.getLogger("muninn.matrix")


class StateSource(Protocol):
    """Where a room's state comes from: the homeserver (`MatrixReader`) or a room export."""

    async def room_state(self, room_id: RoomID | str) -> RoomState: ...
    async def direct_rooms(self) -> set[RoomID]: ...


_FETCHES = 3  # reads of a room's state while invalidations keep overlapping them


@dataclass(frozen=True)
class RoomInfo:
    state: RoomState | None  # None: the bot may not read the room (not joined)
    verdict: Verdict  # may it be indexed and answered in (`RoomScope.decide`)
    # may the reader read it at all, its exclusion aside (`RoomScope.readable`: where the
    # command room's policy starts, `bot.chat.command_room`); None: as `verdict`
    readable_verdict: Verdict | None = None

    @property
    def readable(self) -> Verdict:
        return self.readable_verdict or self.verdict

    @property
    def names(self) -> dict[str, str]:
        return dict(self.state.display_names) if self.state else {}

    @property
    def speakers(self) -> dict[str, str]:
        """Every joined member → its display name ('' for none): whom a reply's sender name
        must not be mistaken for (`bot.chat.replies.names.sender_label`)."""
        if self.state is None:
            return {}
        return {**dict.fromkeys(self.state.members, ""), **dict(self.state.display_names)}

    @property
    def label(self) -> str:
        if self.state is None:
            return self.verdict.room_id
        return self.state.canonical_alias or self.state.name or self.state.room_id


class RoomCache:
    def __init__(
        self,
        client: StateSource,
        scope: RoomScope,
        *,
        ttl: float = 60.0,
        remembered_puppet: Callable[[RoomID], Awaitable[str | None]] | None = None,
    ) -> None:
        """`remembered_puppet`: the writer's lasting record of a room refused for a puppet's
        message (`Writer.refused_by_puppet`), asked on every state fetch."""
        self.client = client
        self.scope = scope
        self.ttl = ttl
        self.remembered_puppet = remembered_puppet
        self._rooms: dict[str, tuple[float, RoomInfo]] = {}
        self._direct: tuple[float, set[RoomID]] | None = None
        # Rooms where a command's read of the log met a bridge puppet (rule 4 by sender): the
        # state does not show a puppet that spoke and left, so remember it, as the writer does.
        self._bridged: dict[str, str] = {}
        # A room's count of invalidations: a fetch that overlapped one may hold the state from
        # before the change (say, before an `m.bridge`), so it is not cached. Per room, so that
        # state churn elsewhere costs this room no re-read; `_direct_epoch` is the same for the
        # reader's DM list, which any room's membership change may touch.
        self._epochs: dict[str, int] = {}
        self._direct_epoch = 0

    def mark_bridged(self, room_id: str, puppet: str) -> None:
        self._bridged[room_id] = puppet

    def invalidate(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)
        self._direct = None
        self._epochs[room_id] = self._epochs.get(room_id, 0) + 1
        self._direct_epoch += 1

    async def fresh(self, room_id: str) -> RoomInfo:
        """The room read from the homeserver now, not from the cache: a check just before a
        reply is sent (the reader's DM list may come from the cache)."""
        self._rooms.pop(room_id, None)
        self._epochs[room_id] = self._epochs.get(room_id, 0) + 1
        return await self.get(room_id)

    async def _direct_rooms(self) -> set[RoomID]:
        now = time.monotonic()
        if self._direct is not None and now - self._direct[0] <= self.ttl:
            return self._direct[1]
        epoch = self._direct_epoch
        direct = await self.client.direct_rooms()
        if epoch == self._direct_epoch:
            self._direct = (now, direct)
        return direct

    async def get(self, room_id: str) -> RoomInfo:
        if room_id in self._bridged:
            detail = f"bridged: sender {self._bridged[room_id]} is in a bridge puppet namespace"
            return RoomInfo(None, Verdict(RoomID(room_id), Refusal.BRIDGED, detail))
        now = time.monotonic()
        cached = self._rooms.get(room_id)
        if cached is not None and now - cached[0] <= self.ttl:
            return cached[1]
        for _ in range(_FETCHES):
            epoch = self._epochs.get(room_id, 0)
            info = await self._fetch(room_id)
            if room_id in self._bridged:
                return await self.get(room_id)
            if epoch == self._epochs.get(room_id, 0):  # unchanged meanwhile: the current state
                self._rooms[room_id] = (now, info)
                return info
        return info  # state keeps changing: answer from the latest read, cache nothing

    async def _fetch(self, room_id: str) -> RoomInfo:
        try:
            state = await self.client.room_state(room_id)
        except (MatrixForbidden, MatrixNotFound):
            return RoomInfo(None, Verdict(RoomID(room_id), Refusal.NOT_JOINED, "not joined"))
        direct = await self._direct_rooms()
        info = RoomInfo(
            state, self.scope.decide(state, direct), self.scope.readable(state, direct)
        )
        if info.verdict.eligible and self.remembered_puppet is not None:
            try:
                puppet = await self.remembered_puppet(RoomID(room_id))
            except StoreError as e:
                # Degrade, don't fail : the state names past puppets, and every
                # command's read of the log checks its senders; only the record is missing.
                log.warning("room %s: the writer's refusal records are unreadable: %s", room_id, e)
                puppet = None
            if puppet is not None:
                self.mark_bridged(room_id, puppet)
        return info


class AliasSource(Protocol):
    """Where which room an alias names is asked: the homeserver (an export cannot tell)."""

    async def resolve_alias(self, alias: str) -> RoomID | None: ...


async def with_command_room(scope: RoomScope, source: AliasSource, room: str | None) -> RoomScope:
    """`scope` with the command room (`room`, as `bot.command_room` names it) also known by the
    id its alias names now, so an alias the room's state does not list (a local address) still
    leaves it out of the index (`RoomScope.with_command_room_id`). An id, no room to leave out,
    a source that cannot tell (an export) or fails: `scope`, which knows the room by its id
    and the aliases its state lists."""
    if room is None or not room.startswith("#"):
        return scope
    try:
        room_id = await source.resolve_alias(room)
    except MatrixError as e:
        log.warning(
            "cannot resolve the command room %s (known by its listed aliases): %s", room, e
        )
        return scope
    return scope.with_command_room_id(room_id)
