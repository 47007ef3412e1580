"""`Searcher.search(query, room_logs=…)`: the one read path fuses the room logs a command read
with the index and cuts both to the room's audience, with no bot part at all
(`ingest.search.logs.roomlogs`; docs/ARCHITECTURE.md §3 rule 14)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ingest.index.records import Tombstone
from ingest.matrix import JSONDict
from ingest.search import Searcher
from ingest.search.logs.request import RoomLogs
from ingest.search.query import SearchQuery
from ingest.store import Store
from ingest.types import EventID, Message, RoomID, UserID
from tests.ingest.search.test_query import ROOM, SERVER, fill, point
from tests.ingest.search.test_query import store as store  # the embedded store (a fixture)

ROOM_ID = RoomID(ROOM)
JOINED_AT = 3000  # the room's readers may see nothing older


@dataclass(frozen=True)
class Asked:
    texts: tuple[str, ...] = ("plan",)
    sender: str | None = None
    after_ms: int | None = None
    before_ms: int | None = None
    limit: int = 10
    sort: str = "relevance"


@dataclass(frozen=True)
class Log:
    """A room's log as a command read it: two messages, one from before the readers joined."""

    room_id: RoomID = ROOM_ID
    raw: Sequence[JSONDict] = ()

    def without_purged(self, stones: Sequence[Tombstone], /) -> Log:
        return self

    def messages(self, bot_user_id: str, prefix: str, /) -> list[Message]:
        said = [("$new", 6000, "the new plan"), ("$old", 1500, "the old plan")]
        user = UserID("@u:example.org")
        return [Message(EventID(e), self.room_id, user, ts, body) for e, ts, body in said]


class Joined:
    def sees(self, ts: int, /) -> bool:
        return ts >= JOINED_AT

    def seen(self, stamps: Iterable[int], /) -> frozenset[int]:
        return frozenset(ts for ts in stamps if self.sees(ts))


@dataclass(frozen=True)
class View:
    log: Log
    alias: str | None = None
    audience: Joined = field(default_factory=Joined)


async def test_search_cuts_index_and_log_hits_to_the_rooms_audience(store: Store) -> None:
    fill(
        store,
        [
            point("w0", [0, 0, 0, 1.0], {"plan": 1.0}, 1000),
            point("w1", [0, 0, 0, 1.0], {"plan": 0.9}, 5000),
        ],
    )
    searcher = Searcher(store, None, server_name=SERVER)
    logs = RoomLogs(Asked(), [View(Log())], "@muninn:example.org", "!")
    query = SearchQuery.build(["plan"], room_ids=[ROOM])

    result = await searcher.search(query, room_logs=logs)

    shown = {h.best_event_id for h in result.hits}
    assert shown == {"$w1", "$new"}  # neither the window nor the message before the join
    assert result.retrievers == ["lexical", "transcript"]
