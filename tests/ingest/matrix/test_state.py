"""ingest.matrix.state: a room's scope facts read from its state events."""

from __future__ import annotations

from typing import Any

from ingest.matrix import room_state_from
from ingest.types import RoomID, UserID


def test_room_state_from_reads_legacy_top_level_prev_content() -> None:
    """is_direct in a top-level prev_content (older servers) also sets direct_flag."""
    join = {
        "type": "m.room.member",
        "state_key": "@a:hs.test",
        "content": {"membership": "join"},
        "prev_content": {"membership": "invite", "is_direct": True},
    }
    state = room_state_from(RoomID("!r"), [join], UserID("@a:hs.test"))
    assert (state.direct_flag, state.joined, state.room_version) == (True, True, None)


def test_room_state_from_names_who_joined_and_is_gone() -> None:
    """Who left or was kicked or banned after joining is a past member (scope sees a puppet
    that spoke and left by it); an invite, or a ban of someone who never joined, names no
    sender and is no past member; citations name only who is there."""

    def member(user: str, membership: str, before: str | None = None) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "m.room.member",
            "state_key": user,
            "content": {"membership": membership},
        }
        if before is not None:
            event["unsigned"] = {"prev_content": {"membership": before}}
        return event

    events = [
        member("@a:hs.test", "join"),
        member("@discord_1:hs.test", "leave", before="join"),
        member("@b:hs.test", "ban", before="join"),
        member("@discord_2:hs.test", "ban"),  # banned before it ever came
        member("@c:hs.test", "invite"),
        member("@d:hs.test", "leave", before="invite"),  # declined
    ]
    state = room_state_from(RoomID("!r"), events, UserID("@a:hs.test"))
    assert state.members == ("@a:hs.test",)
    assert state.past_members == ("@b:hs.test", "@discord_1:hs.test")
