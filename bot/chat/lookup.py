"""The read behind `!search`: what the command is to the one read path (`Searcher.search`).

`fused_search` turns a parsed `!search` into the index's query and hands the read path the
rooms' logs the command read (`bot.chat.roomlog`), its /regex/ compiled within the bot's bounds
(`bot.chat.commands.patterns`) and who reads the reply in each room (`bot.chat.visibility`); the
transcript fold,
the fusion, the cut to the audience and the revalidation of what is shown are the read path's
(`ingest.search.logs.roomlogs`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import regex

from bot.chat.commands.patterns import compile_off_loop
from bot.chat.commands.records import SearchCommand
from bot.chat.roomlog import RoomLog
from bot.chat.transcript import refused_timeouts
from bot.chat.visibility import ANYONE, Audience
from bot.errors import CommandError
from ingest.errors import StoreError
from ingest.index.records import Tombstone
from ingest.search import Searcher
from ingest.search.hits import SearchResult
from ingest.search.logs.roomlogs import RoomLogs, Shown
from ingest.search.query import MAX_OFFSET, SearchQuery
from ingest.types import RoomID

__all__ = ["RoomRead", "RoomView", "Shown", "fused_search", "read_room", "tombstones"]

log = logging.getLogger("muninn.lookup")


@dataclass(frozen=True)
class RoomView:
    """One room the search reads the transcript of, and who may see what in it."""

    log: RoomLog
    alias: str | None
    audience: Audience  # who reads the reply in the room (`bot.chat.visibility`)


@dataclass(frozen=True)
class RoomRead:
    """A room's log read for a `!search`, and the writer's marks taken before it.

    The two ordering rules of a search are this record's order: `read_room` takes the marks
    *before* it reads the log (a log read after them reaches back to them, and so stands in for
    the revalidation's tail read: rule 15), and the room's audience can be asked only from a
    read, so *after* it (the read drops a kept audience on a state event the dispatcher may not
    have seen: rule 14).
    """

    marks: Mapping[str, str]
    log: RoomLog
    _audience: Callable[[RoomID], Awaitable[Audience]]

    async def audience(self) -> Audience:
        """Who reads the reply in the room (`bot.chat.visibility`), asked now, after the read."""
        return await self._audience(self.log.room_id)


class Marker(Protocol):
    """What takes the writer's marks (`Searcher.marks`)."""

    async def marks(self) -> dict[str, str]: ...


async def read_room(
    searcher: Marker,
    room_id: RoomID,
    read_log: Callable[[RoomID], Awaitable[RoomLog]],
    audience: Callable[[RoomID], Awaitable[Audience]],
) -> RoomRead:
    """The writer's marks, then the room's log (`RoomRead`: the audience comes after)."""
    marks = await searcher.marks()
    return RoomRead(marks, await read_log(room_id), audience)


def _query(
    command: SearchCommand,
    rooms: Sequence[RoomID] | None,
    audience: Audience,
    names: Mapping[str, tuple[str, ...]],
    depth: int,
) -> SearchQuery | None:
    """The index's query of a `!search`; None when it has none (a /regex/ is the logs')."""
    if command.regex is not None or not command.texts:
        return None
    after = max((t for t in (command.after_ms, audience.after) if t is not None), default=None)
    before = command.before_ms - 1 if command.before_ms is not None else None
    return SearchQuery.build(
        command.texts,
        room_ids=rooms,
        senders=(command.sender,) if command.sender else None,
        after_ts=after,
        before_ts=before,
        limit=command.limit,
        filter=command.filter.with_names(names),
        offset=min(depth, MAX_OFFSET),  # a later page: a deeper pool (`Searcher._depth`)
        close_only=True,  # a person reads it: close matches, or the nearest said to be
    )


async def fused_search(
    searcher: Searcher,
    command: SearchCommand,
    *,
    rooms: Sequence[RoomID] | None,
    views: Sequence[RoomView],
    audiences: Mapping[str, Audience],
    bot_user_id: str,
    prefix: str,
    pattern: regex.Pattern[str] | None = None,
    marks: Mapping[str, str] | None = None,
    names: Mapping[str, tuple[str, ...]] | None = None,
    shown: Shown = frozenset(),
    depth: int = 0,
) -> SearchResult:
    """Index hits (filtered to `rooms`, None = every indexed room) fused with the transcripts.

    `marks`: the writer's marks (`Searcher.marks`) taken before the views' logs were read:
    the index hits of those rooms are then revalidated from the logs, no tail read of their
    own. `audiences` holds the visibility cut of each room a reply quotes (none: the command
    room, whose askers may read every room). `pattern` is the command's /regex/ already
    compiled (`compile_pattern`); without it the fold compiles it.

    `names`: user id → display names, for `mentions:` in text without `m.mentions`. A next
    page (`!more`) gives the event ids earlier pages `shown` (no hit citing one is shown
    again) and `depth`, how many hits they showed; `next_offset` is set when more remain.
    """
    single = audiences.get(rooms[0], ANYONE) if rooms is not None and len(rooms) == 1 else ANYONE
    if pattern is None and command.regex is not None:
        pattern = await compile_off_loop(command.regex)
    logs = RoomLogs(
        asked=command,
        views=views,
        bot_user_id=bot_user_id,
        prefix=prefix,
        marks=marks or {},
        filter=command.filter.with_names(names or {}),
        shown=shown,
        depth=depth,
        pattern=pattern,
    )
    query = _query(command, rooms, single, names or {}, depth)
    with refused_timeouts():  # refused as the bot refuses a /regex/: its text is posted
        return await searcher.search(query, room_logs=logs, audiences=audiences)


async def tombstones(searcher: Searcher) -> list[Tombstone]:
    """Every recorded purge, for a reply that quotes the room log (`RoomLog.without_purged`).

    Raises:
        CommandError: they cannot be read (the purge file unreadable, or the store down and no
            file): the reply must then show no log text at all, never text a purge may cover.
    """
    try:
        return await searcher.tombstones()
    except StoreError as e:
        log.warning("purges cannot be read, no log text is shown: %s", e)
        raise CommandError(
            f"the purge records cannot be read ({e}): recent messages are not shown"
        ) from e
