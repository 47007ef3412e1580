"""`ingest.search.revalidate`: what changed on the homeserver since indexing never reaches a hit.

Against the real Synapse: a room is indexed by the real writer, then changed without a refresh
(an edit, a redaction), then searched in process through the real `Searcher` with the product's
`LiveCheck`, every way it can check: reading the room's tail since the cursor (one or two
requests a room), from a log of the room the caller read for the query (the bot's read for its
command: no request of its own) and, when neither can, fetching each cited event
(`tail_pages=0`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ingest.index.records import CURSOR_PREFIX, Tombstone, cursor_mark
from ingest.matrix import Page
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import RoomScope
from ingest.search import Searcher
from ingest.search.hits import SearchResult
from ingest.search.logs.request import LogQuery, RoomLogs, RoomView
from ingest.search.logs.roomlog import RoomLog
from ingest.search.query import SearchQuery
from ingest.search.revalidate import LiveCheck
from ingest.search.tails import Tail, current, read_tail, tail_since
from ingest.types import RoomID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import CountingReader, Indexer, reader_config, shared_embedder, utc_ms

MODES = {"tail": 2, "room log": 2, "each event": 0}  # LiveCheck(tail_pages=…)
LOG_BOUND = 2048  # the bot's default `transcript_limit`
BOT = "@muninn:muninn.test"  # the command's bot: none of the room's messages are its own


@dataclass
class Room:
    indexer: Indexer
    reader: CountingReader
    room_id: str
    messages: list[str]  # event ids, in the order sent


@pytest_asyncio.fixture(loop_scope="session")
async def room(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> AsyncIterator[Room]:
    """Five one-message windows about a heron (a day apart), indexed; nothing refreshed after."""
    reader_user = await hs.register()
    room_id = await hs.fresh_room(alice)
    for user in (seeder, reader_user):
        await user.join(room_id)
    texts = [
        "the heron nest code is 5521",
        "a heron stood in the reeds",
        "the heron flew over the mill",
        "grey heron eggs hatched",
        "the heron left for the coast",
    ]
    sent = [
        await seeder.send_text(room_id, t, ts=utc_ms(f"2024-08-0{i + 1}T10:00"))
        for i, t in enumerate(texts)
    ]
    cfg = reader_config(hs, reader_user, tmp_path)
    indexer = Indexer(cfg)
    await indexer.refresh()
    assert len(await indexer.points()) == len(texts)
    reader = CountingReader.counting(cfg)
    try:
        yield Room(indexer, reader, room_id, sent)
    finally:
        await reader.close()
        await indexer.close()


def searcher(room: Room, mode: str) -> Searcher:
    scope = RoomScope.from_config(room.indexer.cfg.scope, room.indexer.cfg.homeserver.server_name)
    check = LiveCheck(room.reader, RoomCache(room.reader, scope), tail_pages=MODES[mode])
    return Searcher(
        room.indexer.store, shared_embedder(), server_name="muninn.test", live_check=check
    )


async def search(room: Room, mode: str, text: str, limit: int = 5) -> SearchResult:
    query = SearchQuery.build([text], room_ids=[room.room_id], limit=limit)
    check = searcher(room, mode)
    logs = None
    if mode == "room log":  # the writer's marks, then the log read after the change: the bot
        logs = await log_reads(room, check, LOG_BOUND, text, limit)
    room.reader.paths.clear()
    room.reader.queries.clear()
    result = await check.search(query, room_logs=logs)
    fetched = [p for p in room.reader.paths if "/event/" in p]
    assert (fetched == []) == (mode != "each event"), room.reader.paths  # the way asked for
    assert (_tail_tokens(room.reader) == []) == (mode != "tail"), room.reader.paths
    return result


async def log_reads(
    room: Room, check: Searcher, bound: int, text: str, limit: int = 10
) -> RoomLogs:
    """As the bot reads for a command: the writer's marks first, then the room's log."""
    marks = await check.marks()
    events = await room.reader.latest(room.room_id, bound)
    log = RoomLog(RoomID(room.room_id), events, bound)
    asked = LogQuery(texts=(text,), limit=limit)
    return RoomLogs(asked, [RoomView(log, None)], BOT, "!", marks=marks)


def shown(result: SearchResult) -> str:
    return " ".join(str(m["body"]) for h in result.hits for m in h.messages)


@pytest.mark.parametrize("mode", MODES)
async def test_a_message_edited_since_indexing_is_not_shown_with_its_old_words(
    room: Room, seeder: MatrixUser, mode: str
) -> None:
    """Index, edit, (no refresh), search: the old words are not shown, and the window the
    index ranked for them is dropped and counted, not shown with the new text (which would
    still tell the asker those words were there)."""
    before = await search(room, mode, "heron nest code 5521")
    assert "5521" in shown(before)
    await seeder.send_edit(room.room_id, room.messages[0], "the heron nest is private now")
    after = await search(room, mode, "heron nest code 5521")
    assert "5521" not in shown(after)
    assert after.dropped_stale == 1
    assert len(after.hits) == 4  # the other windows stand


@pytest.mark.parametrize("mode", MODES)
async def test_another_senders_edit_hides_nothing(
    room: Room, alice: MatrixUser, mode: str
) -> None:
    """By the writer's rules an edit counts only from the message's author: anyone else's
    `m.replace` neither changes the text nor can hide a hit from others."""
    await alice.send_edit(room.room_id, room.messages[1], "alice rewrites the reeds")
    result = await search(room, mode, "heron stood in the reeds")
    assert "a heron stood in the reeds" in shown(result)
    assert result.dropped_stale == 0


@pytest.mark.parametrize("mode", MODES)
async def test_a_redaction_since_indexing_drops_its_window(
    room: Room, seeder: MatrixUser, mode: str
) -> None:
    await seeder.redact(room.room_id, room.messages[2])
    result = await search(room, mode, "heron flew over the mill")
    assert "mill" not in shown(result)
    assert result.dropped_stale == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_redacted_edit_since_indexing_drops_its_window(
    room: Room, seeder: MatrixUser, mode: str
) -> None:
    """The applied edit redacted after indexing: its text is gone, though the message stands."""
    edit = await seeder.send_edit(room.room_id, room.messages[3], "grey heron chicks fledged")
    await room.indexer.refresh()
    assert "fledged" in shown(await search(room, mode, "heron chicks fledged"))
    await seeder.redact(room.room_id, edit)
    result = await search(room, mode, "heron chicks fledged")
    assert "fledged" not in shown(result)
    assert result.dropped_stale == 1


async def test_a_reply_is_revalidated_in_one_or_two_requests(room: Room) -> None:
    """Five hits of one room: the tail since the cursor, read in at most two requests, and no
    `GET /event` (three per hit before)."""
    result = await search(room, "tail", "heron")
    assert len(result.hits) == 5
    events = [p for p in room.reader.paths if "/event/" in p]
    messages = [p for p in room.reader.paths if p.endswith("/messages")]
    assert events == [] and 1 <= len(messages) <= 2, room.reader.paths


async def test_a_check_kept_between_replies_goes_on_from_its_last_read(
    room: Room, seeder: MatrixUser
) -> None:
    """One `LiveCheck` for every reply, as the service keeps it, and no refresh between: the
    next reply reads the tail on from where the last one stopped, not again from the cursor,
    and a redaction and an edit made in between still drop their windows."""
    check = searcher(room, "tail")
    query = SearchQuery.build(["heron"], room_ids=[room.room_id], limit=5)
    await seeder.send_text(room.room_id, "unindexed chatter after the cursor")
    assert len((await check.search(query)).hits) == 5
    stopped = _tail_tokens(room.reader)[-1]  # the read that found nothing newer
    await seeder.redact(room.room_id, room.messages[2])
    await seeder.send_edit(room.room_id, room.messages[0], "the heron nest is private now")
    room.reader.paths.clear()
    room.reader.queries.clear()
    result = await check.search(query)
    assert "mill" not in shown(result) and "5521" not in shown(result)
    assert result.dropped_stale == 2 and len(result.hits) == 3
    assert _tail_tokens(room.reader)[0] == stopped


async def test_a_tail_read_while_replies_arrive_is_read_whole_not_event_by_event(
    room: Room, seeder: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: in a burst, the replies sent while one reply's tail is read make every read
    find something newer; the read gave up after two and fetched each cited event instead (six
    requests a reply at eight in flight, and Synapse's CPU a command ×2.5). Here an event
    arrives after each of the first three reads, the first a redaction: the tail is still read,
    nothing is fetched event by event, and the redacted window is dropped."""
    arrivals = [
        lambda: seeder.redact(room.room_id, room.messages[1]),
        lambda: seeder.send_text(room.room_id, "a reply sent meanwhile"),
        lambda: seeder.send_text(room.room_id, "another reply sent meanwhile"),
    ]
    read = room.reader.page_after

    async def arriving(room_id: str, token: str, **kwargs: Any) -> Page:
        page = await read(room_id, token, **kwargs)
        if arrivals:
            await arrivals.pop(0)()
        return page

    await seeder.send_text(room.room_id, "unindexed chatter after the cursor")
    monkeypatch.setattr(room.reader, "page_after", arriving)
    result = await search(room, "tail", "heron")  # asserts no `GET /event`
    assert "reeds" not in shown(result)
    assert result.dropped_stale == 1 and len(result.hits) == 4


