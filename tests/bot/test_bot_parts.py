"""The bot's parts without a homeserver: the appservice edge, scheduler, rate limit, replies."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.chat.commands.records import PinCommand
from bot.chat.incoming import BoundedSeen, RateLimit, incoming
from bot.chat.pinboard import Pin
from bot.chat.pins import markers, pin_target
from bot.chat.replies import (
    NOTE_WIDTH,
    REPLY_BUDGET,
    Part,
    PinsView,
    ReplyTo,
    SearchView,
    content_size,
    fit_reply,
    matrix_json,
    pins_reply,
    scan_sentence,
    search_reply,
    text_reply,
)
from bot.chat.roomlog import RoomLog, ScanInfo, TimelineItem, current_body
from bot.service.appservice import AppserviceServer
from bot.service.scheduler import RefreshScheduler
from ingest.rules.events import typed_text
from ingest.search.hits import Hit, SearchResult
from ingest.search.permalink import permalink
from ingest.types import RoomID
from tests.bot.service.http_api.test_server import raw_request

TOKEN = "hs-secret"
BOT = "@muninn:x"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sink:
    def __init__(self) -> None:
        self.batches: list[list[Mapping[str, Any]]] = []
        self.full = False

    def __call__(self, events: Sequence[Mapping[str, Any]]) -> bool:
        if self.full:
            return False
        self.batches.append(list(events))
        return True


@pytest_asyncio.fixture
async def edge() -> AsyncIterator[tuple[AppserviceServer, Sink, str]]:
    sink = Sink()
    port = _port()
    server = AppserviceServer(TOKEN, sink, host="127.0.0.1", port=port, seen_capacity=8)
    await server.start()
    try:
        yield server, sink, f"http://127.0.0.1:{port}"
    finally:
        await server.stop()


async def _put(url: str, txn: str, events: list[dict[str, Any]], **kw: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as s,
        s.put(f"{url}/_matrix/app/v1/transactions/{txn}", json={"events": events}, **kw) as r,
    ):
        return r.status, await r.json()


def _auth(token: str = TOKEN) -> dict[str, Any]:
    return {"headers": {"Authorization": f"Bearer {token}"}}


EVENT = {"event_id": "$a", "type": "m.room.message", "room_id": "!r", "content": {}}


async def test_appservice_duplicate_transaction_is_processed_once(edge: Any) -> None:
    """The same transaction pushed twice reaches the queue once; both answers are 200 {}."""
    _, sink, url = edge
    assert await _put(url, "1", [EVENT], **_auth()) == (200, {})
    assert await _put(url, "1", [EVENT], **_auth()) == (200, {})
    assert len(sink.batches) == 1


async def test_appservice_reused_txn_id_with_new_events_is_processed(edge: Any) -> None:
    """Synapse on SQLite restarts txn ids at 1: same id, other events, is a new transaction."""
    _, sink, url = edge
    await _put(url, "1", [EVENT], **_auth())
    await _put(url, "1", [{**EVENT, "event_id": "$b"}], **_auth())
    assert [b[0]["event_id"] for b in sink.batches] == ["$a", "$b"]


@pytest.mark.parametrize(
    ("kw", "status", "errcode"),
    [
        ({}, 401, "M_UNAUTHORIZED"),
        ({"headers": {"Authorization": "Bearer "}}, 401, "M_UNAUTHORIZED"),
        (_auth("wrong"), 403, "M_FORBIDDEN"),
        ({"params": {"access_token": "wrong"}}, 403, "M_FORBIDDEN"),
    ],
    ids=["missing", "empty", "wrong", "wrong-legacy"],
)
async def test_appservice_rejects_bad_tokens(
    edge: Any, kw: dict[str, Any], status: int, errcode: str
) -> None:
    """The spec's answers: no hs_token 401 M_UNAUTHORIZED, a wrong one 403 M_FORBIDDEN; nothing
    queued either way."""
    _, sink, url = edge
    got, body = await _put(url, "9", [EVENT], **kw)
    assert (got, body["errcode"]) == (status, errcode)
    assert sink.batches == []


async def test_appservice_token_that_is_not_utf8_is_forbidden_not_a_crash(edge: Any) -> None:
    """Hostile bytes in the Authorization header get 403 M_FORBIDDEN, not a 500."""
    _, sink, url = edge
    answer = await raw_request(
        int(url.rsplit(":", 1)[1]),
        b"PUT /_matrix/app/v1/transactions/7 HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\xc3",
        b'{"events": []}',
    )
    assert answer.startswith(b"HTTP/1.1 403 ") and b"M_FORBIDDEN" in answer, answer[:200]
    assert sink.batches == []


async def test_appservice_accepts_the_legacy_query_token(edge: Any) -> None:
    _, sink, url = edge
    assert (await _put(url, "2", [EVENT], params={"access_token": TOKEN}))[0] == 200
    assert len(sink.batches) == 1


async def test_appservice_full_queue_is_not_acknowledged(edge: Any) -> None:
    """A full queue answers 503 and forgets the id, so Synapse's retry is processed."""
    _, sink, url = edge
    sink.full = True
    assert (await _put(url, "3", [EVENT], **_auth()))[0] == 503
    sink.full = False
    assert (await _put(url, "3", [EVENT], **_auth()))[0] == 200
    assert len(sink.batches) == 1


