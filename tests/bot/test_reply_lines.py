"""What a reply line shows of untrusted input: any timestamp, and user text that tries to
forge lines or reorder them (issue 21 items 1 and 11)."""

from __future__ import annotations

from typing import Any

from bot.pinboard import Pin
from bot.replies import PinsView, ReplyTo, SearchView, pins_reply, search_reply
from bot.roomlog import ScanInfo
from ingest.hits import Hit, SearchResult

FAR_FUTURE_TS = 253_402_300_800_000  # 10000-01-01 00:00 UTC
TS = 1_700_000_000_000


def _hit(body: str, ts: int = TS, sender: str = "@eve:x") -> Hit:
    message = {"event_id": "$e", "sender": sender, "ts": ts, "body": body}
    return Hit("p", "!r", "#r:x", None, "$e", "$e", ("$e",), (message,), 0.5, "https://l", "$e")


def _search(hit: Hit, names: dict[str, str] | None = None) -> dict[str, Any]:
    view = SearchView(SearchResult(hits=[hit], retrievers=["lexical"]), ("kiwi",))
    if names is not None:
        view = SearchView(view.result, view.texts, names={"!r": names})
    return search_reply(ReplyTo("!r", "$cmd"), view)


def _pins(pin: Pin, body: str = "pinned kiwi", names: dict[str, str] | None = None) -> PinsView:
    return PinsView(
        room_id="!r",
        room_label="#r:x",
        pins=[pin],
        bodies={pin.target: body},
        senders={pin.target: "@a:x"},
        names=names or {},
        permalinks={pin.target: "https://matrix.to/#/!r/$t"},
        scan=ScanInfo(10, 50, None),
        board_size=1,
    )


def _pin(note: str = "", ts: int = TS) -> Pin:
    return Pin("$t", None, note, "@a:x", ts, "$m")


def test_search_reply_shows_a_far_future_hit() -> None:
    """Regression: a hit stamped in the year 10000 raised in the reply's date, so the
    `!search` got no reply at all."""
    content = _search(_hit("kiwi from the future", FAR_FUTURE_TS))
    assert "1. 10000-01-01 00:00 UTC · eve: **kiwi** from the future" in content["body"]


def test_pins_reply_shows_a_pin_stamped_beyond_any_date() -> None:
    """Regression: a pin marker with a far-future (or absurd) `ts` broke `!pins`."""
    for ts in (FAR_FUTURE_TS, 10**400):
        content = pins_reply(ReplyTo("!r", "$cmd"), _pins(_pin(ts=ts)), filtered=False)
        assert "pinned kiwi" in content["body"]
        shown = "10000-01-01 00:00" if ts == FAR_FUTURE_TS else "????-??-?? ??:??"
        assert shown in content["formatted_body"]
