"""`ingest.matrix.rooms.RoomCache`: a room's verdict is never cached from a read that a state
change
overlapped. The race (an `m.bridge` arriving while the state is being read) cannot be made to
happen on demand against Synapse, so the reader here is a stand-in for its two calls."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest

from ingest.config import ScopeConfig
from ingest.errors import StoreError
from ingest.matrix import MatrixReader, room_state_from
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import RoomScope
from ingest.types import Refusal, RoomID, RoomState, UserID

READER = UserID("@muninn:x")
ROOM = RoomID("!r:x")
JOINED = {"type": "m.room.member", "state_key": READER, "content": {"membership": "join"}}
BRIDGE = {
    "type": "m.bridge",
    "state_key": "irc/#r",
    "content": {"bridgebot": "@irc:x", "protocol": {"id": "irc"}, "channel": {"id": "#r"}},
}


class SlowState:
    """Answers `room_state` with the state as it was when the call began, after `release`."""

    user_id = READER

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = [JOINED]
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.reads = 0

    async def room_state(self, room_id: str) -> RoomState:
        self.reads += 1
        snapshot = list(self.events)
        self.started.set()
        await self.release.wait()
        return room_state_from(RoomID(room_id), snapshot, READER)

    async def direct_rooms(self) -> set[RoomID]:
        return set()


def cache(reader: SlowState) -> RoomCache:
    scope = RoomScope.from_config(ScopeConfig(), "x")
    return RoomCache(cast(MatrixReader, reader), scope)


async def test_a_bridge_arriving_during_a_read_is_not_hidden_by_the_cache() -> None:
    reader = SlowState()
    rooms = cache(reader)
    pending = asyncio.create_task(rooms.get(ROOM))
    await reader.started.wait()
    reader.events.append(BRIDGE)  # the bridge lands while the old state is on its way
    rooms.invalidate(ROOM)  # ... and the bot sees its state event
    reader.release.set()
    info = await pending
    assert info.verdict.reason is Refusal.BRIDGED  # read again, not the pre-bridge state
    again = await rooms.get(ROOM)
    assert again.verdict.reason is Refusal.BRIDGED
    assert reader.reads == 2


async def test_an_undisturbed_read_is_cached() -> None:
    reader = SlowState()
    reader.release.set()
    rooms = cache(reader)
    assert (await rooms.get(ROOM)).verdict.eligible
    assert (await rooms.get(ROOM)).verdict.eligible
    assert reader.reads == 1


async def test_a_read_overlapped_by_another_rooms_change_is_cached() -> None:
    """State churn in another room does not make this room's verdict uncacheable."""
    reader = SlowState()
    rooms = cache(reader)
    pending = asyncio.create_task(rooms.get(ROOM))
    await reader.started.wait()
    rooms.invalidate(RoomID("!other:x"))
    reader.release.set()
    assert (await pending).verdict.eligible
    assert (await rooms.get(ROOM)).verdict.eligible
    assert reader.reads == 1


async def test_unreadable_refusal_records_degrade_to_the_state_verdict(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store down (the writer's refusal records unreadable) does not stop the bot: the
    state's verdict stands, with a warning naming the cause (degrade, don't fail)."""

    async def store_down(room_id: RoomID) -> str | None:
        raise StoreError("qdrant at http://127.0.0.1:6333: connection refused")

    reader = SlowState()
    reader.release.set()
    scope = RoomScope.from_config(ScopeConfig(), "x")
    rooms = RoomCache(cast(MatrixReader, reader), scope, remembered_puppet=store_down)
    with caplog.at_level(logging.WARNING, logger="muninn.matrix"):
        assert (await rooms.get(ROOM)).verdict.eligible
    assert "connection refused" in caplog.text
