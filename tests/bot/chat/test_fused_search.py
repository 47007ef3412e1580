"""`bot.chat.searching.fused_search`: the bot revalidates exactly the index hits its reply shows.

A real `Searcher` over the real embedded store (hand-made windows, lexical only, so the ranks
are fixed by construction); the homeserver's answer is the `live_check` (a redacted message
here is a window the check refuses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from bot.chat.commands.patterns import PatternTimeout
from bot.chat.commands.records import SearchCommand
from bot.chat.searching import fused_search
from bot.chat.visibility import ANYONE
from bot.errors import CommandError
from ingest.search import Searcher
from ingest.search.hits import SearchResult
from ingest.search.logs.request import RoomView
from ingest.search.logs.roomlog import RoomLog
from ingest.store import Store
from ingest.types import Message, RoomID
from tests.ingest.search.test_query import ROOM, SERVER, fill, point
from tests.ingest.search.test_query import store as store  # the embedded store (a fixture)

BOT = "@muninn:example.org"


class Homeserver:
    """The live check: which windows it was asked about, and which it calls stale."""

    def __init__(self, stale: frozenset[str] = frozenset()) -> None:
        self.stale = stale
        self.asked: list[str] = []

    async def __call__(self, room_id: str, event_ids: Sequence[str]) -> bool:
        names = [e.removeprefix("$") for e in event_ids]
        self.asked.extend(names)
        return not self.stale.intersection(names)


async def ask(
    store: Store, n: int, homeserver: Homeserver, views: Sequence[RoomView] = ()
) -> SearchResult:
    fill(
        store,
        [point(f"w{i}", [0, 0, 0, 1.0], {"plan": 1.0 - i / 100}, 1000 + i) for i in range(n)],
    )
    searcher = Searcher(store, None, server_name=SERVER, live_check=homeserver)
    command = SearchCommand(("plan",), None, None, None, None, (), 5)
    return await fused_search(
        searcher,
        command,
        rooms=[RoomID(ROOM)],
        views=views,
        bot_user_id=BOT,
        prefix="!",
    )


def shown(result: SearchResult) -> list[str]:
    return [h.first_event_id.removeprefix("$") for h in result.hits]


async def test_fused_search_revalidates_only_the_hits_it_shows(store: Store) -> None:
    """Of the 15 candidates fused, only the 5 shown are asked about, and every one shown was."""
    homeserver = Homeserver()
    result = await ask(store, 20, homeserver)
    assert shown(result) == ["w0", "w1", "w2", "w3", "w4"]
    assert sorted(homeserver.asked) == sorted(shown(result))
    assert result.dropped_stale == 0


async def test_fused_search_stale_hit_gives_its_place_to_the_next(store: Store) -> None:
    """A shown candidate that fails revalidation is dropped, counted, and the next one shown."""
    homeserver = Homeserver(stale=frozenset({"w1", "w3"}))
    result = await ask(store, 20, homeserver)
    assert shown(result) == ["w0", "w2", "w4", "w5", "w6"]
    assert set(shown(result)) <= set(homeserver.asked)
    assert result.dropped_stale == 2


async def test_fused_search_stale_window_leaves_the_transcript_match(store: Store) -> None:
    """A transcript match inside a stale window is shown as its own live message (read from
    the room just now), never as the window the homeserver refused."""
    raw = [
        {
            "type": "m.room.message",
            "event_id": "$w0",
            "sender": "@u:example.org",
            "origin_server_ts": 1000,
            "room_id": ROOM,
            "content": {"msgtype": "m.text", "body": "the plan"},
        }
    ]
    view = RoomView(RoomLog(RoomID(ROOM), raw, 10), None, ANYONE)
    result = await ask(store, 3, Homeserver(stale=frozenset({"w0"})), views=[view])
    by_key = {h.point_id: h for h in result.hits}
    assert "event:$w0" in by_key and by_key["event:$w0"].event_ids == ("$w0",)
    assert all(h.messages[0]["body"] != "w0" for h in result.hits)  # not the stored window
    assert result.dropped_stale == 1


async def test_fused_search_folds_the_transcript_off_the_event_loop(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the fold scrubbed and matched up to 2,048 events on the event loop (6.4 s
    for 16 KB messages), stalling appservice transactions and every other room. It runs
    where no event loop does, and still finds the message."""
    ran_on_loop: list[bool] = []
    messages = RoomLog.messages

    def recording(self: RoomLog, bot_user_id: str, prefix: str) -> list[Message]:
        try:
            asyncio.get_running_loop()
            ran_on_loop.append(True)
        except RuntimeError:
            ran_on_loop.append(False)
        return messages(self, bot_user_id, prefix)

    monkeypatch.setattr(RoomLog, "messages", recording)
    raw = [
        {
            "type": "m.room.message",
            "event_id": "$big",
            "sender": "@u:example.org",
            "origin_server_ts": 1000,
            "room_id": ROOM,
            "content": {"msgtype": "m.text", "body": "the plan " + "word " * 3000},
        }
    ]
    view = RoomView(RoomLog(RoomID(ROOM), raw, 10), None, ANYONE)
    result = await ask(store, 1, Homeserver(), views=[view])
    assert "event:$big" in {h.point_id for h in result.hits}
    assert ran_on_loop == [False]


async def test_fused_search_refuses_a_regex_that_runs_out_of_time(store: Store) -> None:
    """The fold is the read path's (`ingest.search.logs.transcript`); a /regex/ that runs out of
    its
    budget there is still the bot's refusal, a `CommandError` whose text is posted."""
    raw = [
        {
            "type": "m.room.message",
            "event_id": f"$a{i}",
            "sender": "@u:example.org",
            "origin_server_ts": 1000 + i,
            "room_id": ROOM,
            "content": {"msgtype": "m.text", "body": "a" * 5000 + "b"},
        }
        for i in range(4)
    ]
    view = RoomView(RoomLog(RoomID(ROOM), raw, 10), None, ANYONE)
    searcher = Searcher(store, None, server_name=SERVER, live_check=Homeserver())
    command = SearchCommand((), r"(a+)+$", None, None, None, (), 5)
    with pytest.raises(PatternTimeout, match="too long") as caught:
        await fused_search(
            searcher,
            command,
            rooms=[RoomID(ROOM)],
            views=[view],
            bot_user_id=BOT,
            prefix="!",
        )
    assert isinstance(caught.value, CommandError)
