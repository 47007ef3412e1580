"""The two ordering rules of a `!search` (`bot.chat.reads.read_room`), as the code's order.

Rule 15: the writer's marks are taken *before* the room's log is read (a log read after them
reaches back to them and stands in for the revalidation's tail read). Rule 14: the room's
audience is asked *after* the log read (the read drops a kept audience on a state event the
dispatcher may not have seen). A recording fake of each part: pure, no homeserver.
"""

from __future__ import annotations

from bot.chat.reads import read_room
from bot.chat.visibility import ANYONE, Audience
from ingest.search.logs.roomlog import RoomLog
from ingest.types import RoomID

ROOM = RoomID("!room:example.org")


class Recorder:
    """The searcher's marks, the log read and the audience, each noting when it is asked."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def marks(self) -> dict[str, str]:
        self.calls.append("marks")
        return {ROOM: "$mark"}

    async def read_log(self, room_id: RoomID) -> RoomLog:
        self.calls.append("read")
        return RoomLog(room_id, [], 10)

    async def audience(self, room_id: RoomID) -> Audience:
        self.calls.append("audience")
        return ANYONE


async def test_search_takes_the_writers_marks_before_the_log_read() -> None:
    parts = Recorder()
    read = await read_room(parts, ROOM, parts.read_log, parts.audience)
    assert parts.calls == ["marks", "read"]
    assert read.marks == {ROOM: "$mark"} and read.log.room_id == ROOM


async def test_search_asks_the_audience_after_the_log_read() -> None:
    parts = Recorder()
    read = await read_room(parts, ROOM, parts.read_log, parts.audience)
    assert "audience" not in parts.calls  # not before the read, nor during it
    assert await read.audience() is ANYONE
    assert parts.calls == ["marks", "read", "audience"]
