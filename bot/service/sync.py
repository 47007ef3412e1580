"""Client mode's live stream: a filtered `/sync` loop feeding the same sink as appservice pushes.

The since-token lives in memory only. After a restart the first `/sync` (no token) returns each
room's latest timeline events; they go to the sink like any others, and the command handler's
own checks (command age, "did the bot already answer this in the room?") decide what to answer.
Errors back off exponentially up to a minute; `CancelledError` always propagates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from mautrix.types import EventType

from bot.chat.sender import BotClient
from bot.service.appservice import EventSink
from ingest.errors import MatrixAuthError, MatrixError
from ingest.matrix import BRIDGE_TYPES, ClientEvent, events_in

__all__ = ["SYNC_FILTER", "SyncLoop", "events_from_sync"]

log = logging.getLogger("muninn.service")

# Only what the bot acts on: messages (commands, wake-ups), redactions (wake-ups) and the state
# that changes a room's scope or visibility (it drops the cached verdict).
EVENT_TYPES = [
    EventType.ROOM_MESSAGE.t,
    EventType.ROOM_REDACTION.t,
    EventType.ROOM_MEMBER.t,
    EventType.ROOM_HISTORY_VISIBILITY.t,
    EventType.ROOM_CANONICAL_ALIAS.t,
    EventType.ROOM_ENCRYPTION.t,
    *BRIDGE_TYPES,
]
SYNC_FILTER: Mapping[str, Any] = {
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {
        "timeline": {"limit": 50, "types": EVENT_TYPES},
        "state": {"types": [EventType.ROOM_MEMBER.t], "lazy_load_members": True},
        "ephemeral": {"not_types": ["*"]},
        "account_data": {"not_types": ["*"]},
    },
}


def events_from_sync(resp: Mapping[str, Any]) -> list[ClientEvent]:
    """Timeline events of joined rooms, and our own invites, each with its `room_id` set."""
    rooms = resp.get("rooms")
    rooms = rooms if isinstance(rooms, Mapping) else {}
    out: list[ClientEvent] = []
    for section, key in (("join", "timeline"), ("invite", "invite_state")):
        entries = rooms.get(section)
        if not isinstance(entries, Mapping):
            continue
        for room_id, room in entries.items():
            holder = room.get(key) if isinstance(room, Mapping) else None
            events = holder.get("events") if isinstance(holder, Mapping) else None
            out += ({**event, "room_id": room_id} for event in events_in(events))
    return out


class SyncLoop:
    """`run()` syncs until cancelled, handing every batch to `sink`."""

    def __init__(
        self,
        client: BotClient,
        sink: EventSink,
        *,
        timeout_ms: int = 30_000,
        max_backoff: float = 60.0,
    ) -> None:
        self.client = client
        self.sink = sink
        self.timeout_ms = timeout_ms
        self.max_backoff = max_backoff
        self.since: str | None = None

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                resp = await self.client.sync(self.since, SYNC_FILTER, self.timeout_ms)
            except MatrixAuthError:
                raise  # a bad token does not get better by retrying
            except MatrixError as e:
                failures += 1
                delay = min(self.max_backoff, 0.5 * 2 ** min(failures, 10))
                log.warning("/sync failed (%s); retrying in %.1fs", e, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            events = events_from_sync(resp)
            await self._deliver(events)
            token = resp.get("next_batch")
            if isinstance(token, str):
                self.since = token

    async def _deliver(self, events: Sequence[ClientEvent]) -> None:
        # A full queue holds the token back: the same batch is offered again, nothing is lost.
        while events and not self.sink(events):
            log.warning("work queue full; holding the sync token")
            await asyncio.sleep(1.0)
