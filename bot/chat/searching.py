"""`!search` and `!more`: read the room's log, look up (`bot.chat.lookup.fused_search`), reply.

The search's own order: the writer's marks before the logs are read (they reach back to them),
the audience after the room's log (its read drops a stale one), the re-check just before the
send (`Replier.audience_holds`). A next page is kept per asker, room and thread (`Pages`).
"""

from __future__ import annotations

import time
from dataclasses import KW_ONLY, dataclass, field

from bot.chat.commands.patterns import compile_off_loop
from bot.chat.commands.records import SearchCommand
from bot.chat.incoming import Incoming
from bot.chat.lookup import RoomView, fused_search, read_room
from bot.chat.metrics import ChatMetrics
from bot.chat.paging import Page, Pages, ShownIds
from bot.chat.reads import RoomReads
from bot.chat.replies import SearchView, search_reply
from bot.chat.replying import Replier, answer_small
from bot.chat.visibility import Audience
from bot.errors import CommandError
from ingest.matrix.rooms import RoomCache
from ingest.search import Searcher
from ingest.types import RoomID

__all__ = ["SearchActions"]


@dataclass(eq=False)
class SearchActions:
    """The search commands, given the parts of the handler they use."""

    searcher: Searcher
    reads: RoomReads
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
        if in_command_room:
            rooms: list[RoomID] | None = await self.reads.resolve_rooms(command.rooms) or None
            views = [await self.reads.view(r) for r in rooms or ()]
            cuts: dict[str, Audience] = {}
        else:
            info = await self.rooms.get(msg.room_id)
            cut = await read.audience()
            rooms = [msg.room_id]
            alias = info.state.canonical_alias if info.state else None
            views = [RoomView(own_log, alias, cut)]
            cuts = {msg.room_id: cut}
        started = time.monotonic()
        result = await fused_search(
            self.searcher,
            command,
            rooms=rooms,
            views=views,
            audiences=cuts,
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
        )
        if await replier.audience_holds(msg, cuts.get(msg.room_id)):
            await replier.send(msg, search_reply(msg.reply_to, view))

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