@pytest.mark.parametrize("gap", ["log too short", "cursor without a mark"])
async def test_a_room_log_that_misses_the_writers_mark_reads_the_tail_instead(
    room: Room, seeder: MatrixUser, gap: str
) -> None:
    """A log that does not reach back to the writer's newest walked event (more was said
    since than it holds), or a cursor saved before the writer recorded that event (an older
    collection): what lies between cannot be told from the log, so the tail is read as
    before, and the window redacted since indexing is still dropped."""
    await seeder.redact(room.room_id, room.messages[2])
    for n in range(3):
        await seeder.send_text(room.room_id, f"unindexed chatter {n}")
    bound = LOG_BOUND
    if gap == "log too short":
        bound = 2  # two of the four events since the writer's walk
    else:
        col = await room.indexer.collection()
        key = CURSOR_PREFIX + room.room_id
        record = dict(col.get_meta(key) or {})
        assert record.pop("last_event_id") in room.messages  # the writer records its mark
        col.put_meta(key, record)
    check = searcher(room, "room log")
    logs = await log_reads(room, check, bound, "heron flew over the mill")
    room.reader.paths.clear()
    room.reader.queries.clear()
    result = await check.search(
        SearchQuery.build(["heron flew over the mill"], room_ids=[room.room_id]),
        room_logs=logs,
    )
    assert "mill" not in shown(result) and result.dropped_stale == 1
    assert _tail_tokens(room.reader), room.reader.paths


