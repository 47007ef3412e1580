"""Read Matrix: the ingest adapter over the client-server API (read-only, plus join/leave).

`MatrixReader` is the request layer (`ingest.matrix.http`) plus the timeline reads
(`ingest.matrix.timeline`) plus, here, who the reader is, which rooms it is in, their state and
the roster's join/leave. Every public method is a few lines that turn JSON into the records of
`ingest.types`.

Two modes behind one interface:
- client mode: a plain user's access token (`reader.access_token`);
- appservice mode: the registration's `as_token`, acting as the bot user
  `@<sender_localpart>:<server>` (every request carries `?user_id=` so the identity is explicit).
  That user cannot `/sync` (Synapse answers 500), which is why reading is `/messages` only.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence

from mautrix.types import EventType

from ingest.config import Config, registration_path
from ingest.errors import ConfigError, MatrixError, MatrixNotFound
from ingest.event import ClientEvent, events_in
from ingest.matrix.http import Path, ReaderMode, Retry, endpoint, refused_token_fix
from ingest.matrix.membership import direct_in, membership, prev_membership, walk_back
from ingest.matrix.registration import load_registration
from ingest.matrix.state import room_state_from
from ingest.matrix.timeline import TimelineReader
from ingest.matrix.transport import Transport
from ingest.rules.scope import expand_alias
from ingest.types import RoomAlias, RoomID, RoomState, UserID

__all__ = ["MatrixReader"]

log = logging.getLogger("muninn.matrix")

_DIRECT_WALKS = 65_536  # remembered membership walks (event ids), cleared when full
_DIRECT_WALKS_PER_READ = 32  # members whose history one room-state read follows back
_MEMBER = EventType.ROOM_MEMBER.t


class MatrixReader(TimelineReader):
    """The reader's view of the homeserver (arguments: `ingest.matrix.http.MatrixHTTP`)."""

    @functools.cached_property
    def _direct_walks(self) -> dict[str, bool]:
        """member event id → is_direct in its history (one dict per reader, made on first use)."""
        return {}

    @classmethod
    def from_config(
        cls, cfg: Config, *, retry: Retry | None = None, transport: Transport | None = None
    ) -> MatrixReader:
        """Client mode from `reader`, or appservice mode from the registration file; `transport`
        sends the requests (`MatrixHTTP`'s default when None)."""
        url = cfg.homeserver.url
        if cfg.reader is not None:
            reader = cfg.reader
            return cls(
                url,
                reader.access_token,
                reader.user_id,
                ReaderMode.CLIENT,
                retry=retry,
                transport=transport,
            )
        if cfg.appservice is None:  # Config's own validator already forbids this
            raise ConfigError(["give reader (client mode) or appservice (appservice mode)"])
        path = registration_path(cfg)
        registration = load_registration(path)
        user_id = f"@{registration.sender_localpart}:{cfg.homeserver.server_name}"
        return cls(
            url,
            registration.as_token,
            user_id,
            ReaderMode.APPSERVICE,
            token_name=f"as_token in {path}",
            token_fix=refused_token_fix(ReaderMode.APPSERVICE, user_id, str(path)),
            retry=retry,
            transport=transport,
        )

    async def __aenter__(self) -> MatrixReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ who and where

    async def whoami(self) -> UserID:
        resp = await self._get_object(endpoint(Path.v3.account.whoami))
        return UserID(str(resp["user_id"]))

    async def joined_rooms(self) -> list[RoomID]:
        resp = await self._get_object(endpoint(Path.v3.joined_rooms))
        return [RoomID(str(r)) for r in resp.get("joined_rooms", [])]

    async def direct_rooms(self) -> set[RoomID]:
        """The rooms in the reader's own `m.direct` account data; empty if it has none."""
        path = endpoint(Path.v3.user[self.user_id].account_data[EventType.DIRECT.t])
        try:
            content = await self._get_object(path)
        except MatrixNotFound:
            return set()
        return {
            RoomID(str(r))
            for rooms in content.values()
            if isinstance(rooms, list)
            for r in rooms
            if isinstance(r, str)
        }

    async def room_state(self, room_id: RoomID | str) -> RoomState:
        """The room's current state (or, for a room the reader left, the state at its leave)."""
        raw = await self._request("GET", endpoint(Path.v3.rooms[room_id].state))
        if not isinstance(raw, list):
            raise MatrixError(f"state of {room_id}: expected a JSON list")
        events = events_in(raw)
        state = room_state_from(RoomID(room_id), events, self.user_id)
        if not state.direct_flag and await self._direct_in_history(room_id, events):
            state = dataclasses.replace(state, direct_flag=True)
        return state

    async def _direct_in_history(
        self, room_id: RoomID | str, events: Sequence[ClientEvent]
    ) -> bool:
        """is_direct further back than the state's one hop: a member whose event replaced a
        join (a profile change) may have been invited with it before (rule 3).

        Member events never change, so a walk is remembered by the state event's id and costs
        nothing on the next read of the room. One read walks at
        most `_DIRECT_WALKS_PER_READ` members, the reader's own first (its invite is where a
        DM with the reader carries is_direct); a large room's rest is walked on later reads.
        """

        async def get(event_id: str) -> ClientEvent | None:
            return await self.get_event(room_id, event_id)

        candidates = [
            e
            for e in events
            if e.get("type") == _MEMBER
            and isinstance(e.get("event_id"), str)
            # a previous join may hide the invite; any other previous membership is in view
            and prev_membership(e) == "join"
            # who is in the room makes it a DM; a leaver's history is not read
            and membership(e) in ("join", "invite")
        ]
        candidates.sort(key=lambda e: e.get("state_key") != self.user_id)
        walks = 0
        for e in candidates:
            known = self._direct_walks.get(e["event_id"])
            if known is None:
                if walks >= _DIRECT_WALKS_PER_READ:
                    log.debug("room %s: membership histories left for the next read", room_id)
                    return False
                walks += 1
                chain = await walk_back(e, get, counted=frozenset({"join"}))
                known = direct_in(chain)
                # Remembered even when the walk stopped short: what the homeserver would not
                # show the reader (a 404) it will not show on the next read either.
                if len(self._direct_walks) >= _DIRECT_WALKS:
                    self._direct_walks.clear()
                self._direct_walks[e["event_id"]] = known
            if known:
                return True
        return False

    def full_alias(self, alias: RoomAlias | str) -> RoomAlias:
        """The one alias rule: `#dev` means `#dev:<server_name>` (the reader's own homeserver),
        for every room argument (CLI, roster, listener, command room); `#dev:other.org` stays."""
        return expand_alias(alias, self.user_id.partition(":")[2])

    async def resolve_alias(self, alias: RoomAlias | str) -> RoomID | None:
        """The room an alias names (a short `#dev` on this homeserver), None when none does."""
        alias = self.full_alias(alias)
        try:
            resp = await self._get_object(endpoint(Path.v3.directory.room[alias]))
        except MatrixNotFound:
            return None
        return RoomID(str(resp["room_id"]))

    # ------------------------------------------------------------ membership (roster only)

    async def join(self, room_id_or_alias: RoomID | RoomAlias | str) -> RoomID:
        if room_id_or_alias.startswith("#"):
            room_id_or_alias = self.full_alias(room_id_or_alias)
        resp = await self._request("POST", endpoint(Path.v3.join[room_id_or_alias]), body={})
        return RoomID(str(resp["room_id"]))

    async def ping_appservice(self, appservice_id: str, transaction_id: str) -> None:
        """Ask the homeserver to ping this appservice (`POST /_matrix/client/v1/appservice/{id}/
        ping`, spec v1.7): a push path that works is confirmed, and Synapse then resends the
        transactions it was holding back after earlier failures instead of waiting out its
        backoff (up to minutes after a restart)."""
        path = endpoint(Path.v1.appservice[appservice_id].ping)
        await self._request("POST", path, body={"transaction_id": transaction_id})

    async def leave(self, room_id: RoomID | str) -> None:
        await self._request("POST", endpoint(Path.v3.rooms[room_id].leave), body={})
