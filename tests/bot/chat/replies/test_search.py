"""The `!search` reply: quoted text escaped and scrubbed, the command room's JSON in budget."""

from __future__ import annotations

from bot.chat.content import ReplyTo, content_size
from bot.chat.replies import REPLY_BUDGET, SearchView, search_reply
from ingest.search.hits import Hit, SearchResult
from ingest.search.logs.roomlog import ScanInfo


def _hit(body: str, msgtype: str = "m.text") -> Hit:
    message = {
        "event_id": "$e",
        "sender": "@eve:x",
        "ts": 1_700_000_000_000,
        "body": body,
        "msgtype": msgtype,
    }
    return Hit("p", "!r", "#r:x", None, "$e", "$e", ("$e",), (message,), 0.5, "https://l", "$e")


def test_search_reply_shows_a_media_hit_as_its_filename_and_caption() -> None:
    """A file, image, video or audio result reads `📎 filename — caption`; text has no clip,
    and the command room's JSON keeps each message's msgtype."""
    body = "quarterly-budget-2026.xlsx — the budget spreadsheet"
    for msgtype in ("m.file", "m.image", "m.video", "m.audio"):
        result = SearchResult(hits=[_hit(body, msgtype)], retrievers=["lexical"])
        view = SearchView(result, ("numbers",), results_json=True)
        content = search_reply(ReplyTo("!r", "$cmd"), view)
        assert f"📎 {body}" in content["body"]
        assert f"📎 <bdi>{body}</bdi>" in content["formatted_body"]
        [message] = content["org.muninn.results"]["hits"][0]["messages"]
        assert message["msgtype"] == msgtype
    text = search_reply(ReplyTo("!r", "$cmd"), SearchView(SearchResult(hits=[_hit(body)]), ()))
    assert "📎" not in text["body"]


def test_search_reply_escapes_and_neutralises() -> None:
    """Quoted HTML is escaped, @room broken, no mentions; a thread command gets a thread reply."""
    result = SearchResult(hits=[_hit("<script>x</script> @room ping")], retrievers=["lexical"])
    view = SearchView(
        result, ("ping",), scans=[ScanInfo(10, 50, None)], names={"!r": {"@eve:x": "<Eve>"}}
    )
    content = search_reply(ReplyTo("!r", "$cmd", thread_root="$root"), view)
    assert (
        "<script>" not in content["formatted_body"]
        and "&lt;script&gt;" in content["formatted_body"]
    )
    assert "&lt;Eve&gt;" in content["formatted_body"]
    assert "@room" not in content["body"]
    assert content["m.mentions"] == {}
    assert content["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$cmd"},
    }
    assert "scanned the whole room (10 events)" in content["body"]


def test_search_reply_scrubs_the_echoed_query() -> None:
    """The reply repeats the query to the room: a token pasted into it is not repeated."""
    secret = "syt_c2VjcmV0_abcdefghijklmnopqrst_1a2b3c"
    for view in (
        SearchView(SearchResult(), (f"why is {secret} refused",)),
        SearchView(SearchResult(), ("x",), pattern=f"{secret}.*"),
    ):
        content = search_reply(ReplyTo("!r", "$cmd"), view)
        shown = content["body"] + content["formatted_body"]
        assert secret not in shown and "[redacted:" in shown


def _big_hit(n: int, size: int) -> Hit:
    messages = tuple(
        {"event_id": f"$e{n}.{m}", "sender": "@eve:x", "ts": 1_700_000_000_000, "body": body}
        for m in range(3)
        for body in [f"kiwi {n}.{m} " + "<&>" * (size // 3)]
    )
    ids = tuple(str(m["event_id"]) for m in messages)
    link = f"https://matrix.to/#/!r/{ids[0]}"
    return Hit(f"p{n}", "!r", "#r:x", None, ids[0], ids[-1], ids, messages, 0.5, link, ids[0])


def test_search_reply_in_the_command_room_fits_the_budget() -> None:
    """Regression: `org.muninn.results` carried every body of every hit (118 KB at limit 50),
    over Synapse's 64 KiB event limit. Bodies are cut first, then hits left out, and both the
    text and the JSON say what was cut."""
    result = SearchResult(hits=[_big_hit(n, 8000) for n in range(50)], retrievers=["lexical"])
    content = search_reply(ReplyTo("!r", "$cmd"), SearchView(result, ("kiwi",), results_json=True))
    assert content_size(content) <= REPLY_BUDGET
    results = content["org.muninn.results"]
    shown = len(results["hits"])
    assert 10 <= shown < 50
    assert results["truncated"] == {"items_left_out": 50 - shown, "texts_shortened": shown * 3}
    assert all(m["body"].endswith("…") for h in results["hits"] for m in h["messages"])
    assert f"… {50 - shown} more not shown" in content["body"]
    assert content["body"].count("https://matrix.to/#/!r/") == shown


def test_search_reply_under_the_budget_is_left_whole() -> None:
    """A reply that fits is not touched: no cut, no `truncated`."""
    result = SearchResult(hits=[_big_hit(n, 300) for n in range(5)], retrievers=["lexical"])
    content = search_reply(ReplyTo("!r", "$cmd"), SearchView(result, ("kiwi",), results_json=True))
    assert "truncated" not in content["org.muninn.results"]
    assert [m["body"] for m in content["org.muninn.results"]["hits"][0]["messages"]] == [
        m["body"] for m in result.hits[0].messages
    ]


def test_a_page_of_weaker_matches_says_so_and_the_one_before_it_too() -> None:
    """A person's page ending where the close matches end says the next page is of weaker
    matches; that page's head says none of its results matched closely (rule 22c)."""
    close = SearchResult(hits=[_hit("parking is behind the bakery")], next_offset=1)
    close.weaker_next, close.remaining = True, 7
    body = search_reply(ReplyTo("!r", "$cmd"), SearchView(close, ("car",), more=7))["body"]
    assert body.startswith("1 result for “car”") and "at least 7 weaker matches: !more" in body
    weaker = SearchResult(hits=[_hit("leave the soldering irons off")], weaker=True)
    body = search_reply(ReplyTo("!r", "$cmd"), SearchView(weaker, ("car",), first=2))["body"]
    assert body.startswith("Weaker match 2 for “car”: none of these matched closely")
    assert "no more results" in body


def test_every_page_of_a_time_ordered_list_says_so_and_a_page_of_one_is_one_result() -> None:
    """Issue 44, regression: a later page of one result reads "Result 5" (not "Results
    5–5"), and every page of a `sort:recent` list says "sorted newest first", a page of one
    past the first too; the first page of one result needs no order."""
    one = SearchResult(hits=[_hit("the kiln is on")], sort="recent")
    view = SearchView(one, ("kiln",), first=5)
    body = search_reply(ReplyTo("!r", "$cmd"), view)["body"]
    assert body.startswith("Result 5 for “kiln”, sorted newest first\n")
    body = search_reply(ReplyTo("!r", "$cmd"), SearchView(one, ("kiln",)))["body"]
    assert body.startswith("1 result for “kiln”\n")
    relevance = SearchResult(hits=[_hit("the kiln is on")])
    body = search_reply(ReplyTo("!r", "$cmd"), SearchView(relevance, ("kiln",), first=5))["body"]
    assert body.startswith("Result 5 for “kiln”\n")