async def test_appservice_ping_and_queries(edge: Any) -> None:
    """Ping answers {}; user and room queries are 404 (Muninn creates nothing on demand)."""
    _, _, url = edge
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/_matrix/app/v1/ping", json={}, **_auth()) as r:
            assert r.status == 200
        async with s.get(f"{url}/_matrix/app/v1/users/@x:y", **_auth()) as r:
            assert r.status == 404
        async with s.post(f"{url}/_matrix/app/v1/ping", json={}) as r:
            assert r.status == 401


def test_bounded_seen_forgets_the_oldest() -> None:
    seen = BoundedSeen(3)
    for key in "abcd":
        seen.add(key)
    assert "a" not in seen and "d" in seen and len(seen) == 3


# ---------------------------------------------------------------- scheduler


async def test_scheduler_debounces_wakeups_into_one_pass() -> None:
    """Wake-ups within the debounce window become one refresh of all those rooms."""
    calls: list[Sequence[RoomID] | None] = []

    async def refresh(rooms: Sequence[RoomID] | None) -> None:
        calls.append(rooms)

    sched = RefreshScheduler(refresh, debounce=0.05, interval=3600, full_at_start=False)
    task = asyncio.create_task(sched.run())
    try:
        sched.wake(RoomID("!b"))
        sched.wake(RoomID("!a"))
        await asyncio.wait_for(sched.settle([RoomID("!a")]), 2)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert calls == [["!a", "!b"]]


async def test_scheduler_retries_a_failed_pass() -> None:
    """A failing refresh is logged and retried; the scheduler keeps running."""
    from ingest.errors import MatrixUnavailable

    calls: list[Sequence[RoomID] | None] = []

    async def refresh(rooms: Sequence[RoomID] | None) -> None:
        calls.append(rooms)
        if len(calls) == 1:
            raise MatrixUnavailable("down")

    sched = RefreshScheduler(refresh, debounce=0.01, interval=3600, full_at_start=False)
    sched._backoff = lambda: 0.01  # type: ignore[method-assign]
    task = asyncio.create_task(sched.run())
    try:
        sched.wake(RoomID("!a"))
        for _ in range(200):
            if len(calls) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert calls[:2] == [["!a"], ["!a"]]


async def test_scheduler_stops_when_a_room_changes_as_it_is_stopped() -> None:
    """Regression (a hung CI run): `stop()` cancelled the scheduler in the same loop turn as a
    wake-up, and Python 3.11's `asyncio.wait_for` returned the wake-up and dropped the
    cancellation, so the task waited again and `muninn run` never finished stopping."""

    async def refresh(rooms: Sequence[RoomID] | None) -> None:
        pass

    sched = RefreshScheduler(refresh, debounce=3600, interval=3600, full_at_start=False)
    task = asyncio.create_task(sched.run())
    await asyncio.sleep(0.01)  # the task now waits for a change
    sched.wake(RoomID("!a"))
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=2)
    assert done == {task}, "the scheduler swallowed its cancellation and kept waiting"
    assert task.cancelled()


# ---------------------------------------------------------------- manners


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


# ---------------------------------------------------------------- replies and folds


def _hit(body: str) -> Hit:
    message = {"event_id": "$e", "sender": "@eve:x", "ts": 1_700_000_000_000, "body": body}
    return Hit("p", "!r", "#r:x", None, "$e", "$e", ("$e",), (message,), 0.5, "https://l", "$e")


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


def test_text_reply_is_a_plain_reply() -> None:
    content = text_reply(ReplyTo("!r", "$cmd"), "usage: <x>")
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": "$cmd"}}
    assert content["msgtype"] == "m.notice" and "&lt;x&gt;" in content["formatted_body"]


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


@pytest.mark.parametrize("size", [70_000, 10_000_000])
def test_every_reply_fits_the_budget(size: int) -> None:
    """Any reply — a long refusal, a notice whose head alone is too large — stays within the
    budget; one that cannot fit says so instead of failing to send."""
    reply_to = ReplyTo("!r", "$cmd")
    text = text_reply(reply_to, "x" * size, results_kind="error")
    assert content_size(text) <= REPLY_BUDGET
    assert text["org.muninn.results"] == {"error": text["body"]}
    content = fit_reply(reply_to, Part("y" * size, "y" * size), results={"error": "y"})
    assert content_size(content) <= REPLY_BUDGET
    assert "too large to send" in content["body"]
    assert content["org.muninn.results"]["error"] == content["body"]


