"""How often one `!search` calls from `ingest` back into bot code (issue 38: at most 4; issue 45:
every call counted, 1).

Every call whose caller is code under `ingest/` and whose callee is code under `bot/` is counted,
in the event loop's thread and in the worker threads the read path folds in (`asyncio.to_thread`),
by a profile hook (`sys.setprofile`): a callable handed over, a protocol's method, a callback a
cache makes, each counted once a call. Before issue 45 a search made 4 such calls (this test
counted 1, inside `Searcher.search`): `read_room` called the bot's log read
(`RoomReads.read_log`) and its audience (`Replier.audience`), the room log's cache told the bot
its read passed a state change (`Audiences.drop`, its `on_state`), and the read path asked the
room's audience (`Audience.seen`). The bot now reads the log, the writer's marks and the
audience itself (`bot.chat.reads`) and hands the read path values; the cache says a state change
as a value (`Latest.state_passed`). What is left is rule 14's, the bot's: the room's audience,
asked once a room for the stamps the read path judges (`Visibility.seen`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
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
CALLS_A_SEARCH = 1  # issue 45, every call counted (issue 38 bounded them at 4)

ROOT = Path(__file__).resolve().parents[3]
BOT, INGEST = f"{ROOT / 'bot'}/", f"{ROOT / 'ingest'}/"

MakeBot = Callable[..., FastBot]


@contextmanager
def calls_into_the_bot(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every call from code under `ingest/` into code under `bot/` while the block runs, by the
    callee's qualified name, in this thread and in the loop's worker threads."""
    calls: list[str] = []
    frames: list[FrameType] = []  # the counted frames, kept alive: an id is never reused
    counted: set[int] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or id(frame) in counted:  # a coroutine resumed: its first call only
            return
        caller = frame.f_back
        if (
            caller is not None
            and frame.f_code.co_filename.startswith(BOT)
            and caller.f_code.co_filename.startswith(INGEST)
        ):
            counted.add(id(frame))
            frames.append(frame)
            calls.append(frame.f_code.co_qualname)

    loop = asyncio.get_running_loop()
    workers = ThreadPoolExecutor(initializer=sys.setprofile, initargs=(profile,))
    monkeypatch.setattr(loop, "_default_executor", workers)  # `asyncio.to_thread`'s threads
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(None)
        workers.shutdown(wait=False)


async def test_one_search_calls_into_the_bot_once(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = make_bot()
    room = bot.rooms.create_room(ALICE, visibility="joined")
    for i in range(30):
        bot.rooms.say(room, ALICE, f"the giraffe plan, step {i}")

    with calls_into_the_bot(monkeypatch) as calls:
        reply = await bot.reply(room, ALICE, "!search giraffe")

    assert "5 results for “giraffe”" in str(reply["body"])  # found in the room's log
    assert calls == ["Audience.seen"]  # the room's readers, asked once for 30 messages
    assert len(calls) == CALLS_A_SEARCH


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