async def test_a_writer_pass_between_the_log_read_and_the_search_reads_no_tail(
    room: Room, seeder: MatrixUser
) -> None:
    """Regression (a burst): the writer walked on between the command's log read and the
    search, so the mark in the cursor read then was newer than anything in the log, and the
    tail was read after all. The mark taken before the log read is in the log: no tail
    read."""
    await seeder.redact(room.room_id, room.messages[2])
    check = searcher(room, "room log")
    logs = await log_reads(room, check, LOG_BOUND, "heron")
    await seeder.send_text(room.room_id, "said after the log was read")
    await room.indexer.refresh()  # the cursor's mark moves past the log's newest event
    room.reader.paths.clear()
    room.reader.queries.clear()
    query = SearchQuery.build(["heron"], room_ids=[room.room_id])
    result = await check.search(query, room_logs=logs)
    assert _tail_tokens(room.reader) == [], room.reader.paths
    assert "mill" not in shown(result) and sum(h.close for h in result.hits) == 4


def test_tail_since_reads_only_what_follows_the_mark() -> None:
    """Pure: the redactions and edits newer than the writer's mark, none older (the index
    holds those), nothing of other event types; no mark, or a log without it, tells nothing."""

    def event(event_id: str, kind: str, **content: object) -> dict[str, object]:
        extra = {"redacts": content["redacts"]} if "redacts" in content else {}
        return {
            "type": kind,
            "event_id": event_id,
            "sender": "@a:x",
            "room_id": "!r:x",
            "origin_server_ts": 1,
            "content": content,
            **extra,
        }

    log = [  # newest first, as a backward read returns them
        event("$new", "m.room.redaction", redacts="$b"),
        event("$topic", "m.room.topic", topic="x"),
        event("$mark", "m.room.message", msgtype="m.text", body="hi"),
        event("$old", "m.room.redaction", redacts="$a"),
    ]
    tail = tail_since(log, "$mark")
    assert tail is not None and tail.redacted == {"$b"}
    assert tail_since(log, "$elsewhere") is None
    assert tail_since(log, None) is None
    assert tail_since(log[:2], "$mark") is None


