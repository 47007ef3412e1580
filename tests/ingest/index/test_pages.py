"""ingest.index.pages: one event the writer cannot take is named and passed, never a room's failure
(issue 21 item 1)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from ingest.index.pages import apply_events
from ingest.index.reports import RoomReport
from ingest.index.windows import ChunkParams, StoredWindow, WindowSet
from ingest.types import EventID, RoomID

ROOM = RoomID("!room:test")


class _Empty:
    """An index holding nothing yet (the `WindowLookup` of a room's first page)."""

    def windows_of_events(self, event_ids: Sequence[EventID]) -> list[StoredWindow]:
        return []

    def window_by_id(self, point_id: str) -> StoredWindow | None:
        return None

    async def get_event(self, room_id: str, event_id: str) -> dict[str, Any] | None:
        return None

    async def relations(
        self, room_id: str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[dict[str, Any]]:
        return []


def _text(n: int, body: str, ts: int = 1_793_550_840_000) -> dict[str, Any]:
    content = {"msgtype": "m.text", "body": body}
    return {
        "type": "m.room.message",
        "event_id": f"$e{n}",
        "sender": "@alice:test",
        "origin_server_ts": ts + n,
        "room_id": ROOM,
        "content": content,
    }


async def _apply(events: list[dict[str, Any]]) -> tuple[WindowSet, RoomReport]:
    lookup = _Empty()
    ws = WindowSet(ROOM, lookup, ChunkParams(gap_seconds=600, max_bytes=4000))
    report = RoomReport(ROOM)
    await apply_events(
        ws, events, (), report, reader=lookup, own_user_ids=frozenset(), command_prefix="!"
    )
    return ws, report


def _held(ws: WindowSet) -> list[str]:
    upserts, _ = ws.changes()
    return [m.event_id for _, messages in upserts.values() for m in messages]


async def test_apply_events_names_and_passes_an_event_it_cannot_take(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: a body that cannot be encoded (a lone surrogate, which JSON allows) made the
    chunker raise and failed the room on every pass; now the event is logged by room and event
    id, counted as `unwritable`, and the page's other messages are indexed around it."""
    events = [_text(1, "before it"), _text(2, "broken \ud800 text"), _text(3, "after it")]
    with caplog.at_level(logging.WARNING, logger="muninn.index"):
        ws, report = await _apply(events)
    assert _held(ws) == ["$e1", "$e3"]
    assert report.indexed == 2 and report.skipped["unwritable"] == 1
    assert any(ROOM in r.getMessage() and "$e2" in r.getMessage() for r in caplog.records)


async def test_apply_events_keeps_a_far_future_message() -> None:
    """Regression: a message stamped in the year 10000 is indexed with the ones after it."""
    events = [_text(1, "from the future", ts=253_402_300_800_000), _text(2, "the present")]
    ws, report = await _apply(events)
    assert _held(ws) == ["$e1", "$e2"] and report.skipped == {}


def _edit(n: int, target: int, body: str) -> dict[str, Any]:
    event = _text(n, f"* {body}")
    event["content"]["m.new_content"] = {"msgtype": "m.text", "body": body}
    event["content"]["m.relates_to"] = {"rel_type": "m.replace", "event_id": f"$e{target}"}
    return event


def _bodies(ws: WindowSet) -> str:
    upserts, _ = ws.changes()
    return " ".join(m.body for _, messages in upserts.values() for m in messages)


async def test_an_edit_the_writer_cannot_take_removes_the_old_text() -> None:
    """An edit is often a removal (a password edited away): one whose new text cannot be
    written must not leave the old text in the index. What cannot be replaced is removed."""
    events = [
        _text(1, "the db password is hunter2"),
        _text(2, "unrelated"),
        _edit(3, 1, "edited away \ud800"),
    ]
    ws, report = await _apply(events)
    assert "hunter2" not in _bodies(ws) and _held(ws) == ["$e2"]
    assert report.skipped["unwritable"] == 1


async def test_another_senders_edit_the_writer_cannot_take_removes_nothing() -> None:
    """A stranger's unwritable 'edit' of someone's message is ignored like any edit by
    another sender: it cannot remove that message from the index either."""
    stranger = _edit(3, 1, "gone \ud800")
    stranger["sender"] = "@mallory:test"
    ws, _ = await _apply([_text(1, "the meeting is at noon"), _text(2, "ok"), stranger])
    assert _held(ws) == ["$e1", "$e2"]
