"""The `!pins` reply: notes capped, a full board within the budget."""

from __future__ import annotations

from dataclasses import replace

from bot.chat.content import ReplyTo, content_size
from bot.chat.pinboard import Pin
from bot.chat.replies import NOTE_WIDTH, REPLY_BUDGET, PinsView, pins_reply
from ingest.search.logs.roomlog import ScanInfo


def _pins_view(note: str, n: int) -> PinsView:
    pins = [Pin(f"$t{i}", "x", note, "@a:x", 1_700_000_000_000, f"$m{i}") for i in range(n)]
    return PinsView(
        room_id="!r",
        room_label="#r:x",
        pins=pins,
        bodies={p.target: "pinned text " * 500 for p in pins},
        senders={p.target: "@a:x" for p in pins},
        names={},
        permalinks={p.target: f"https://matrix.to/#/!r/{p.target}" for p in pins},
        scan=ScanInfo(10, 50, None),
        board_size=n,
        results_json=True,
    )


def test_pins_reply_caps_notes_and_fits_the_budget() -> None:
    """Regression: pin notes were unbounded (two 15 KB notes made `!pins` 120 KB). A note
    shows at most NOTE_WIDTH characters, and a full board of them fits the budget."""
    note = "remember " + "<b>" * 5000
    for results_json in (False, True):
        view = replace(_pins_view(note, 12), results_json=results_json)
        content = pins_reply(ReplyTo("!r", "$cmd"), view, filtered=False)
        assert content_size(content) <= REPLY_BUDGET
        assert content["body"].count("remember") == 12
        assert "<b>" * (NOTE_WIDTH // 3 + 1) not in content["body"]
