"""A room's recent events (`ingest.search.logs.recent`): a read's text bound, a field's share,
merges."""

from __future__ import annotations

from bot.chat.replies import scan_sentence
from ingest.search.logs.roomlog import RoomLog
from ingest.types import RoomID
from tests.bot.chat.timeline import message as _message


def test_within_text_keeps_the_newest_events_up_to_the_text_bound() -> None:
    """Regression: a read kept 2,048 events whatever their size (2,048 × 16 KB cost 6.4 s of
    scrubbing per command). It keeps the newest events within the text bound and says so."""
    from ingest.search.logs.recent import within_text

    big = [_message(f"$m{i}", "@a:x", "lorem ipsum " * 1_400) for i in range(2048)]
    kept, cut = within_text(big, 100_000)  # each body kept to its first 2,000 characters
    assert [e["event_id"] for e in kept] == [f"$m{i}" for i in range(50)] and cut
    assert within_text(kept, 100_000) == (kept, False)
    log = RoomLog(RoomID("!r"), kept, 2048, cut)
    assert scan_sentence(log.scan()).startswith("scanned the latest 50 events")
    assert "as much text as one command reads" in scan_sentence(log.scan())
    assert scan_sentence(RoomLog(RoomID("!r"), kept, 2048).scan()) == (
        "scanned the whole room (50 events)"
    )


def test_a_message_is_kept_to_its_share_of_the_read_cut_at_a_word() -> None:
    """Regression (issue 37 item 9): 17 messages of 62 KB filled the 1,000,000-character read,
    emptying the pinboard and what `!search` scans. Each event is kept to its first
    `EVENT_SHARE` characters, cut at a word's end (a token across the cut is dropped whole,
    never shown in part); a short event is the same object."""
    from ingest.search.logs.recent import EVENT_SHARE, SCAN_TEXT, within_text

    token = "ghp_" + "a1B2c3D4e5" * 4
    body = "word " * (EVENT_SHARE // 5 - 2) + "xx " + token + " tail " * 12_000
    huge = [_message(f"$h{i}", "@a:x", body) for i in range(17)]
    small = [_message(f"$s{i}", "@a:x", "a pinned plan") for i in range(2000)]
    kept, cut = within_text(huge + small, SCAN_TEXT)
    assert len(kept) == 2017 and not cut
    cut_body = kept[0]["content"]["body"]
    assert len(cut_body) <= EVENT_SHARE and cut_body.endswith("xx") and "ghp_" not in cut_body
    assert kept[17] is small[0]


def test_recent_events_merge_applies_new_redactions() -> None:
    """Extending a room's cached events: a redaction among the new ones empties its target."""
    from ingest.search.logs.recent import _merge

    cached = [
        {"event_id": "$b", "type": "m.room.message", "content": {"body": "secret plan"}},
        {"event_id": "$a", "type": "m.room.message", "content": {"body": "hello"}},
    ]
    new = [{"event_id": "$r", "type": "m.room.redaction", "redacts": "$b", "content": {}}]
    merged = _merge(new, cached)
    assert [e["event_id"] for e in merged] == ["$r", "$b", "$a"]
    assert merged[1]["content"] == {} and "redacted_because" in merged[1]["unsigned"]
    assert merged[2]["content"] == {"body": "hello"}


async def test_an_extended_copy_keeps_what_a_whole_read_would_keep() -> None:
    """A burst extends a room's copy command after command, sizing only the new events (the
    copy's own are known): what it keeps is exactly what reading the room whole keeps, at the
    text bound too, and a redacted old message frees its text for older ones at once."""
    from collections.abc import Set

    from ingest.matrix import ClientEvent
    from ingest.search.logs.recent import EVENT_SHARE, SCAN_TEXT, RecentEvents, within_text

    long, short = "lorem ipsum " * 400, "a short line"
    room: list[ClientEvent] = [  # newest first
        _message(f"$o{i}", "@a:x", long if i % 3 else short) for i in range(900)
    ]

    class Source:
        async def latest(self, room_id: RoomID, limit: int) -> list[ClientEvent]:
            return room[:limit]

        async def newer_than(
            self, room_id: RoomID, known: Set[str], limit: int
        ) -> tuple[list[ClientEvent], bool]:
            new = []
            for event in room[:limit]:
                if event["event_id"] in known:
                    return new, True
                new.append(event)
            return new, False

    copies, source = RecentEvents(), Source()
    first, cut = await copies.latest(source, RoomID("!r"), 2048)
    assert (first, cut) == within_text(room, SCAN_TEXT) and cut  # the text bound holds
    for step in range(3):
        room.insert(0, _message(f"$n{step}", "@a:x", long))
        if step == 1:  # a redaction of a kept long message: its text no longer counts
            room.insert(
                0,
                {
                    **_message("$r", "@b:x", ""),
                    "type": "m.room.redaction",
                    "redacts": "$o1",
                    "content": {"redacts": "$o1"},
                },
            )
        events, cut = await copies.latest(source, RoomID("!r"), 2048)
        whole = [
            {**e, "content": {}, "unsigned": {"redacted_because": {"redacted": True}}}
            if e["event_id"] == "$o1" and step >= 1
            else e
            for e in room
        ]
        expected, expected_cut = within_text(whole, SCAN_TEXT)
        assert [e["event_id"] for e in events] == [e["event_id"] for e in expected]
        assert cut == expected_cut and all(
            len(e["content"].get("body", "")) <= EVENT_SHARE for e in events
        )
    assert any(e["event_id"] == "$o1" and e["content"] == {} for e in events)
