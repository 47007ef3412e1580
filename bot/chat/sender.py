"""The bot's client: the reader's request layer plus the few writes the bot makes.

The bot writes nothing but `m.notice` replies, and joins or leaves on invites
(docs/ARCHITECTURE.md §3 rule 16).
`BotClient` subclasses `MatrixReader`, so sends share its one request layer (quoting, auth, the
appservice `?user_id=`, retries on 429/5xx); nothing here builds URLs by hand twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mautrix.types import EventType, MessageType

from bot.chat.content import ReplyContent
from ingest.errors import MatrixError, MatrixForbidden, MatrixNotFound
from ingest.matrix import ClientEvent, MatrixReader, Path, endpoint, events_in
from ingest.types import EventID, RoomID

__all__ = ["BotClient", "txn_id_for"]

JSONDict = dict[str, Any]


def txn_id_for(room_id: str, command_event_id: str) -> str:
    """A send transaction id derived from the command: a retried send is deduplicated by the
    homeserver (same token, same path, same txn id) instead of posting the reply twice."""
    digest = hashlib.sha256(f"{room_id}\0{command_event_id}".encode()).hexdigest()[:32]
    return f"muninn.{digest}"


class BotClient(MatrixReader):
    """`MatrixReader` plus `send_notice`, raw state reads and `/sync` (client mode)."""

    async def send_message(
        self,
        room_id: RoomID | str,
        content: ReplyContent,
        txn_id: str,
        *,
        attempts: int | None = None,
    ) -> EventID:
        """PUT an `m.room.message` (the caller builds an `m.notice`); returns its event id.
        `attempts`: tries of this PUT (None: the request layer's); a reply whose audience is
        checked before each try sends once and is repeated by the caller (rule 14)."""
        if content.get("msgtype") != MessageType.NOTICE.value:
            raise ValueError("the bot only ever sends m.notice")
        path = endpoint(Path.v3.rooms[room_id].send[EventType.ROOM_MESSAGE.t][txn_id])
        resp = await self._request("PUT", path, body=dict(content), attempts=attempts)
        return EventID(str(resp["event_id"]))

    async def state_events(self, room_id: RoomID | str) -> list[ClientEvent]:
        """The room's current state as full events (with `origin_server_ts`, `unsigned`)."""
        events = await self._request("GET", endpoint(Path.v3.rooms[room_id].state))
        if not isinstance(events, list):
            raise MatrixError(f"state of {room_id}: expected a JSON list")
        return events_in(events)

    async def membership(self, room_id: RoomID | str, user_id: str) -> str | None:
        """`join`, `invite`, `leave`, … for `user_id`, or None when there is no member event."""
        path = endpoint(Path.v3.rooms[room_id].state[EventType.ROOM_MEMBER.t][user_id])
        try:
            content = await self._get_object(path)
        except (MatrixNotFound, MatrixForbidden):  # an invitee may not read the state yet
            return None
        value = content.get("membership")
        return value if isinstance(value, str) else None

    async def sync(
        self, since: str | None, filter_doc: Mapping[str, Any], timeout_ms: int
    ) -> JSONDict:
        """One `/sync` (client mode only: an appservice user cannot sync)."""
        query: dict[str, str | int] = {
            "filter": json.dumps(filter_doc, separators=(",", ":")),
            "timeout": timeout_ms,
        }
        if since is not None:
            query["since"] = since
        return await self._get_object(endpoint(Path.v3.sync), query)
