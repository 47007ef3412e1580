"""`!search` and `!more`: read the room's log, look up (`fused_search`), reply; `!more`'s pages.

The search's own order: the writer's marks before the logs are read (they reach back to them),
the audience after the room's log (its read drops a stale one: `read_room`), the re-check just
before every send (`Replier.send_quoting`). A next page is kept per asker, room and thread
(`Pages`). `fused_search` turns a parsed `!search` into the read path's request
(`Searcher.search`): the index's query, and the rooms' logs the command read as
`ingest.search.logs.request.RoomLogs`, each with who reads the reply there (`Audience`); the
fold, the fusion, the cut and the revalidation of what is shown are the read path's.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

import regex

from bot.chat.commands.incoming import Incoming
from bot.chat.commands.patterns import compile_off_loop, refused_timeouts
from bot.chat.commands.records import SearchCommand
from bot.chat.metrics import ChatMetrics
from bot.chat.reads import LogReader, read_room
from bot.chat.replies import SearchView, search_reply
from bot.chat.replying import Replier, answer_small
from bot.chat.visibility import ANYONE, Audience
from bot.errors import CommandError
from ingest.errors import StoreError
from ingest.index.records import Tombstone
from ingest.matrix.rooms import RoomCache
from ingest.search import Searcher
from ingest.search.hits import SearchResult
from ingest.search.logs.request import LogQuery, RoomLogs, RoomView, ShownIds
from ingest.search.query import MAX_OFFSET, SearchQuery
from ingest.types import RoomID

__all__ = [
    "MAX_PAGES",
    "PAGE_TTL_MS",
    "Page",
    "Pages",
    "SearchActions",
    "ShownIds",
    "fused_search",
    "tombstones",
]

log = logging.getLogger("muninn.chat")

MAX_PAGES = 1000
PAGE_TTL_MS = 10 * 60_000


Key = tuple[str, str, str | None]  # asker, room, thread root


@dataclass(frozen=True)
class Page:
    """Where a search's paging stands: its command, what was shown, and when it expires."""

    command: SearchCommand
    shown: ShownIds  # event ids of every hit shown so far
    depth: int  # results (messages) shown so far
    expires_ms: int
    ended: bool = False  # the last page was shown: a `!more` says there are no more


class Pages:
    """The pages waiting for a `!more`, per (asker, room, thread); pure state with the clock
    given.

    A page remembers the command it pages and the event ids every earlier page showed, so the
    next page never repeats a hit (it is searched again, revalidated and cut to the room's
    audience now, as every reply is: docs/ARCHITECTURE.md §3 rules 14, 15). What is kept is
    capped (`MAX_PAGES` askers' searches, least recently used out first) and expires after
    `PAGE_TTL_MS`: paging state is a convenience, never a second copy of the room.
    """

    def __init__(self, max_pages: int = MAX_PAGES, ttl_ms: int = PAGE_TTL_MS) -> None:
        self._pages: OrderedDict[Key, Page] = OrderedDict()
        self._max = max_pages
        self._ttl = ttl_ms

    def __len__(self) -> int:
        return len(self._pages)

    def remember(
        self,
        key: Key,
        command: SearchCommand,
        shown: ShownIds,
        depth: int,
        now_ms: int,
        more: bool,
    ) -> None:
        """After a page: keep it for a `!more`; after the last, only that it ended (no ids)."""
        self._pages.pop(key, None)
        kept = shown if more else ShownIds()
        self._pages[key] = Page(command, kept, depth, now_ms + self._ttl, ended=not more)
        while len(self._pages) > self._max:
            self._pages.popitem(last=False)

    def take(self, key: Key, now_ms: int) -> Page | None:
        """The page waiting for this asker here, unless none or expired (an ended search stays
        ended until it expires)."""
        page = self._pages.pop(key, None)
        if page is None or page.expires_ms < now_ms:
            return None
        if page.ended:
            self._pages[key] = page
        return page


