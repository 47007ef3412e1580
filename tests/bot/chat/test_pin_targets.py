"""What a `!pin` marks (`bot.chat.pins.markers`, `pin_target`) and what the board shows of it."""

from __future__ import annotations

from typing import Any

from bot.chat.commands.records import PinCommand
from bot.chat.pins import markers, pin_target
from ingest.rules.events import typed_text
from ingest.search.logs.roomlog import TimelineItem
from ingest.search.permalink import permalink

BOT = "@muninn:x"


def _item(
    event_id: str,
    body: str,
    *,
    reply: str | None = None,
    redacted: bool = False,
    sender: str = "@a:x",
    html: str | None = None,
) -> TimelineItem:
    content: dict[str, Any] = {"body": body}
    if html is not None:
        content["formatted_body"] = html
    if reply:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply}}
    # The room log keeps what the sender typed, as `ingest.search.logs.roomlog` builds its items.
    return TimelineItem(event_id, sender, 1, typed_text(body, content), None, content, redacted)


def test_markers_skip_redacted_pins_and_resolve_targets() -> None:
    """A redacted !pin is no marker; a reply targets its parent, ^1 the message above."""
    history = [
        _item("$m1", "first"),
        _item("$m2", "second"),
        _item("$p1", "> <@a:x> first\n\n!pin #a", reply="$m1"),
        _item("$p2", "!pin ^1"),
        _item("$p3", "", redacted=True),
    ]
    found = markers(history, BOT, "!")
    assert [(m.event_id, m.target) for m in found] == [("$p1", "$m1"), ("$p2", "$m2")]
    assert pin_target(history, 3, PinCommand(offset=5), bot_user_id=BOT, prefix="!") is None


def test_pin_target_refuses_junk_and_pins_what_a_one_result_reply_cites() -> None:
    """A bare `!pin` pins nothing (regression: it pinned the text "!pin"); a reply to
    Muninn's reply pins the message it cites when it cites one (regression: it pinned the
    bot's flattened text), else nothing; a label or note still pins the command itself."""
    one = permalink("!r:x", "$m1", "x")
    two = permalink("!r:x", "$m2", "x")
    history = [
        _item("$m1", "first"),
        _item("$m2", "second"),
        _item("$b1", f"1 result: first {one}", sender=BOT, html=f'<a href="{one}">first</a>'),
        _item("$b2", f"2 results {one} {two}", sender=BOT, html=f"{one} {two} {one}"),
        _item("$p1", "!pin", reply="$b1"),
        _item("$p2", "!pin", reply="$b2"),
        _item("$p3", "!pin"),
        _item("$p4", "!pin #later"),
    ]

    def target(index: int, command: PinCommand) -> str | None:
        return pin_target(history, index, command, bot_user_id=BOT, prefix="!")

    assert target(4, PinCommand()) == "$m1"
    assert target(5, PinCommand()) is None
    assert target(6, PinCommand()) is None
    assert target(7, PinCommand(label="later")) == "$p4"
    assert [(m.event_id, m.target) for m in markers(history, BOT, "!")] == [
        ("$p1", "$m1"),
        ("$p2", None),
        ("$p3", None),
        ("$p4", "$p4"),
    ]


def test_pinned_message_body_is_scrubbed() -> None:
    """A pinned message holding a secret is shown on the board without it."""
    from bot.chat.pins import _body

    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    item = TimelineItem("$p", "@a:x", 1, f"deploy key {secret}", None, {"body": "x"}, False)
    shown = _body(item)
    assert secret not in shown and "[redacted:" in shown