def test_the_cursor_mark_names_no_redacted_or_purged_message() -> None:
    """Pure: the writer's mark is the page's newest event, unless it is a redacted message or
    inside a purge (the collection keeps nothing of either, not even its id): then an older
    one, or the previous mark."""

    def message(event_id: str, ts: int, redacted: bool = False) -> dict[str, object]:
        content = {} if redacted else {"msgtype": "m.text", "body": "hi"}
        return {
            "type": "m.room.message",
            "event_id": event_id,
            "sender": "@a:x",
            "room_id": "!r:x",
            "origin_server_ts": ts,
            "content": content,
        }

    page = [message("$a", 10), message("$b", 20), message("$c", 30, redacted=True)]
    assert cursor_mark(page, [], "$prev") == "$b"
    purge = Tombstone(RoomID("!r:x"), 15, 25)
    assert cursor_mark(page, [purge], "$prev") == "$a"
    assert cursor_mark(page[1:], [purge], "$prev") == "$prev"
    assert cursor_mark([], [], None) is None


def _tail_tokens(reader: CountingReader) -> list[str]:
    """The `from` of each tail read (`/messages` with a filter), in order."""
    return [str(q["from"]) for q in reader.queries if isinstance(q, dict) and "filter" in q]


def _tail(events: Sequence[dict[str, object]]) -> Tail:
    return read_tail(events)


def test_current_counts_only_a_newer_edit_by_the_author() -> None:
    """Pure: the writer's edit rules decide whether a window is stale."""
    msg = {"event_id": "$m", "sender": "@a:x", "ts": 10, "body": "old words"}
    window = {"room_id": "!r:x", "event_ids": ["$m"], "messages": [msg]}

    def edit(event_id: str, sender: str, ts: int) -> dict[str, object]:
        return {
            "type": "m.room.message",
            "event_id": event_id,
            "sender": sender,
            "room_id": "!r:x",
            "origin_server_ts": ts,
            "content": {
                "msgtype": "m.text",
                "body": "* new words",
                "m.new_content": {"msgtype": "m.text", "body": "new words"},
                "m.relates_to": {"rel_type": "m.replace", "event_id": "$m"},
            },
        }

    assert current(window, _tail([]))
    assert current(window, _tail([edit("$e", "@b:x", 20)]))  # not the author's
    assert not current(window, _tail([edit("$e", "@a:x", 20)]))
    applied = {**msg, "edit_event_id": "$e", "edit_ts": 20}
    edited = {**window, "event_ids": ["$m", "$e"], "messages": [applied]}
    assert current(edited, _tail([edit("$e", "@a:x", 20)]))  # the one applied
    assert not current(edited, _tail([edit("$f", "@a:x", 30)]))
    redaction = {
        "type": "m.room.redaction",
        "event_id": "$r",
        "sender": "@a:x",
        "room_id": "!r:x",
        "origin_server_ts": 40,
        "redacts": "$e",
        "content": {"redacts": "$e"},
    }
    assert not current(edited, _tail([redaction]))  # the applied edit's text is gone
    assert current(window, _tail([redaction]))  # another event's redaction