def test_matrix_json_has_no_floats() -> None:
    """Canonical JSON forbids floats: scores travel as decimal strings."""
    assert matrix_json({"score": 0.5, "n": [1, 0.25]}) == {"score": "0.5", "n": [1, "0.25"]}


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
    # The room log keeps what the sender typed, as `bot.chat.roomlog` builds its items.
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


def _message(event_id: str, sender: str, body: str, edits: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if edits is not None:
        content["m.new_content"] = {"msgtype": "m.text", "body": body.removeprefix("* ")}
        content["m.relates_to"] = {"rel_type": "m.replace", "event_id": edits}
    return {
        "type": "m.room.message",
        "event_id": event_id,
        "sender": sender,
        "origin_server_ts": 1,
        "room_id": "!r",
        "content": content,
    }


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


def test_within_text_keeps_the_newest_events_up_to_the_text_bound() -> None:
    """Regression: a read kept 2,048 events whatever their size (2,048 × 16 KB cost 6.4 s of
    scrubbing per command). It keeps the newest events within the text bound and says so."""
    from bot.chat.recent import within_text

    big = [_message(f"$m{i}", "@a:x", "lorem ipsum " * 1_400) for i in range(2048)]
    kept, cut = within_text(big, 100_000)  # each body kept to its first 2,000 characters
    assert [e["event_id"] for e in kept] == [f"$m{i}" for i in range(50)] and cut
    assert within_text(kept, 100_000) == (kept, False)
    log = RoomLog(RoomID("!r"), kept, 2048, cut)
    assert scan_sentence(log.scan()).startswith("scanned the latest 50 events")
    assert "as much text as one command reads" in scan_sentence(log.scan())
    assert scan_sentence(RoomLog(RoomID("!r"), kept, 2048).scan()) == (
        "scanned the whole room (50 events)"
    )


def test_a_message_is_kept_to_its_share_of_the_read_cut_at_a_word() -> None:
    """Regression (issue 37 item 9): 17 messages of 62 KB filled the 1,000,000-character read,
    emptying the pinboard and what `!search` scans. Each text field is kept to its first
    `FIELD_SHARE` characters, cut at a word's end (a token across the cut is dropped whole,
    never shown in part); a short event is the same object."""
    from bot.chat.recent import FIELD_SHARE, SCAN_TEXT, within_text

    token = "ghp_" + "a1B2c3D4e5" * 4
    body = "word " * (FIELD_SHARE // 5 - 2) + "xx " + token + " tail " * 12_000
    huge = [_message(f"$h{i}", "@a:x", body) for i in range(17)]
    small = [_message(f"$s{i}", "@a:x", "a pinned plan") for i in range(2000)]
    kept, cut = within_text(huge + small, SCAN_TEXT)
    assert len(kept) == 2017 and not cut
    cut_body = kept[0]["content"]["body"]
    assert len(cut_body) <= FIELD_SHARE and cut_body.endswith("xx") and "ghp_" not in cut_body
    assert kept[17] is small[0]


def test_recent_events_merge_applies_new_redactions() -> None:
    """Extending a room's cached events: a redaction among the new ones empties its target."""
    from bot.chat.recent import _merge

    cached = [
        {"event_id": "$b", "type": "m.room.message", "content": {"body": "secret plan"}},
        {"event_id": "$a", "type": "m.room.message", "content": {"body": "hello"}},
    ]
    new = [{"event_id": "$r", "type": "m.room.redaction", "redacts": "$b", "content": {}}]
    merged = _merge(new, cached)
    assert [e["event_id"] for e in merged] == ["$r", "$b", "$a"]
    assert merged[1]["content"] == {} and "redacted_because" in merged[1]["unsigned"]
    assert merged[2]["content"] == {"body": "hello"}


def test_pinned_message_body_is_scrubbed() -> None:
    """A pinned message holding a secret is shown on the board without it."""
    from bot.chat.pins import _body

    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    item = TimelineItem("$p", "@a:x", 1, f"deploy key {secret}", None, {"body": "x"}, False)
    shown = _body(item)
    assert secret not in shown and "[redacted:" in shown


def test_puppet_in_events_finds_a_sender_who_left() -> None:
    """Rule 4 by sender: a puppet's message in the log refuses the room, members aside."""
    from ingest.config import ScopeConfig
    from ingest.rules.scope import RoomScope, puppet_in_events

    scope = RoomScope.from_config(ScopeConfig(), "x")
    plain = [{"type": "m.room.message", "sender": "@a:x"}]
    assert puppet_in_events(plain, scope) is None
    bridged = [*plain, {"type": "m.room.message", "sender": "@discord_42:x"}]
    assert puppet_in_events(bridged, scope) == "@discord_42:x"
    member = [{"type": "m.room.member", "sender": "@a:x", "state_key": "@_discord_7:x"}]
    assert puppet_in_events(member, scope) == "@_discord_7:x"


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
