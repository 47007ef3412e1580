"""`ingest.search.searcher`: the one read path's call, `Searcher.search`.

Callers (the bot, the CLI, Personas) give a `SearchQuery` (`ingest.search.query`); they never
rank or read the store, and get `ingest.search.hits` records back.
For each text, dense and lexical candidates are fetched (`ingest.search.retrieve`) and every
list is fused by reciprocal rank; when both retrievers answered, the second stage
(`ingest.search.second`, `ingest.search.ranking.rank`'s model) re-orders the fused candidates and
judges which match closely (docs/ARCHITECTURE.md §3 rule 22c): a person's view shows those (or
the nearest, said to be), an agent's every candidate marked; made-up words answer nothing.
Hits are revalidated before they are returned: a hit whose events were purged (a tombstone not
yet applied), redacted, or whose room left the reader's scope since indexing is dropped and
counted in `dropped_stale`, never shown. `Searcher.search` is the one call for every caller:
given the room logs a command has read (`ingest.search.logs.request.RoomLogs`), it also fuses
their transcript matches with the index's candidates and cuts every hit to what the room's
readers may see (`ingest.search.logs.roomlogs`). Every page is revalidated by one loop
(`Candidates.confirmed`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ingest.embed import Embedder
from ingest.embed.pair import is_pair
from ingest.errors import StoreError
from ingest.index.records import CURSOR_PREFIX, TOMBSTONE_PREFIX, Tombstone
from ingest.search._candidates import Candidates
from ingest.search.hits import (
    Hit,
    SearchResult,
    WindowPayload,
    cited_events,
    window_of,
    window_purged,
)
from ingest.search.logs.request import RoomLogs
from ingest.search.logs.roomlogs import Cut, Found, fused_page, log_finds
from ingest.search.matches import Terms, expand, newest_first, person_page, with_matched
from ingest.search.notices import EMPTY_INDEX
from ingest.search.query import MAX_OFFSET, SearchQuery
from ingest.search.ranking.fusion import rrf
from ingest.search.retrieve import (
    CANDIDATES,
    LEXICAL_FLOOR,
    MAX_CANDIDATES,
    RRF_K,
    WEIGHTS,
    Retriever,
    lexical_query,
)
from ingest.search.second import SecondStage
from ingest.search.tails import LogRead, Tail
from ingest.store import AsyncCollection, AsyncPurges, AsyncStore, Store
from ingest.store.purges import PurgeLog
from ingest.types import SparseVector

log = logging.getLogger("muninn.search")

EARLY = 2  # a query of at most this many rooms starts its revalidation while it is ranked


# Revalidation against the homeserver, one window at a time: given (room_id, event_ids) of one
# window say whether it is still live and visible; None means "no homeserver configured, trust
# the writer's records". (The whole reply at once is a `WindowCheck`, below.)
EventsCheck = Callable[[str, Sequence[str]], Awaitable[bool]]


@dataclass(frozen=True)
class SearchSettings:
    """The read path's experiment settings in one record, the product's by default: a benchmark
    or a test passes its own to measure a lever (bench/RESULTS.md §1b, §16).

    - `candidates`: each (retriever, text) list's depth (`ingest.search.retrieve`);
    - `weights`: each list's weight in the fusion, by retriever (`dense`, `dense2`, `lexical`;
      0 leaves a list out, and a lexical weight of 0 leaves the ranker out too);
    - `lexical_floor`: a lexical score under which a window is no candidate, where dense lists
      are fused;
    - `rrf_k`: reciprocal-rank fusion's k (`ingest.search.ranking.fusion`);
    - `ranker`: whether the second stage re-orders the fused candidates and judges them;
    - `relevance_floor`: the close/not-close bar; None: the one trained for the embedder
      (`ingest.search.ranking.models.for_embedder`, rule 22c).
    """

    candidates: int = CANDIDATES
    weights: Mapping[str, float] = field(default_factory=lambda: dict(WEIGHTS))
    lexical_floor: float = LEXICAL_FLOOR
    rrf_k: int = RRF_K
    ranker: bool = True
    relevance_floor: float | None = None


PRODUCT = SearchSettings()  # what `muninn run`, the CLI and MCP search with


@runtime_checkable
class WindowCheck(Protocol):
    """Revalidation of a whole reply at once (`ingest.search.revalidate.LiveCheck`): the
    payloads of the windows it would show and each room's cursor (where the writer's walk stood
    when the points were read) → which may be shown. Preferred to an `EventsCheck`."""

    async def windows(
        self,
        payloads: Sequence[WindowPayload],
        cursors: Mapping[str, str | None],
        early: dict[str, asyncio.Future[Any]] | None = None,
        known: Mapping[str, Tail] | None = None,
    ) -> Sequence[bool]: ...

    def early(self, cursors: Mapping[str, str | None]) -> dict[str, asyncio.Future[Any]]:
        """Start what `windows` will read of these rooms now, while the query is ranked."""
        ...


class Searcher:
    """The read path over the active generation of a store."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        *,
        server_name: str,
        live_check: EventsCheck | WindowCheck | None = None,
        settings: SearchSettings = PRODUCT,
        purges: PurgeLog | None = None,
    ) -> None:
        self.store = store
        self.purges = purges  # the purges readable without the store (`ingest.store.purges`)
        self._store = AsyncStore(store)
        self._purges = AsyncPurges(purges) if purges is not None else None
        self.embedder = embedder
        self.server_name = server_name
        self.live_check = live_check
        self.settings = settings
        self.weights = dict(settings.weights)
        # The first stage (`ingest.search.retrieve`): each text's dense and lexical lists.
        self.first = Retriever(
            embedder,
            settings.candidates,
            self.weights,
            settings.lexical_floor,
            sparse_of=self.lexical_query,
        )
        # The second stage (`ingest.search.second`) re-orders the fused candidates when both
        # retrievers answered; windows under the relevance floor are not close matches.
        self.second = SecondStage(embedder, settings.relevance_floor)
        self._collection: AsyncCollection | None = None
        self._generation: str | None = None

    async def _active(self) -> AsyncCollection | None:
        active = await self._store.active()
        if active is None:
            return None
        if active != self._generation or self._collection is None:
            col = await self._store.open(active, dense_dim=None, create=False)
            self._collection, self._generation = col, active
        return self._collection

    async def _listed(self, prefix: str) -> tuple[AsyncCollection | None, dict[str, Any]]:
        """`_active` and its records under `prefix`: one hop while the generation stays open."""
        if (col := self._collection) is not None:
            gen, sync = self._generation, col.sync
            kept = await self._store.run(
                lambda s: sync.list_meta(prefix) if s.active() == gen else None
            )
            if kept is not None:
                return col, kept
        col = await self._active()
        return col, (await col.list_meta(prefix) if col else {})

    async def search(
        self, query: SearchQuery | None, room_logs: RoomLogs | None = None
    ) -> SearchResult:
        """The one read path: the first `query.limit` candidates passing revalidation, best first.

        With `room_logs` (the bot's `!search`): the index's candidates fused with the
        transcript matches of the logs the command read (`ingest.search.logs.roomlogs`), every
        message cut to what each room's readers may see (`RoomView.audience`; a room with no
        view: no cut), and a page of `room_logs.asked.limit` hits after the `depth` earlier
        pages showed. `query` None: the logs alone (a /regex/, or no text for the index)."""
        if room_logs is not None:
            return await self._fused(query, room_logs)
        if query is None:
            raise ValueError("a search of the index alone needs a query")
        pool = await self._rank(query)
        if query.sort == "recent":
            pool.by_recent()
        wanted = query.offset + query.limit
        # The first `wanted` candidates confirmed: a stale one's place goes to the next, all
        # missing ones checked at once (their round trips overlapping).
        live, stale = await pool.confirmed(
            self._confirm, lambda stale: pool.first(wanted, skip=stale)
        )
        result = SearchResult(
            hits=pool.first(wanted, skip=stale),
            warnings=pool.warnings,
            retrievers=pool.retrievers,
            dropped_stale=len(stale),
            below_floor=pool.below_floor,
            nothing_close=pool.nothing_close,
        )
        # A candidate left unchecked is a next page (checked when it is asked for: a page
        # that then finds it stale says it is the last).
        more = len(result.hits) == wanted and bool(pool.first(1, skip=live | stale))
        page = result.hits[query.offset :]
        if pool.close_first:  # a person's page: the close matches, or the weaker ones
            page, result.weaker = person_page(page, query.limit, lambda h: h.close)
            after = result.hits[query.offset + len(page) :]
            more = more or bool(after)
            following = after or pool.first(1, skip=live | stale)
            result.weaker_next = more and bool(following) and not following[0].close
        # A window matched by meaning quotes the message its stored lines chose when its hit
        # was built (`Candidates.first`, `ingest.search.quotes`): no model runs here.
        shown = [
            h if h.matched else with_matched(h, (h.best_event_id,), self.server_name) for h in page
        ]
        result.hits = newest_first(shown) if query.sort == "recent" else shown
        result.matched = [str(m["event_id"]) for _, m in expand(result.hits, query.sort)]
        result.next_offset = query.offset + len(page) if more else None
        result.sort = query.sort
        return result

    async def _fused(self, query: SearchQuery | None, room_logs: RoomLogs) -> SearchResult:
        """`search` with the room logs: rank, fold the logs, fuse, confirm what is shown."""
        fetch = min(MAX_CANDIDATES, (room_logs.asked.limit + room_logs.depth) * 3)
        fetch = MAX_CANDIDATES if room_logs.asked.sort == "recent" else fetch  # all, by time
        # The logs were read after the marks were taken: a log reaching back to its room's
        # mark revalidates that room's hits, no tail read of their own.
        logs: dict[str, LogRead] = {
            v.log.room_id: LogRead(v.log.raw, room_logs.marks.get(v.log.room_id))
            for v in room_logs.views
        }
        pool = Candidates()  # no query: the logs' alone
        if query is not None:
            try:
                pool = await self._rank(query, logs)
            except StoreError as e:
                log.warning("store unavailable, answering from the transcript: %s", e)
                pool = Candidates(warnings=[f"the index is unavailable ({e}): transcript only"])
        stones = pool.stones if pool.ranked else []
        found: list[Found] = []
        cut = Cut({})  # no view: no room's readers to cut to
        points = list(pool.points.values())  # the candidates: the rooms' cuts judge them too
        if room_logs.views and not pool.ranked:
            try:
                stones = await self.tombstones()
            except StoreError as e:  # no log text a purge may cover: the logs stay out
                log.warning("purges cannot be read, no log text is shown: %s", e)
                pool.warnings.append(
                    f"the purge records cannot be read ({e}): recent messages are not shown"
                )
                # Their rooms' readers still cut the index's hits.
                cut = Cut.of(room_logs.views, [() for _ in room_logs.views], points)
                room_logs = replace(room_logs, views=())
        if room_logs.views:
            # The folds scrub and match up to `SCAN_TEXT` per room: seconds of CPU for large
            # messages, run in a thread so appservice transactions and other rooms do not wait.
            found, cut = await asyncio.to_thread(log_finds, room_logs, stones, points, fetch)
        return await fused_page(
            pool, found, cut, room_logs, self._confirm, self.server_name, fetch
        )

    async def _rank(
        self, query: SearchQuery, logs: Mapping[str, LogRead] | None = None
    ) -> Candidates:
        """Every candidate of the query, fused, best first; none of them revalidated yet.

        `logs`: rooms' events the caller read for the query after taking the writer's marks
        (the bot's room log for the command it answers). A room whose log reaches back to
        its mark is revalidated from it (`ingest.search.tails.tail_since`) instead of reading
        its tail: the points, read after the mark, hold at least everything up to it.
        """
        pool = Candidates(
            texts=query.texts,
            server_name=self.server_name,
            filter=query.filter,
            senders=frozenset(query.senders or ()),
        )
        # The cursors before the points (holding at least all up to them): a tail after them.
        col, cursors = await self._listed(CURSOR_PREFIX)
        if col is None:
            pool.warnings.append(EMPTY_INDEX)
            return pool
        if query.match == "words":  # each message listed holds the words of a text (`Terms`)
            pool.filter = replace(query.filter, holding=tuple(Terms.of(t) for t in query.texts))
        pool.cursors = {
            k.removeprefix(CURSOR_PREFIX): v.get("token") if isinstance(v, dict) else None
            for k, v in cursors.items()
        }
        for room, read in (logs or {}).items():
            tail = read.tail()
            if tail is not None:
                pool.known[room] = tail
        check = self.live_check
        if isinstance(check, WindowCheck) and query.room_ids and len(query.room_ids) <= EARLY:
            # The homeserver's part of the check overlaps the embedding and the store's: it
            # needs only the cursors, and is used (once) by this query's first `_confirm`.
            pool.early = check.early(
                {r: pool.cursors.get(r) for r in query.room_ids if r not in pool.known}
            )
        # `sort:recent` lists every message that matches by time: the pool reaches deeper.
        deep = replace(query, offset=MAX_OFFSET) if query.sort == "recent" else query
        found = await self.first.lists(col, deep)
        pool.dense = found.dense
        pool.pair = self.embedder is not None and is_pair(self.embedder.identity)
        pool.warnings.extend(found.warnings)
        pool.retrievers = found.retrievers
        pool.stones = await self.tombstones()
        pool.points = found.points
        fused = rrf(
            {key: [pid for pid, _ in scored] for key, scored in found.lists.items()},
            k=self.settings.rrf_k,
            weights=self.weights,
        )
        reranks = self.settings.ranker and self.weights.get("lexical", 1.0) > 0
        if self.first.fusing(found) and reranks:
            assert found.dense is not None
            judged = await self.second.rerank(
                fused, found.lists, found.points, query.texts, found.dense
            )
            # A list ordered by time is of the close matches. Every other list is the
            # ranker's order, a person's as an agent's, its close matches those it leads with
            # (`Judgment.leading`): a person pages through them, then the weaker ones, never
            # on one page (or, none close, the nearest, said to be).
            if query.sort == "recent":
                pool.ranked, pool.close = judged.shown(), judged.close
            else:
                pool.ranked, pool.close = judged.ranked, judged.leading()
                pool.close_first = query.close_only
            pool.below_floor = judged.refused + len(judged.ranked) - len(pool.ranked)
            pool.nothing_close = bool(judged.ranked) and not pool.close
        else:
            pool.ranked = fused
        return pool

    def lexical_query(self, text: str) -> SparseVector:
        """The sparse query vector of one text (`ingest.search.retrieve.lexical_query`)."""
        return lexical_query(text)

    async def _confirm(self, pool: Candidates, hits: Sequence[Hit]) -> list[bool]:
        """Which of `hits` (of `pool`, trimmed or not) may be shown now, checked at once: the
        whole window each cites, not purged and (with a live check) still live and in scope."""
        payloads = [window_of(pool.points[h.point_id]) for h in hits]
        kept = [not window_purged(p, pool.stones) for p in payloads]
        check = self.live_check
        if check is None:
            return kept
        asked = [p for p, ok in zip(payloads, kept, strict=True) if ok]
        if isinstance(check, WindowCheck):
            answers = (
                list(await check.windows(asked, pool.cursors, pool.early, pool.known))
                if asked
                else []
            )
        else:
            answers = list(
                await asyncio.gather(*(check(str(p["room_id"]), cited_events(p)) for p in asked))
            )
        live = iter(answers)
        return [ok and next(live) for ok in kept]

    async def marks(self) -> dict[str, str]:
        """Each room's mark: the newest event the writer has walked (its cursor's
        `last_event_id`). Taken before a read of a room's log, a log that reaches back to it
        holds everything the points read later may lack (`_rank`'s `logs`). {} when the index
        is empty or cannot be read: the tails are then read as usual."""
        try:
            records = (await self._listed(CURSOR_PREFIX))[1]
        except StoreError:
            return {}  # `_rank` reports the store
        return {
            k.removeprefix(CURSOR_PREFIX): str(v["last_event_id"])
            for k, v in records.items()
            if isinstance(v, dict) and isinstance(v.get("last_event_id"), str)
        }

    async def tombstones(self) -> list[Tombstone]:
        """Every recorded purge, applied or not: the purge file's and the active generation's.

        With a purge file the store may be down (its records are all in the file too).
        Raises StoreError (`PurgesUnreadable`) when they cannot be read: show no log text then.
        """
        filed: list[Tombstone] = []
        if self._purges is not None:
            filed.extend(map(Tombstone.from_meta, await self._purges.read()))
        try:
            col, stored = await self._listed(TOMBSTONE_PREFIX)
            if col is None:
                return filed
        except StoreError as e:
            if self.purges is None:
                raise
            log.warning("store unavailable, purges read from %s: %s", self.purges.path, e)
            return filed
        return [*filed, *map(Tombstone.from_meta, stored.values())]
