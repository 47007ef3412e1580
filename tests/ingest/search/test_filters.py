"""`ingest.search.filters`: the one predicate the index's windows and the transcript's finds
meet."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from ingest.errors import QueryError
from ingest.rules.lexical import expand_prefix
from ingest.search.filters import MessageFilter, has_link, keep_messages, mentioned
from ingest.search.matches import Terms
from ingest.search.query import SearchQuery, plain_text, prefixes


def _m(body: str, sender: str = "@a:hs", **extra: object) -> dict[str, object]:
    return {"event_id": f"${abs(hash(body))}", "sender": sender, "ts": 1, "body": body, **extra}


def test_an_excluded_word_drops_the_whole_hit_as_whole_words() -> None:
    """`-test` drops a window holding "test" anywhere, caselessly, and leaves "latest" alone."""
    flt = MessageFilter.build(exclude_words=["test"])
    window = [_m("backup ran"), _m("a TEST backup")]
    assert keep_messages(flt, window, None) == ()
    assert keep_messages(flt, [_m("the latest backup")], None) != ()
    phrase = MessageFilter.build(exclude_words=["dry run"])
    assert keep_messages(phrase, [_m("a Dry  Run of it")], None) == ()
    assert keep_messages(phrase, [_m("a dry day, a run")], None) != ()


def test_sender_link_and_thread_filters_keep_the_messages_that_pass() -> None:
    """-from:, has:link and is:thread trim a hit to its passing messages; none: dropped."""
    window = [_m("see https://example.org/x", "@b:hs"), _m("no link here"), _m("www.a.org")]
    assert [m["body"] for m in keep_messages(MessageFilter(has_link=True), window, None)] == [
        "see https://example.org/x",
        "www.a.org",
    ]
    no_b = keep_messages(MessageFilter(exclude_senders=("@b:hs",)), window, None)
    assert [m["sender"] for m in no_b] == ["@a:hs", "@a:hs"]
    assert keep_messages(MessageFilter(in_thread=True), window, None) == ()
    assert len(keep_messages(MessageFilter(in_thread=True), window, "$root")) == 3
    assert keep_messages(MessageFilter(in_thread=False), window, "$root") == ()
    assert not has_link("example dot org")


def test_has_media_keeps_messages_of_any_kind_asked() -> None:
    """`has:image` keeps images only (a message's msgtype; absent: text); several kinds keep a
    message having any of them, `has:link` included; an unknown kind names the field."""
    image, file = _m("h.jpg — the hinge", msgtype="m.image"), _m("b.xlsx", msgtype="m.file")
    link, text = _m("see https://x.org"), _m("the hinge again")
    window = [image, file, link, text]
    assert keep_messages(MessageFilter.build(has=["image"]), window, None) == (image,)
    assert keep_messages(MessageFilter.build(has=["file"], has_link=True), window, None) == (
        file,
        link,
    )
    assert keep_messages(MessageFilter.build(has=["video", "audio"]), window, None) == ()
    assert MessageFilter.build(has=["link"]) == MessageFilter.build(has_link=True)
    with pytest.raises(QueryError, match="has: takes link, file, image, video, audio"):
        MessageFilter.build(has=["photo"])


def test_mentions_reads_m_mentions_else_the_text() -> None:
    """`m.mentions` decides where the client set it (even empty); else mxid or display name."""
    assert mentioned("@bob:hs", "hi", ["@bob:hs"])
    assert not mentioned("@bob:hs", "@bob:hs look", [])  # the client said: nobody
    assert mentioned("@bob:hs", "ping @bob:hs please", None)
    assert mentioned("@bob:hs", "Bob Smith: look at this", None, ["Bob Smith"])
    assert not mentioned("@bob:hs", "bobsleigh", None, ["Bob"])
    flt = MessageFilter(mentions=("@bob:hs",)).with_names({"@bob:hs": ("Bob",)})
    window = [_m("bob: see this"), _m("hi all", mentions=["@bob:hs"]), _m("x", mentions=[])]
    assert len(keep_messages(flt, window, None)) == 2


def test_filter_and_query_bounds_name_the_field() -> None:
    """Too many exclusions, a bad sort or offset, a two-letter prefix: refused, field named."""
    with pytest.raises(QueryError, match="exclude"):
        MessageFilter.build(exclude_words=[f"w{i}" for i in range(9)])
    with pytest.raises(QueryError, match="sort"):
        SearchQuery.build(["x"], sort="oldest")
    with pytest.raises(QueryError, match="offset"):
        SearchQuery.build(["x"], offset=-1)
    with pytest.raises(QueryError, match="texts: word\\* needs at least 3"):
        SearchQuery.build(["ba*"])


def test_prefix_expands_against_the_words_said_bounded() -> None:
    """`word*` stands for the room's own words starting so, most frequent first, capped."""
    assert prefixes("backup* now") == ("backup",) and plain_text("backup* now") == "backup now"
    assert prefixes("**bold** 5*") == () and plain_text("**bold**") == "**bold**"
    said = Counter({"backups": 3, "backup": 5, "backend": 1, "back": 9, "feedback": 4})
    assert expand_prefix("backu", said) == ["backup", "backups"]
    many = Counter({f"backup{i}": 1 for i in range(40)})
    assert len(expand_prefix("backup", many)) == 16


def test_match_words_keeps_the_messages_holding_every_word_of_a_text() -> None:
    """`match: words` (issue 49): a message is kept when it holds each word of one text, in any
    case, an identifier by its parts too, a `word*` by its start; the others are dropped."""
    said = [
        _m("the PX-4471 Gasket is cracked"),
        _m("the PX-4471 order arrived"),
        _m("a gasketed px lid"),
        _m("order 4471 for the pump"),
    ]
    words = replace(MessageFilter(), holding=(Terms.of("px-4471 gasket"),))
    assert [m["body"] for m in keep_messages(words, said, None)] == [said[0]["body"]]
    stems = replace(MessageFilter(), holding=(Terms.of("px gask*"),))
    kept = [m["body"] for m in keep_messages(stems, said, None)]
    assert kept == [said[0]["body"], said[2]["body"]]  # `px` and a word starting `gask`
    either = replace(MessageFilter(), holding=(Terms.of("gasket"), Terms.of("4471 pump")))
    assert [m["body"] for m in keep_messages(either, said, None)] == [
        said[0]["body"],
        said[3]["body"],
    ]
    with pytest.raises(QueryError) as e:
        SearchQuery.build(["gasket"], match="exact")
    assert e.value.field == "match"
