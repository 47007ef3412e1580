"""What a command hands the read path of the rooms' logs it read: values, not bot objects.

`Searcher.search(query, room_logs=RoomLogs(…))` (`ingest.search.searcher`) answers `!search` and
the command room. Everything in a `RoomLogs` is a value of the read path's own (the command as
`LogQuery`, each room's `RoomLog` in a `RoomView`, the ids earlier pages showed as `ShownIds`)
but one: who reads the reply in each room (`Visibility`, the bot's
`bot.chat.visibility.Audience`: rule 14 stays the bot's), asked once a room for the stamps the
read path judges (`Visibility.seen`). So one `!search` calls back into the bot once a room, not
once a message, and nothing else does: the log, the writer's marks and the audience are read by
the bot (`bot.chat.reads`) and handed over as values (tests/bot/chat/test_search_calls.py
counts every call from `ingest` into bot code).
"""

from __future__ import annotations

import bisect
import hashlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import regex

from ingest.search.filters import NO_FILTER, MessageFilter
from ingest.search.logs.roomlog import RoomLog

__all__ = [
    "EVERYONE",
    "LogQuery",
    "RoomLogs",
    "RoomView",
    "ShownIds",
    "Visibility",
]


class Visibility(Protocol):
    """Who reads the reply in a room (`bot.chat.visibility.Audience`): of the stamps the read
    path judges in the room, those every reader may see. Asked once a room a search."""

    def seen(self, stamps: Iterable[int], /) -> frozenset[int]: ...


class _Everyone:
    def seen(self, stamps: Iterable[int], /) -> frozenset[int]:
        return frozenset(stamps)


EVERYONE: Visibility = _Everyone()  # a room with no cut (the command room's askers)


@dataclass(frozen=True)
class LogQuery:
    """The command the search answers, as far as the fold, the cut and the page read it
    (`bot.chat.commands.records.SearchCommand`'s values; `transcript.TranscriptQuery`)."""

    texts: tuple[str, ...] = ()
    sender: str | None = None
    after_ms: int | None = None
    before_ms: int | None = None
    limit: int = 10
    sort: str = "relevance"  # or "recent"


def _digest(event_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class ShownIds:
    """The event ids earlier pages showed, as sorted 64-bit digests: 8 bytes an id, so 1,000
    searches paged 200 hits deep hold tens of MB at worst, not hundreds. A collision can
    only hide a hit, never show one."""

    digests: array[int] = field(default_factory=lambda: array("Q"))

    def __len__(self) -> int:
        return len(self.digests)

    def __contains__(self, event_id: object) -> bool:
        if not isinstance(event_id, str):
            return False
        key = _digest(event_id)
        i = bisect.bisect_left(self.digests, key)
        return i < len(self.digests) and self.digests[i] == key

    def isdisjoint(self, event_ids: Iterable[str]) -> bool:
        return not any(e in self for e in event_ids)

    def adding(self, event_ids: Iterable[str]) -> ShownIds:
        merged = sorted({*self.digests, *(_digest(e) for e in event_ids)})
        return ShownIds(array("Q", merged))


@dataclass(frozen=True)
class RoomView:
    """One room the search reads the transcript of, and who may see what in it: its index
    hits and its log's messages alike are cut to `audience` (a room with no view: no cut)."""

    log: RoomLog
    alias: str | None
    audience: Visibility = EVERYONE


@dataclass(frozen=True)
class RoomLogs:
    """What a command adds to the index's answer: the logs it read, and its page."""

    asked: LogQuery
    views: Sequence[RoomView]
    bot_user_id: str  # its messages and `prefix` commands are not conversation
    prefix: str
    marks: Mapping[str, str] = field(default_factory=dict)  # `Searcher.marks`, before the read
    filter: MessageFilter = NO_FILTER
    shown: ShownIds | frozenset[str] = frozenset()
    depth: int = 0  # hits earlier pages showed
    pattern: regex.Pattern[str] | None = None  # the /regex/, compiled within the bot's bounds