@dataclass(eq=False)
class SearchActions:
    """The search commands, given the parts of the handler they use."""

    searcher: Searcher
    reads: LogReader
    replier: Replier
    rooms: RoomCache
    metrics: ChatMetrics
    _: KW_ONLY
    bot_user_id: str
    prefix: str
    server_name: str
    pages: Pages = field(default_factory=Pages, init=False)  # `!more`

    async def more(self, msg: Incoming, in_command_room: bool) -> None:
        page = self.pages.take(_page_key(msg), msg.ts)
        if page is None:
            await answer_small(
                self.reads,
                self.replier,
                msg,
                f"No search of yours to continue here (a next page is kept for 10 minutes): "
                f"search again with {self.prefix}search",
            )
            return
        if page.ended:
            texts = " | ".join(f"“{t}”" for t in page.command.texts) or "your search"
            await answer_small(self.reads, self.replier, msg, f"No more results for {texts}.")
            return
        await self.search(msg, page.command, in_command_room, page)

    async def search(
        self,
        msg: Incoming,
        command: SearchCommand,
        in_command_room: bool,
        page: Page | None = None,
    ) -> None:
        replier = self.replier
        if command.regex is None and replier.within_rate(msg):
            # The question's vectors while the log is read: `search` finds them ready (~17 ms
            # of the pair's models against a `/messages` round trip of about as much).
            self.searcher.first.warm(command.texts)
        # The writer's marks before the log read, the audience after it (`read_room`, rule 15).
        read = await read_room(self.searcher, msg.room_id, self.reads.read_log, replier.audience)
        own_log, marks = read.log, read.marks
        if not await replier.may_answer(msg, own_log):
            return
        # Compiled only now, past the rate limit and off the loop: a bounded pattern still
        # costs up to ~10 ms of CPU (`compile_pattern`).
        matcher = None
        if command.regex is not None:
            matcher = await compile_off_loop(command.regex)
        if in_command_room and command.regex is not None and not command.rooms:
            # A /regex/ reads rooms' latest messages, never the index: across every room it
            # would always answer nothing, which reads as "no such message".
            raise CommandError(
                "A /regex/ searches a room's latest messages, not the index: name the room "
                "with in:#room (up to 8)."
            )
        if in_command_room and not command.rooms and not command.texts:
            # Operators alone list a room's latest messages (its log), never the index's.
            raise CommandError(
                "A search without words lists a room's latest messages: name the room with "
                "in:#room (up to 8), or add the words to find."
            )
        cut: Audience | None = None  # who reads the reply here; the command room: no cut
        if in_command_room:
            rooms: list[RoomID] | None = await self.reads.resolve_rooms(command.rooms) or None
            views = [await self.reads.view(r) for r in rooms or ()]
        else:
            info = await self.rooms.get(msg.room_id)
            cut = await read.audience()
            rooms = [msg.room_id]
            alias = info.state.canonical_alias if info.state else None
            views = [RoomView(own_log, alias, cut)]
        started = time.monotonic()
        result = await fused_search(
            self.searcher,
            command,
            rooms=rooms,
            views=views,
            bot_user_id=self.bot_user_id,
            prefix=self.prefix,
            pattern=matcher,
            marks=marks,
            names=await self._mention_names(command, rooms),
            shown=page.shown if page else ShownIds(),
            depth=page.depth if page else 0,
        )
        # Each message listed, once: a window's other matches are still to come (rule 22b).
        shown = (page.shown if page else ShownIds()).adding(result.matched)
        depth = (page.depth if page else 0) + len(result.matched)
        more = result.next_offset is not None
        self.pages.remember(_page_key(msg), command, shown, depth, msg.ts, more)
        self.metrics.search_latency.labels(source="command").observe(time.monotonic() - started)
        names: dict[str, dict[str, str]] = {}
        labels: dict[str, str] = {}
        for hit in result.hits:
            if hit.room_id not in names:
                info = await self.rooms.get(hit.room_id)
                names[hit.room_id], labels[hit.room_id] = info.speakers, info.label
        view = SearchView(
            result,
            command.texts,
            command.regex,
            matcher=matcher,
            scans=[v.log.scan() for v in views],
            names=names,
            room_labels=labels,
            show_rooms=in_command_room,
            results_json=in_command_room,
            command=command,
            prefix=self.prefix,
            more=result.remaining,
            first=(page.depth if page else 0) + 1,
            server_name=self.server_name,
            unread=await self._unread(rooms, marks, here=not in_command_room),
        )
        await replier.send_quoting(msg, search_reply(msg.reply_to, view), cut)

    async def _unread(
        self, rooms: Sequence[RoomID] | None, marks: Mapping[str, str], *, here: bool
    ) -> tuple[str, ...]:
        """The searched rooms the index has not read yet (issue 49: no writer's mark), "this
        room" in a room, by label in the command room; none when no mark could be read (an
        empty or unreadable index says so itself)."""
        missing = [r for r in rooms or () if marks and r not in marks]
        if here or not missing:
            return ("this room",) if missing else ()
        return tuple([(await self.rooms.get(r)).label for r in missing])

    async def _mention_names(
        self, command: SearchCommand, rooms: list[RoomID] | None
    ) -> dict[str, tuple[str, ...]]:
        """The display names of the users `mentions:` asks for, in the rooms searched: how
        a client without `m.mentions` writes a mention."""
        found: dict[str, set[str]] = {}
        if not command.filter.mentions:
            return {}
        for room_id in rooms or ():
            names = (await self.rooms.get(room_id)).names
            for user in command.filter.mentions:
                if user in names:
                    found.setdefault(user, set()).add(names[user])
        return {user: tuple(sorted(n)) for user, n in found.items()}


