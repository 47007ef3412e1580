"""The room log a command reads (`ingest.search.logs.roomlog`): answered commands, scrubbed and
edited texts,
the scan line's dates."""

from __future__ import annotations

from typing import Any

import pytest

from bot.chat.replies import scan_sentence
from ingest.search.logs.roomlog import RoomLog, current_body
from ingest.types import RoomID
from tests.bot.chat.timeline import message as _message

BOT = "@muninn:x"


def test_room_log_knows_what_the_bot_answered() -> None:
    raw = [
        {"sender": BOT, "content": {"m.relates_to": {"m.in_reply_to": {"event_id": "$c"}}}},
        {"sender": "@a:x", "content": {"m.relates_to": {"m.in_reply_to": {"event_id": "$d"}}}},
    ]
    log = RoomLog(RoomID("!r"), raw, 10)
    assert log.answered("$c", BOT) and not log.answered("$d", BOT)


def test_room_log_messages_are_scrubbed() -> None:
    """A secret not yet seen by the writer never reaches a reply through the transcript."""
    secret = "syt_c2VjcmV0_abcdefghijklmnopqrst_1a2b3c"
    raw = [
        {
            "type": "m.room.message",
            "event_id": "$s",
            "sender": "@a:x",
            "origin_server_ts": 1,
            "room_id": "!r",
            "content": {"msgtype": "m.text", "body": f"the bot token is {secret}"},
        }
    ]
    bodies = [m.body for m in RoomLog(RoomID("!r"), raw, 10).messages(BOT, "!")]
    assert len(bodies) == 1
    assert secret not in bodies[0] and "[redacted:" in bodies[0]


def test_room_log_ignores_another_senders_edit() -> None:
    """Another sender's later edit is void: the author's own last edit stands, not the
    original text the author edited away (rule 6)."""

    raw = [  # newest first
        _message("$m", "@mallory:x", "* mallory's words", edits="$o"),
        _message("$e", "@alice:x", "* call me", edits="$o"),
        _message("$o", "@alice:x", "call me at 555-1234"),
    ]
    [message] = RoomLog(RoomID("!r"), raw, 10).messages(BOT, "!")
    assert message.body == "call me"


def _invalid_edit() -> dict[str, Any]:
    edit = _message("$e", "@alice:x", "* no new content", edits="$o")
    del edit["content"]["m.new_content"]
    return edit


@pytest.mark.parametrize(
    ("bundled", "shown"),
    [
        (None, "call me at 555-1234"),
        (_message("$e", "@alice:x", "* call me tomorrow", edits="$o"), "call me tomorrow"),
        (_message("$e", "@alice:x", "* !pins", edits="$o"), ""),
        (_message("$e", "@mallory:x", "* mallory's words", edits="$o"), None),
        (_message("$e", "@alice:x", "* for another event", edits="$x"), None),
        (_invalid_edit(), None),
    ],
    ids=["unedited", "author_edit", "into_a_command", "other_sender", "other_target", "invalid"],
)
def test_current_body_applies_the_bundled_edit_by_the_writers_rules(
    bundled: dict[str, Any] | None, shown: str | None
) -> None:
    """A fetched event (beyond the scan) reads as its bundled latest edit says when that edit
    is valid (the author's, of this event); an edit into a command withdraws the text. A latest
    edit Muninn cannot apply may hide valid earlier ones: the text is not told (None), never
    the original with words an edit took back."""
    event = _message("$o", "@alice:x", "call me at 555-1234")
    if bundled is not None:
        event["unsigned"] = {"m.relations": {"m.replace": bundled}}
    assert current_body(event, BOT, "!") == shown


def test_current_body_of_an_edit_event_is_not_told() -> None:
    """A pin of the edit event itself never shows its `* fallback` body."""
    edit = _message("$e", "@alice:x", "* new words", edits="$o")
    assert current_body(edit, BOT, "!") is None


def test_current_body_of_a_reply_drops_its_fallback() -> None:
    """A pinned reply beyond the scan shows its own words: the `> <@user> …` fallback quotes
    the parent as it was when the reply was sent, and that parent may since be redacted."""
    reply = _message("$r", "@alice:x", "> <@bob:x> the dock door code is 5519\n\nnoted, thanks")
    reply["content"]["m.relates_to"] = {"m.in_reply_to": {"event_id": "$parent"}}
    assert current_body(reply, BOT, "!") == "noted, thanks"


def test_scan_dates_nothing_by_a_malformed_timestamp() -> None:
    """Regression (issue 37 item 10): a message stamped with a negative `origin_server_ts`
    made the scan line read "back to 1969"; a stamp outside [0, 2^53) dates nothing."""
    now = 1_764_547_200_000
    raw = [
        {**_message("$new", "@a:x", "fresh"), "origin_server_ts": now},
        {**_message("$neg", "@a:x", "backdated"), "origin_server_ts": -60_000},
        {**_message("$big", "@a:x", "postdated"), "origin_server_ts": 2**60},
    ]
    scan = RoomLog(RoomID("!r"), raw, 3).scan()
    assert scan.oldest_ts == now
    assert "1969" not in scan_sentence(scan) and "2025-12-01" in scan_sentence(scan)
