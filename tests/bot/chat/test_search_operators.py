"""The chat operators of `!search` (issue 24): parsed once into the typed command, and the
pure pieces the reply and `!more` use."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.chat.commands.grammar import COMMANDS, parse
from bot.chat.commands.records import MoreCommand, SearchCommand, UsageError
from bot.chat.replies.understood import understood
from bot.chat.replies.words import plural, when
from bot.chat.searching import Pages, ShownIds

NOW = int(datetime(2026, 11, 15, 12, 0, tzinfo=UTC).timestamp() * 1000)


def run(body: str, *, in_command_room: bool = False) -> SearchCommand:
    command = parse(body, now_ms=NOW, in_command_room=in_command_room, server_name="hs")
    assert isinstance(command, SearchCommand)
    return command


def test_parse_search_operators_fill_the_typed_filter() -> None:
    """Every operator lands in the one typed record the index and the transcript read."""
    command = run(
        '!search backup* -test -"dry run" -from:@bob has:link -is:thread mentions:carol '
        "sort:recent"
    )
    assert command.texts == ("backup*",)
    flt = command.filter
    assert flt.exclude_words == ("test", "dry run")
    assert flt.exclude_senders == ("@bob:hs",)
    assert flt.has_link and flt.in_thread is False and flt.mentions == ("@carol:hs",)
    assert command.sort == "recent"
    assert run("!search deploy is:thread").filter.in_thread is True


def test_parse_search_has_media_kinds() -> None:
    """`has:file`, `has:image`, `has:video`, `has:audio` beside `has:link`, in any case, into
    the filter's one `has` field; `has_link` still says a link was asked for."""
    flt = run("!search budget has:image HAS:File has:link").filter
    assert flt.has == frozenset({"image", "file", "link"}) and flt.has_link
    only = run("!search hinge has:video has:audio").filter
    assert only.has == frozenset({"video", "audio"}) and not only.has_link
    said = " ".join(understood(run("!search hinge has:image has:audio")))
    assert "only images or audio clips" in said


def test_parse_search_of_operators_alone_lists_the_latest_newest_first() -> None:
    """Issue 44: `from:`, `has:`, `mentions:`, `is:thread` (and `in:` in the command room)
    without words are a search of the latest messages they keep, sorted newest first; a date,
    `-word` or `-is:thread` alone still finds nothing to search for."""
    for body in ("!search from:carol", "!search has:link", "!search mentions:@bob is:thread"):
        command = run(body)
        assert command.texts == () and command.regex is None and command.sort == "recent"
    assert run("!search from:carol").sender == "@carol:hs"
    assert run("!search in:#dev limit:3", in_command_room=True).rooms == ("#dev:hs",)
    for body in ("!search before:7d", "!search -is:thread", "!search sort:recent"):
        with pytest.raises(UsageError, match="nothing to search for"):
            run(body)
    said = " ".join(understood(run("!search from:carol")))
    assert "only the latest messages" in said and "only from @carol:hs" in said


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("!search -backup", "a -word or -from: only leaves messages out"),
        ("!search -from:@bob", "a -word or -from: only leaves messages out"),
        ("!search ba*", "at least 3 characters before the"),
        ("!search x has:photo", "has: takes link, file, image, video or audio"),
        ("!search x is:dm", "is: takes thread"),
        ("!search x sort:oldest", "sort: takes relevance or recent"),
        ("!search x -limit:3", "cannot be negated"),
        ("!search x mentions:nobody@", "mentions: takes @user"),
    ],
)
def test_parse_search_operator_errors_name_why(body: str, problem: str) -> None:
    """A bad operator, or a search of exclusions only, is a usage error saying why."""
    with pytest.raises(UsageError, match=problem):
        run(body)


def test_parse_search_keeps_hyphens_lone_dashes_and_prose_colons_as_text() -> None:
    """`e-mail`, a lone `-` and "is:" with nothing after it are text, not operators."""
    command = run("!search e-mail - outage")
    assert command.texts == ("e-mail - outage",) and not command.filter
    assert run("!search the cause is: dns").texts == ("the cause is: dns",)


def test_more_parses_and_help_search_shows_examples() -> None:
    """`!more` is a command; `!help search` ends with a line of examples and says `!more`."""
    assert parse("!more", now_ms=NOW, in_command_room=False) == MoreCommand()
    text = next(s for s in COMMANDS if s.name == "search").help("!", False)
    assert "e.g. !search backup* -test" in text and "!more" in text
    operators = ("-word", "has:link", "has:image", "has:file", "is:thread", "mentions:@user")
    for operator in (*operators, "sort:recent", "word*"):
        assert operator in text


