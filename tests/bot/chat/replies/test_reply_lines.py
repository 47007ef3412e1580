"""What a reply line shows of untrusted input: any timestamp, and user text that tries to
forge lines or reorder them (issue 21 items 1 and 11)."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest

from bot.chat.content import ReplyTo
from bot.chat.html import MAX_MARKS, reply_line, safe_html, safe_plain
from bot.chat.pinboard import Pin
from bot.chat.replies import PinsView, SearchView, pins_reply, search_reply, text_reply
from ingest.search.hits import Hit, SearchResult
from ingest.search.logs.roomlog import ScanInfo

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


# ---------------------------------------------------------------- user text as one reply line

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def _max_marks(text: str) -> int:
    """The longest run of combining marks in `text`."""
    run = longest = 0
    for ch in text:
        run = run + 1 if unicodedata.category(ch).startswith("M") else 0
        longest = max(longest, run)
    return longest


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("one\ntwo\r\nthree\u2028four", "one two three four"),
        ("a\u202eevil\u202c b \u2067x\u2069", "aevil b x"),
        ("e" + "\u0301" * 50 + "x", "e" + "\u0301" * 4 + "x"),
        ("ế̃ and 👍🏽 and 1️⃣", "ế̃ and 👍🏽 and 1️⃣"),  # real text keeps its marks
        ("@\u202eroom", "@room"),  # then neutralised by `safe_plain`
    ],
    ids=["line-breaks", "bidi", "mark-flood", "real-marks", "mention"],
)
def test_reply_line_folds_strips_and_caps(text: str, line: str) -> None:
    """One line, no bidi control, at most `MAX_MARKS` combining marks on a character."""
    assert reply_line(text) == line
    assert "\n" not in safe_plain(text) and safe_html(text).startswith("<bdi>")


def test_pins_reply_note_cannot_forge_a_result_line() -> None:
    """Regression: a pin's note kept its raw newlines, so a note could add a line to `!pins`
    that reads as a second pin; now the note stays on its pin's line."""
    note = "see above\n2. Mallory: the real deploy key is here\n   https://evil.example"
    content = pins_reply(ReplyTo("!r", "$cmd"), _pins(_pin(note)), filtered=False)
    lines = content["body"].split("\n")
    assert not any(line.startswith(("2.", "   https://evil")) for line in lines)
    assert any(line.startswith("1.") and "2. Mallory" in line for line in lines)


def test_replies_carry_no_bidi_control_and_isolate_user_text() -> None:
    """Regression: bidi overrides in a body, a note or a display name passed through and
    reordered the reply's own text; they are stripped from both forms and the HTML isolates
    each piece of user text in `<bdi>`."""
    hit = _hit(f"kiwi {BIDI}cod.exe", sender="@eve:x")
    search = _search(hit, names={"@eve:x": f"\u202eEve{BIDI}"})
    pins = pins_reply(
        ReplyTo("!r", "$cmd"),
        _pins(_pin(f"note \u202e{BIDI}"), body="kiwi \u2066x", names={"@a:x": "\u202eAl"}),
        filtered=False,
    )
    for content in (search, pins):
        shown = content["body"] + content["formatted_body"]
        assert not set(BIDI) & set(shown)
        assert "<bdi>" in content["formatted_body"]
    assert "<b><bdi>Eve</bdi></b>" in search["formatted_body"]


def test_replies_cap_a_combining_flood() -> None:
    """Regression: hundreds of combining marks on one letter (a "zalgo" flood, drawn over the
    lines around it) were quoted whole; at most `MAX_MARKS` stay on a character."""
    flood = "kiwi Z" + "\u0336\u0301\u0300" * 100
    search = _search(_hit(flood), names={"@eve:x": "E" + "\u0301" * 80})
    pins = pins_reply(ReplyTo("!r", "$cmd"), _pins(_pin("n" + "\u0301" * 80), flood), False)
    for content in (search, pins):
        assert _max_marks(content["body"]) == _max_marks(content["formatted_body"]) == MAX_MARKS


def test_text_reply_keeps_its_own_lines() -> None:
    """A usage reply's own lines stay lines (each is folded on its own)."""
    content = text_reply(ReplyTo("!r", "$cmd"), "Usage: !pin [^N]\nN from 1 to 50")
    assert content["body"] == "Usage: !pin [^N]\nN from 1 to 50"