def _page_key(msg: Incoming) -> tuple[str, str, str | None]:
    """Whose `!more` continues which search: the asker's, in this room, in this thread."""
    return (msg.sender, msg.room_id, msg.reply_to.thread_root)


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
        sort=command.sort,  # `sort:recent` reads the pool whole on every page, not 30 deep
        offset=min(depth, MAX_OFFSET),  # a later page: a deeper pool (`Searcher._depth`)
        close_only=True,  # a person reads it: close matches, or the nearest said to be
    )


async def fused_search(
    searcher: Searcher,
    command: SearchCommand,
    *,
    rooms: Sequence[RoomID] | None,
    views: Sequence[RoomView],
    bot_user_id: str,
    prefix: str,
    pattern: regex.Pattern[str] | None = None,
    marks: Mapping[str, str] | None = None,
    names: Mapping[str, tuple[str, ...]] | None = None,
    shown: ShownIds | None = None,
    depth: int = 0,
) -> SearchResult:
    """Index hits (filtered to `rooms`, None = every indexed room) fused with the transcripts.

    `marks`: the writer's marks (`Searcher.marks`) taken before the views' logs were read:
    the index hits of those rooms are then revalidated from the logs, no tail read of their
    own. Each view holds the visibility cut of its room (the command room's: none, its askers
    may read every room). `pattern` is the command's /regex/ already compiled
    (`compile_pattern`); without it the fold compiles it.

    `names`: user id → display names, for `mentions:` in text without `m.mentions`. A next
    page (`!more`) gives the event ids earlier pages `shown` (no hit citing one is shown
    again) and `depth`, how many hits they showed; `next_offset` is set when more remain.
    """
    cuts = {v.log.room_id: v.audience for v in views if isinstance(v.audience, Audience)}
    single = cuts.get(rooms[0], ANYONE) if rooms is not None and len(rooms) == 1 else ANYONE
    if pattern is None and command.regex is not None:
        pattern = await compile_off_loop(command.regex)
    asked = LogQuery(
        command.texts,
        command.sender,
        command.after_ms,
        command.before_ms,
        command.limit,
        command.sort,
    )
    logs = RoomLogs(
        asked=asked,
        views=views,
        bot_user_id=bot_user_id,
        prefix=prefix,
        marks=marks or {},
        filter=command.filter.with_names(names or {}),
        shown=shown if shown is not None else ShownIds(),
        depth=depth,
        pattern=pattern,
    )
    query = _query(command, rooms, single, names or {}, depth)
    with refused_timeouts():  # refused as the bot refuses a /regex/: its text is posted
        return await searcher.search(query, room_logs=logs)


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