def test_pages_are_per_asker_room_thread_capped_and_expire() -> None:
    """A page waits for its own asker in its room and thread only, for 10 minutes, and the
    state kept is capped (least recently used out first)."""
    pages = Pages(max_pages=2)
    command = run("!search x")
    pages.remember(("@a", "!r", None), command, ShownIds().adding(["$1"]), 1, 0, more=True)
    assert pages.take(("@b", "!r", None), 0) is None
    assert pages.take(("@a", "!r", "$t"), 0) is None
    page = pages.take(("@a", "!r", None), 599_999)
    assert page is not None and "$1" in page.shown and "$2" not in page.shown
    assert not page.shown.isdisjoint(["$2", "$1"]) and page.shown.isdisjoint(["$2"])
    pages.remember(("@a", "!r", None), command, ShownIds(), 1, 0, more=True)
    assert pages.take(("@a", "!r", None), 600_001) is None  # expired
    for asker in ("@1", "@2", "@3"):
        pages.remember((asker, "!r", None), command, ShownIds(), 1, 0, more=True)
    assert len(pages) == 2 and pages.take(("@1", "!r", None), 0) is None
    pages.remember(("@2", "!r", None), command, ShownIds().adding(["$1"]), 1, 0, more=False)
    for _ in range(2):  # after the last page every `!more` until it expires says it ended
        ended = pages.take(("@2", "!r", None), 0)
        assert ended is not None and ended.ended and len(ended.shown) == 0


def test_zero_hit_reply_says_what_was_searched() -> None:
    """The words kept, the filters and the dates as understood, and what to try."""
    lines = understood(run("!search backup* -test from:@alice after:2026-11-01 has:link"))
    said = " ".join(lines)
    assert "“backup*”" not in said  # the reply's first line quotes the words
    assert said.startswith("Searched: words starting with “backup”")
    assert "leaving out messages with “test”" in said and "only from @alice:hs" in said
    assert "from 2 November 2026 on" in said and "only messages with a link" in said
    assert "Try fewer filters" in said


def test_reply_words_have_real_plurals_and_times_their_zone() -> None:
    """`1 pin`, `2 pins`, `1 weaker match`; a time says it is UTC."""
    assert plural(1, "pin") == "1 pin" and plural(2, "pin") == "2 pins"
    assert plural(1, "weaker match", "weaker matches") == "1 weaker match"
    assert plural(3, "weaker match", "weaker matches") == "3 weaker matches"
    assert when(NOW) == "2026-11-15 12:00 UTC"


def test_http_search_request_carries_the_operators_and_names_bad_fields() -> None:
    """`POST /_muninn/search` takes the CLI's filters as fields (what `muninn search` posts
    while the service holds the store); a bad one is a 400 naming it."""
    from bot.service.http_api.wire import SearchRequest, filter_fields
    from ingest.errors import QueryError
    from ingest.search.filters import MessageFilter

    flt = MessageFilter.build(
        exclude_words=["test"],
        exclude_senders=["@b:hs"],
        has_link=True,
        in_thread=False,
        mentions=["@c:hs"],
        has=["image", "audio"],
    )
    request = SearchRequest.parse({"texts": ["x"], **filter_fields(flt, "recent", 5)})
    assert (request.filter, request.sort, request.offset) == (flt, "recent", 5)
    assert request.filter.has == frozenset({"link", "image", "audio"})
    for body, field in (
        ({"texts": ["x"], "has_link": "yes"}, "has_link"),
        ({"texts": ["x"], "has": ["photo"]}, "has"),
        ({"texts": ["x"], "has": "image"}, "has"),
        ({"texts": ["x"], "offset": "2"}, "offset"),
        ({"texts": ["x"], "exclude": "test"}, "exclude"),
        ({"texts": ["x"], "sort": 3}, "sort"),
    ):
        with pytest.raises(QueryError) as caught:
            SearchRequest.parse(body)
        assert caught.value.field == field


def test_reply_counts_say_1_event_not_1_events() -> None:
    """Regression (issue 25 item 13): "1 events" in the footer of a reply."""
    from bot.chat.replies import scan_sentence
    from ingest.search.logs.roomlog import ScanInfo

    assert scan_sentence(ScanInfo(1, 2048, None)) == "scanned the whole room (1 event)"
