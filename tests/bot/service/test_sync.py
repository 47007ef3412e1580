"""`/sync`'s events as the sink takes them (`bot.service.sync.events_from_sync`)."""

from __future__ import annotations

from bot.service.sync import SYNC_FILTER, events_from_sync


def test_events_from_sync_stamps_the_room_and_drops_what_is_no_event() -> None:
    """Joined rooms' timeline events and invites' stripped state, each with its room id; an
    entry that is no object, or a section of the wrong shape, gives nothing."""
    message = {"type": "m.room.message", "event_id": "$m", "content": {"body": "hi"}}
    invite = {"type": "m.room.member", "state_key": "@bot:x", "content": {"membership": "invite"}}
    resp = {
        "rooms": {
            "join": {
                "!a:x": {"timeline": {"events": [message, 1, "x", None]}},
                "!b:x": {"timeline": {"events": "junk"}},
                "!c:x": "junk",
            },
            "invite": {"!i:x": {"invite_state": {"events": [invite]}}},
            "leave": {"!l:x": {"timeline": {"events": [message]}}},
        }
    }
    assert events_from_sync(resp) == [
        {**message, "room_id": "!a:x"},
        {**invite, "room_id": "!i:x"},
    ]
    assert message.get("room_id") is None  # the response is not changed
    assert events_from_sync({}) == events_from_sync({"rooms": []}) == []


def test_the_sync_filter_names_the_types_the_bot_acts_on() -> None:
    """Messages, redactions, and the state that changes a room's scope or visibility."""
    assert SYNC_FILTER["room"]["timeline"]["types"] == [
        "m.room.message",
        "m.room.redaction",
        "m.room.member",
        "m.room.history_visibility",
        "m.room.canonical_alias",
        "m.room.encryption",
        "m.bridge",
        "uk.half-shot.bridge",
    ]
    assert SYNC_FILTER["room"]["state"]["types"] == ["m.room.member"]
