"""`!more`: the next page of a search, remembered per (asker, room, thread), bounded.

A page remembers the command it pages and the event ids every earlier page showed, so the
next page never repeats a hit (it is searched again, revalidated and cut to the room's
audience now, as every reply is: docs/ARCHITECTURE.md §3 rules 14, 15). What is kept is
capped (`MAX_PAGES` askers' searches, least recently used out first) and expires after
`PAGE_TTL_MS`: paging state is a convenience, never a second copy of the room.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from bot.chat.commands.records import SearchCommand
from ingest.search.logs.request import ShownIds

__all__ = ["MAX_PAGES", "PAGE_TTL_MS", "Page", "Pages", "ShownIds"]

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
    """The pages waiting for a `!more`; pure state with the clock given."""

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
