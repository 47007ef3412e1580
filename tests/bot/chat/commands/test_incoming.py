"""What reaches the command path: the de-duplication bound, an asker's rate, what a command is."""

from __future__ import annotations

from typing import Any

import pytest

from bot.chat.commands.incoming import BoundedSeen, RateLimit, incoming

BOT = "@muninn:x"


def test_bounded_seen_forgets_the_oldest() -> None:
    seen = BoundedSeen(3)
    for key in "abcd":
        seen.add(key)
    assert "a" not in seen and "d" in seen and len(seen) == 3


def test_rate_limit_warns_once_then_drops() -> None:
    now = [0.0]
    limit = RateLimit(2, clock=lambda: now[0])
    assert [limit.check("@a") for _ in range(4)] == ["ok", "ok", "warn", "drop"]
    assert limit.check("@b") == "ok"
    now[0] = 61.0
    assert limit.check("@a") == "ok"


def test_rate_limit_remembers_a_bounded_number_of_askers() -> None:
    """Regression: the per-asker map never shrank (an entry for every account that ever
    asked). It keeps at most `max_askers`, forgetting the least recently seen (idle ones
    first), and still limits the askers it keeps."""
    now = [0.0]
    limit = RateLimit(1, clock=lambda: now[0], max_askers=3)
    for n in range(100):
        now[0] += 1.0
        assert limit.check(f"@new{n}") == "ok"
        assert limit.askers <= 3
    assert [limit.check("@busy") for _ in range(3)] == ["ok", "warn", "drop"]
    limit.check("@other")
    assert limit.check("@busy") == "drop"


@pytest.mark.parametrize(
    ("content", "sender", "want"),
    [
        ({"msgtype": "m.text", "body": "!search x"}, "@a:x", True),
        ({"msgtype": "m.notice", "body": "!search x"}, "@otherbot:x", False),
        ({"msgtype": "m.text", "body": "!search x"}, BOT, False),
        ({"msgtype": "m.text", "body": "hello !search"}, "@a:x", False),
        ({"msgtype": "m.text", "body": "! wow"}, "@a:x", False),
        (
            {
                "msgtype": "m.text",
                "body": "> <@b:x> hi\n\n!pin",
                "m.relates_to": {"m.in_reply_to": {"event_id": "$p"}},
            },
            "@a:x",
            True,
        ),
        # The fallback is stripped only in a reply: here the quote is the sender's own.
        ({"msgtype": "m.text", "body": "> <@b:x> hi\n\n!pin"}, "@a:x", False),
    ],
)
def test_incoming_filters_own_notices_and_non_commands(
    content: dict[str, Any], sender: str, want: bool
) -> None:
    """The bot's own events, any m.notice, and bodies without the prefix are no commands."""
    event = {"type": "m.room.message", "room_id": "!r", "event_id": "$e", "sender": sender}
    assert (incoming({**event, "content": content}, BOT, "!") is not None) is want
