"""How often one `!search` calls from the read path back into bot objects (issue 38: at most 4).

Every bot object in the request the bot hands `Searcher.search` (found by walking the request's
records, lists and mappings: a value of a class defined under `bot.`) is wrapped in a proxy
that counts each attribute the read path reads of it, a method call included. Today a room's
search hands the read path values of its own but the room's audience (rule 14 is the bot's),
asked once a room (`Visibility.seen`): 1 call, where the read path once made one a message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from ingest.search import Searcher
from ingest.search.logs.request import LogQuery, RoomLogs, RoomView
from ingest.search.logs.roomlog import RoomLog
from ingest.search.query import SearchQuery
from ingest.store import Store
from ingest.types import RoomID
from tests.bot.fastkit import SERVER, FastBot
from tests.ingest.search.test_query import ROOM, fill, point
from tests.ingest.search.test_query import SERVER as INDEX_SERVER
from tests.ingest.search.test_query import store as store  # the embedded store (a fixture)

ALICE = f"@alice:{SERVER}"
MAX_CALLS = 4  # issue 38's bound

MakeBot = Callable[..., FastBot]


class Counting:
    """A bot object as the read path sees it: every attribute read is noted in `calls`."""

    def __init__(self, target: object, calls: list[str]) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_calls", calls)

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_target")
        object.__getattribute__(self, "_calls").append(f"{type(target).__name__}.{name}")
        return getattr(target, name)


def counted(value: Any, calls: list[str]) -> Any:
    """`value` with every bot object inside it wrapped in a `Counting` proxy."""
    if type(value).__module__.split(".")[0] == "bot":
        return Counting(value, calls)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        return dataclasses.replace(value, **{f: counted(getattr(value, f), calls) for f in fields})
    if isinstance(value, list | tuple):
        return type(value)(counted(v, calls) for v in value)
    if isinstance(value, Mapping):
        return {k: counted(v, calls) for k, v in value.items()}
    return value


def counting_searches(searcher: Searcher, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call the read path makes into bot objects, searches after this one included."""
    calls: list[str] = []
    search = searcher.search

    async def counting(*args: Any, **kwargs: Any) -> Any:
        args = tuple(counted(a, calls) for a in args)
        return await search(*args, **{k: counted(v, calls) for k, v in kwargs.items()})

    monkeypatch.setattr(searcher, "search", counting)
    return calls


async def test_one_search_calls_into_the_bot_at_most_four_times(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = make_bot()
    room = bot.rooms.create_room(ALICE, visibility="joined")
    for i in range(30):
        bot.rooms.say(room, ALICE, f"the giraffe plan, step {i}")
    calls = counting_searches(bot.handler.searching.searcher, monkeypatch)

    reply = await bot.reply(room, ALICE, "!search giraffe")

    assert "5 results for “giraffe”" in str(reply["body"])  # found in the room's log
    assert calls == ["Audience.seen"]  # the room's readers, asked once for 30 messages
    assert len(calls) <= MAX_CALLS


async def test_the_audience_is_asked_once_for_the_index_and_the_log(store: Store) -> None:
    """The index's candidates and the log's messages of a room are cut by one question to
    its audience, whatever their number (`ingest.search.logs.roomlogs.Cut`)."""
    fill(
        store,
        [point(f"w{i}", [0, 0, 0, 1.0], {"plan": 1.0 - i / 100}, 1000 + i) for i in range(20)],
    )
    asked: list[frozenset[int]] = []

    class Joined:
        def seen(self, stamps: Iterable[int], /) -> frozenset[int]:
            kept = frozenset(ts for ts in stamps if ts >= 1010)
            asked.append(frozenset(stamps))
            return kept

    raw = [
        {
            "type": "m.room.message",
            "event_id": f"$log{i}",
            "sender": "@u:example.org",
            "origin_server_ts": 5000 + i,
            "room_id": ROOM,
            "content": {"msgtype": "m.text", "body": "the plan"},
        }
        for i in range(10)
    ]
    view = RoomView(RoomLog(RoomID(ROOM), raw, 10), None, Joined())
    logs = RoomLogs(LogQuery(("plan",), limit=50), [view], "@muninn:example.org", "!")
    searcher = Searcher(store, None, server_name=INDEX_SERVER)

    result = await searcher.search(SearchQuery.build(["plan"], room_ids=[ROOM]), room_logs=logs)

    assert len(asked) == 1  # once, for the 20 windows' messages and the 10 in the log
    assert {1000 + i for i in range(20)} | {5000 + i for i in range(10)} <= asked[0]
    assert all(int(m["ts"]) >= 1010 for h in result.hits for m in h.messages)
    assert any(h.point_id.startswith("event:") for h in result.hits)
