"""Reply helpers: docs/ARCHITECTURE.md §3 rule 16 (quoted text escaped, cannot ping) and §4.3
permalinks."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from bot.chat.content import no_mentions
from bot.chat.html import (
    WORD_JOINER,
    escape,
    excerpt,
    neutralise_mentions,
    permalink,
    safe_html,
    safe_plain,
)

WJ = WORD_JOINER


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("<b>bold</b>", "&lt;b&gt;bold&lt;/b&gt;"),
        ("a \"q\" & 's'", "a &quot;q&quot; &amp; &#x27;s&#x27;"),
    ],
)
def test_escape_user_markup_arrives_as_text(text: str, expected: str) -> None:
    """HTML in user text is escaped, never interpreted."""
    assert escape(text) == expected
    assert safe_html(text) == f"<bdi>{expected}</bdi>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hey @room look", f"hey @{WJ}room look"),
        ("@ROOM", f"@{WJ}ROOM"),
        ("ask @alice:example.org", f"ask @{WJ}alice:example.org"),
        ("https://matrix.to/#/@bob:example.org", f"https://matrix.to/#/@{WJ}bob:example.org"),
        ("(@room)", f"(@{WJ}room)"),
        ("mail bob@example.org", "mail bob@example.org"),
        ("a lone @ sign", "a lone @ sign"),
    ],
)
def test_neutralise_mentions_breaks_pings(text: str, expected: str) -> None:
    """Mention-shaped `@`s get a word joiner; e-mail addresses and lone `@`s are left alone."""
    assert neutralise_mentions(text) == expected
    assert safe_plain(text) == expected


@given(st.text(alphabet="@ roma:\u2060x.", max_size=30))
def test_neutralise_mentions_is_idempotent(text: str) -> None:
    """Neutralising twice changes nothing more, so layers may each apply it."""
    once = neutralise_mentions(text)
    assert neutralise_mentions(once) == once
    assert regex.search(r"(?<!\w)@room", once) is None


def test_safe_html_neutralises_room_mention_in_markup() -> None:
    """`@room` inside escaped HTML is neutralised too, and markup stays escaped."""
    assert safe_html("<i>@room</i>") == f"<bdi>&lt;i&gt;@{WJ}room&lt;/i&gt;</bdi>"


def test_no_mentions_is_an_empty_mentions_block() -> None:
    """Replies carry `m.mentions: {}` so legacy body push rules are skipped."""
    assert no_mentions() == {"m.mentions": {}}


def test_excerpt_short_body_is_whole_and_marked() -> None:
    """A short body is shown whole with the match marked in both forms."""
    result = excerpt("Deploy the Server today", ["server"])
    assert result.plain == "Deploy the **Server** today"
    assert result.html == "<bdi>Deploy the <mark>Server</mark> today</bdi>"


def test_excerpt_escapes_and_neutralises_user_text() -> None:
    """Markup and mentions in the quoted body arrive escaped and neutralised."""
    result = excerpt("<script>x</script> @room deploy now", ["deploy"])
    escaped = f"&lt;script&gt;x&lt;/script&gt; @{WJ}room <mark>deploy</mark> now"
    assert result.html == f"<bdi>{escaped}</bdi>"
    assert result.plain == f"<script>x</script> @{WJ}room **deploy** now"


def test_excerpt_mark_next_to_mention_still_neutralised() -> None:
    """A match that splits `@` from `room` cannot rebuild a ping."""
    result = excerpt("say @room", ["room"])
    assert "@room" not in result.plain
    assert "@room" not in result.html


def test_excerpt_long_body_is_cut_around_the_match() -> None:
    """A long body gives a window around the match, with ellipses where it was cut."""
    body = (
        " ".join(f"word{i}" for i in range(100))
        + " NEEDLE "
        + " ".join("x" * 5 for _ in range(60))
    )
    result = excerpt(body, ["needle"], width=60)
    assert result.plain.startswith("…") and result.plain.endswith("…")
    assert "**NEEDLE**" in result.plain
    assert len(result.plain) <= 60 + 6


def test_excerpt_prefers_the_longest_term() -> None:
    """The focus is the most specific (longest) match, not the first."""
    body = "a " + "pad " * 60 + "the big migration plan " + "pad " * 60
    result = excerpt(body, ["a", "migration plan"], width=40)
    assert "**migration plan**" in result.plain


def test_excerpt_marks_whole_words_and_a_word_star_as_a_word_start() -> None:
    """Issue 44, regression: `the` is marked as a word, never inside "them"; `quillb*` marks
    the word it starts; an identifier's part is a word of its own; words of a text only
    spaces part are one mark; nothing inside a scrub marker, which is Muninn's text."""
    assert excerpt("give them the keys", ["the"]).plain == "give them **the** keys"
    assert excerpt("The quillbacks, quill", ["quillb*"]).plain == "The **quillbacks**, quill"
    assert excerpt("got ERR_CONNECTION_REFUSED", ["refused"]).plain == (
        "got ERR_CONNECTION_**REFUSED**"
    )
    assert excerpt("the kiln plan", ["kiln plan"]).html == "<bdi>the <mark>kiln plan</mark></bdi>"
    said = "kiln pw: [redacted:password], password later"
    assert excerpt(said, ["password"]).plain == "kiln pw: [redacted:password], **password** later"


def test_excerpt_uses_a_given_span() -> None:
    """A regex hit's span is marked even when no literal term matches."""
    result = excerpt("error code 4711 seen", [], span=(11, 15))
    assert result.plain == "error code **4711** seen"


def test_excerpt_flattens_newlines() -> None:
    """An excerpt is one line."""
    assert excerpt("one\ntwo", ["two"]).plain == "one **two**"


def test_excerpt_without_match_shows_the_start() -> None:
    """No match: the body's beginning, unmarked."""
    assert excerpt("x" * 300, ["nope"], width=20).plain == "x" * 20 + "…"


@pytest.mark.parametrize(
    ("room", "event", "via", "expected"),
    [
        (
            "!somewhere:example.org",
            "$event:example.org",
            "elsewhere.ca",
            "https://matrix.to/#/!somewhere%3Aexample.org/%24event%3Aexample.org?via=elsewhere.ca",
        ),
        (
            "!Abc-_xyz0123",
            "$Ev-_ent0123",
            "example.org",
            "https://matrix.to/#/!Abc-_xyz0123/%24Ev-_ent0123?via=example.org",
        ),
        (
            "!room:example.org",
            "$a/b+c=",
            ["a.example", "b.example:8448"],
            "https://matrix.to/#/!room%3Aexample.org/%24a%2Fb%2Bc%3D"
            "?via=a.example&via=b.example%3A8448",
        ),
        (
            "#somewhere:example.org",
            "$event",
            "example.org",
            "https://matrix.to/#/%23somewhere%3Aexample.org/%24event",
        ),
        ("!v12room", None, "example.org", "https://matrix.to/#/!v12room?via=example.org"),
        ("!v12room", "$e", (), "https://matrix.to/#/!v12room/%24e"),
    ],
    ids=["v1-style", "v12", "v3-event-slashes", "alias-no-via", "room-only", "no-via"],
)
def test_permalink_matrix_to_encoding(
    room: str, event: str | None, via: str | list[str], expected: str
) -> None:
    """Permalinks follow the spec's matrix.to examples (`!` kept, `$ : # / +` encoded)."""
    assert permalink(room, event, via) == expected
