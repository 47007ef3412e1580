"""`ingest.search._candidates`: the read path's pool of candidates before revalidation.

Private to `ingest.search` (the import contract's `private_modules`): no caller outside the
read path ranks, trims or confirms candidates; they get `SearchResult`s of confirmed hits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from ingest.index.records import Tombstone
from ingest.search.filters import NO_FILTER, MessageFilter, keep_messages, msgtype_of
from ingest.search.hits import CitedMessage, Hit, StoredMessage, has_text, window_of
from ingest.search.matches import newest_first
from ingest.search.permalink import permalink
from ingest.search.quotes import best_of
from ingest.search.tails import Tail
from ingest.types import StoredPoint

__all__ = ["Candidates", "Confirm"]

# Which of the hits may be shown now (`Searcher._confirm`), checked at once.
Confirm = Callable[["Candidates", Sequence[Hit]], Awaitable[list[bool]]]


@dataclass
class Candidates:
    """The read path's fused ranking (`Searcher._rank`), best first, *before* revalidation.

    `Searcher.search` may trim, fuse and rank these hits (`ingest.search.logs.roomlogs`), but
    shows only
    those `Searcher._confirm` passes (docs/ARCHITECTURE.md §3 rule 15).
    """

    ranked: list[tuple[str, float]] = field(default_factory=list)  # (point id, fused score)
    warnings: list[str] = field(default_factory=list)
    retrievers: list[str] = field(default_factory=list)
    points: dict[str, StoredPoint] = field(default_factory=dict, repr=False)
    stones: list[Tombstone] = field(default_factory=list, repr=False)
    cursors: dict[str, str | None] = field(default_factory=dict, repr=False)  # room -> token
    early: dict[str, asyncio.Future[Any]] = field(default_factory=dict, repr=False)
    # room -> its tail since the cursor, from the caller's own log read (`tails.Tail`)
    known: dict[str, Tail] = field(default_factory=dict, repr=False)
    texts: tuple[str, ...] = ()
    server_name: str = ""
    below_floor: int = 0  # candidates left out: a nonsense query's, or weak ones `close_only`
    # The candidates the second stage judged close matches (None: no judgment, all are).
    close: frozenset[str] | None = None
    nothing_close: bool = False  # candidates there are, but none matches closely
    # A person's pool: the close matches, then the weaker ones, paged apart (`person_page`).
    close_first: bool = False
    filter: MessageFilter = NO_FILTER  # `ingest.search.filters`: applied as hits are built
    # `from:`: the windows holding these senders' messages, each quoting one of theirs
    senders: frozenset[str] = frozenset()
    dense: list[list[float]] | None = field(default=None, repr=False)  # the texts' vectors
    pair: bool = False  # those vectors are a pair embedder's (`ingest.search.quotes`)
    _built: dict[str, Hit | None] = field(default_factory=dict, repr=False)

    def first(self, n: int, skip: Set[str] = frozenset()) -> list[Hit]:
        """The best `n` candidates whose point ids are not in `skip` (hits built on demand)."""
        out: list[Hit] = []
        for pid, score in self.ranked:
            if len(out) >= n:
                break
            if pid in skip:
                continue
            if pid not in self._built:
                close = self.close is None or pid in self.close
                self._built[pid] = build_hit(
                    self.points[pid],
                    score,
                    self.texts,
                    self.server_name,
                    self.filter,
                    close,
                    Asked(self.dense, self.pair, self.senders),
                )
            hit = self._built[pid]
            if hit is not None:  # None: the filter kept none of its messages
                out.append(hit)
        return out

    async def confirmed(
        self, confirm: Confirm, shown: Callable[[Set[str]], Sequence[Hit]]
    ) -> tuple[set[str], set[str]]:
        """The one confirm loop of the read path (rule 15): `shown(stale)`, the candidates a
        page would show once the `stale` ones are passed over, are revalidated (`confirm`, at
        once) until every one shown has passed; a stale one gives its place to the next.
        Returns the point ids confirmed live and stale. Only what a page shows is checked:
        revalidating every candidate up front cost three times the homeserver round trips."""
        live: set[str] = set()
        stale: set[str] = set()
        while True:
            checked = live | stale
            unchecked = [h for h in shown(stale) if h.point_id not in checked]
            if not unchecked:
                return live, stale
            for hit, ok in zip(unchecked, await confirm(self, unchecked), strict=True):
                (live if ok else stale).add(hit.point_id)

    def by_recent(self) -> None:
        """`sort:recent`: the windows holding a message with the query's words, their newest
        such message first (the others matched by meaning only and are no time-ordered match);
        as ranked when none holds one (a question answered by meaning)."""
        worded = [h for h in self.first(len(self.ranked)) if h.matched]
        if worded:
            self.ranked = [(h.point_id, h.score) for h in newest_first(worded)]


@dataclass(frozen=True)
class Asked:
    """The question's vectors, for the quote a window matched by meaning gives."""

    dense: Sequence[Sequence[float]] | None = None
    pair: bool = False
    senders: frozenset[str] = frozenset()  # `from:`: only their messages are listed


def build_hit(
    point: StoredPoint,
    score: float,
    texts: Sequence[str],
    server_name: str,
    flt: MessageFilter | None = None,
    close: bool = True,
    asked: Asked = Asked(),
) -> Hit | None:
    """The hit of a stored window: its messages with text that `flt` keeps (None: none),
    its best message chosen by `quotes.best_of`."""
    p = window_of(point)
    said: Sequence[StoredMessage] = [m for m in p.get("messages", []) if has_text(m)]
    if flt:
        said = keep_messages(flt, said, p.get("thread_root"))
        if not said:
            return None
    messages = tuple(
        CitedMessage(
            event_id=str(m["event_id"]),
            sender=str(m["sender"]),
            ts=m["ts"],  # as stored: the writer's int (ms)
            body=str(m["body"]),
            msgtype=msgtype_of(m),
        )
        for m in said
    )
    lines = p.get("lines")
    # `from:bob`: bob's messages are what matched; the others are the context they are read in
    theirs = [m for m in messages if m["sender"] in asked.senders] if asked.senders else messages
    matched, best = best_of(theirs or messages, lines, texts, asked.dense, pair=asked.pair)
    return Hit(
        point_id=point.id,
        room_id=str(p["room_id"]),
        room_alias=p.get("room_alias"),
        thread_root=p.get("thread_root"),
        first_event_id=str(p["first_event_id"]),
        last_event_id=str(p["last_event_id"]),
        event_ids=tuple(p.get("event_ids", ())),
        messages=messages,
        score=score,
        permalink=permalink(str(p["room_id"]), best, server_name),
        best_event_id=best,
        close=close,
        matched=matched,
    )
