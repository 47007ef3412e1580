"""`ingest.search.searcher`: the one read path's call, `Searcher.search`. Query embedding,
retrieval, fusion, revalidation.

Callers (the bot, the CLI, Personas) give a `SearchQuery` (`ingest.search.query`); they never rank
or read the store, and get `ingest.search.hits` records back.
For each text, dense and lexical candidates are fetched and every list is fused by reciprocal
rank; when both retrievers answered, `ingest.search.rank` re-orders the fused
candidates and leaves out those under its relevance floor (counted in `below_floor`, never
shown), so a query nothing matches answers nothing. Hits are revalidated before they are
returned: a hit whose events were purged (a tombstone not yet applied), redacted, or whose
room left the reader's scope since indexing is dropped and counted in `dropped_stale`, never
shown. `Searcher.search` is the one call for every caller: given the room logs a command has
read (`ingest.search.roomlogs`), it also fuses their transcript matches with the index's candidates
and cuts every hit to what the room's readers may see.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from ingest import lexical
from ingest.embed import Embedder
from ingest.errors import EmbedError, EmbedUnavailable, StoreError
from ingest.purges import PurgeLog
from ingest.records import COMPAT_KEY, CURSOR_PREFIX, TOMBSTONE_PREFIX, Tombstone
from ingest.search import rank
from ingest.search.fusion import rrf, text_key
from ingest.search.hits import (
    Candidates,
    Hit,
    SearchResult,
    WindowPayload,
    cited_events,
    has_text,
    order_hits,
    window_of,
    window_purged,
    window_span,
)
from ingest.search.query import MAX_LIMIT, SearchQuery, plain_text, prefixes
from ingest.search.rank import RankModel
from ingest.search.revalidate import LogRead, Tail
from ingest.search.roomlogs import RoomLogs, Visibility, fused_page, log_finds
from ingest.store import Collection, PointFilter, Store
from ingest.types import EmbedderIdentity, SparseVector, StoredPoint

log = logging.getLogger("muninn.search")

EARLY = 2  # a query of at most this many rooms starts its revalidation while it is ranked

# Candidates fetched per (retriever, text) before fusion, and per-retriever fusion weights.
CANDIDATES = 30  # per (retriever, text); measured on the locomo-dev folds (RESULTS.md §1b)
RRF_K = 10  # RRF's k: the folds favour the top ranks more than the k = 60 of Cormack et al.
WEIGHTS: Mapping[str, float] = {"dense": 1.0, "lexical": 1.0}
# A lexical candidate scoring under this fraction of its list's best matched only the query's
# weakest terms (`err` of `ERR_7731X`, `the` of a question) and gets no vote in the fusion.
# Rank fusion forgets score margins: without the floor, fifteen windows sharing only `err`,
# ranked high by the dense side, pushed the one window holding `ERR_7731X` (lexical score 9
# against their 0.9) down to fourth. Applied only when dense lists are fused; 0 disables it.
LEXICAL_FLOOR = 0.2
# `word*`: the words it may stand for are read from this many of the query's points at most.
VOCABULARY_POINTS = 5000
# With filters (has:link, -word…) or a later page, each list fetches this many times more
# candidates: a filter drops some, a page passes over the earlier ones.
FILTERED_DEPTH = 3
MAX_CANDIDATES = 200


# Revalidation against the homeserver: given (room_id, event_ids) of one window say whether it
# is still live and visible; None means "no homeserver configured, trust the writer's records".
LiveCheck = Callable[[str, Sequence[str]], Awaitable[bool]]


@runtime_checkable
class WindowCheck(Protocol):
    """Revalidation of a whole reply at once (`ingest.search.revalidate.LiveCheck`): the
    payloads of the windows it would show and each room's cursor (where the writer's walk stood
    when the points were read) → which may be shown. Preferred to a `LiveCheck` when given."""

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
        live_check: LiveCheck | WindowCheck | None = None,
        candidates: int = CANDIDATES,
        weights: Mapping[str, float] = WEIGHTS,
        lexical_floor: float = LEXICAL_FLOOR,
        rrf_k: int = RRF_K,
        ranker: bool = True,
        relevance_floor: float | None = None,
        purges: PurgeLog | None = None,
    ) -> None:
        self.store = store
        self.purges = purges  # the purges readable without the store (`ingest.purges`)
        self.embedder = embedder
        self.server_name = server_name
        self.live_check = live_check
        self.candidates = candidates
        self.weights = dict(weights)
        self.lexical_floor = lexical_floor
        self.rrf_k = rrf_k
        # The second stage (`ingest.search.rank`) re-orders the fused candidates when both
        # retrievers answered; windows under `relevance_floor` (None: the one trained for the
        # embedder, `ingest.search.rank.for_embedder`) are not shown at all.
        self.ranker = ranker
        self.relevance_floor = relevance_floor
        self._collection: Collection | None = None
        self._generation: str | None = None
        # The embedder's direction of made-up words (`_made_up`), for the identity it was taken.
        self._nonsense: tuple[EmbedderIdentity, list[float]] | None = None

    async def _active(self) -> Collection | None:
        active = await asyncio.to_thread(self.store.active)
        if active is None:
            return None
        if active != self._generation or self._collection is None:
            col = await asyncio.to_thread(self.store.open, active, dense_dim=None, create=False)
            self._collection, self._generation = col, active
        return self._collection

    async def search(
        self,
        query: SearchQuery | None,
        logs: Mapping[str, LogRead] | None = None,
        *,
        room_logs: RoomLogs | None = None,
        audiences: Mapping[str, Visibility] | None = None,
    ) -> SearchResult:
        """The one read path: the first `query.limit` candidates that pass revalidation, best
        first (`logs`: as for `_rank`).

        With `room_logs` (the bot's `!search`): the index's candidates fused with the
        transcript matches of the logs the command read (`ingest.search.roomlogs`), every message
        cut to what `audiences` (room → who reads the reply there; a room absent: no cut) may see,
        and a page of `room_logs.asked.limit` hits after the `depth` earlier pages showed.
        `query` None: the logs alone (a /regex/, or no text for the index).
        """
        if room_logs is not None:
            return await self._fused(query, room_logs, audiences or {})
        if query is None:
            raise ValueError("a search of the index alone needs a query")
        pool = await self._rank(query, logs)
        result = SearchResult(
            warnings=pool.warnings, retrievers=pool.retrievers, below_floor=pool.below_floor
        )
        checked: set[str] = set()
        wanted = query.offset + query.limit
        while len(result.hits) < wanted:
            # As many at once as hits are missing: the candidates a one-by-one walk would
            # check (each is reached even if all before it pass), their round trips overlapping.
            batch = pool.first(wanted - len(result.hits), skip=checked)
            if not batch:
                break
            checked.update(h.point_id for h in batch)
            for hit, ok in zip(batch, await self._confirm(pool, batch), strict=True):
                if ok:
                    result.hits.append(hit)
                else:
                    result.dropped_stale += 1
        # A candidate left unchecked is a next page (checked when it is asked for: a page
        # that then finds it stale says it is the last).
        more = len(result.hits) == wanted and bool(pool.first(1, skip=checked))
        result.hits = order_hits(result.hits[query.offset :], query.sort)
        result.next_offset = wanted if more else None
        result.sort = query.sort
        return result

    async def _fused(
        self, query: SearchQuery | None, room_logs: RoomLogs, audiences: Mapping[str, Visibility]
    ) -> SearchResult:
        """`search` with the room logs: rank, fold the logs, fuse, confirm what is shown."""
        fetch = min(MAX_CANDIDATES, (room_logs.asked.limit + room_logs.depth) * 3)
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
        if room_logs.views and not pool.ranked:
            try:
                stones = await self.tombstones()
            except StoreError as e:  # no log text a purge may cover: the logs stay out
                log.warning("purges cannot be read, no log text is shown: %s", e)
                pool.warnings.append(
                    f"the purge records cannot be read ({e}): recent messages are not shown"
                )
                room_logs = replace(room_logs, views=())
        # The folds scrub and match up to `SCAN_TEXT` per room: seconds of CPU for large
        # messages, run in a thread so appservice transactions and other rooms do not wait.
        found = await asyncio.to_thread(log_finds, room_logs, stones, audiences, fetch)
        return await fused_page(
            pool, found, room_logs, audiences, self._confirm, self.server_name, fetch
        )

    async def _rank(
        self, query: SearchQuery, logs: Mapping[str, LogRead] | None = None
    ) -> Candidates:
        """Every candidate of the query, fused, best first; none of them revalidated yet.

        `logs`: rooms' events the caller read for the query after taking the writer's marks
        (the bot's room log for the command it answers). A room whose log reaches back to
        its mark is revalidated from it (`ingest.search.revalidate.tail_since`) instead of reading
        its tail: the points, read after the mark, hold at least everything up to it.
        """
        pool = Candidates(texts=query.texts, server_name=self.server_name, filter=query.filter)
        col = await self._active()
        if col is None:
            pool.warnings.append("the index is empty: run `muninn refresh` first")
            return pool
        # The cursors before the points: a point read after its room's cursor holds at least
        # everything up to it, so revalidation needs only the timeline after it.
        cursors = await asyncio.to_thread(col.list_meta, CURSOR_PREFIX)
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
        flt = query.point_filter()
        lists: dict[tuple[str, str], list[tuple[str, float]]] = {}
        points: dict[str, StoredPoint] = {}
        depth = self._depth(query)
        vocabulary = await self._vocabulary(col, query, flt)
        # A `word*` is the lexical side's: its words are the room's, which neither the
        # embedder nor the ranker's term features know. Such a query is answered lexically.
        dense_vectors = (
            None
            if vocabulary
            else await self._query_vectors(col, [plain_text(t) for t in query.texts], pool)
        )
        # The floor keeps weak lexical matches from outvoting dense ones; alone, they are
        # still the best answer there is.
        fusing = dense_vectors is not None and self.weights.get("dense", 1.0) > 0
        floor = self.lexical_floor if fusing else 0.0
        for i, text in enumerate(query.texts):
            sparse = self._sparse(text, vocabulary)
            found = await asyncio.to_thread(col.sparse_search, sparse, flt, depth)
            lists[("lexical", text)] = _scored(_above_floor(found, floor), points)
            if dense_vectors is not None:
                found = await asyncio.to_thread(col.dense_search, dense_vectors[i], flt, depth)
                lists[("dense", text)] = _scored(found, points)
        pool.retrievers = sorted({r for r, _ in lists}, key=["dense", "lexical"].index)
        pool.stones = await self.tombstones()
        pool.points = points
        fused = rrf(
            {key: [pid for pid, _ in found] for key, found in lists.items()},
            k=self.rrf_k,
            weights=self.weights,
        )
        if fusing and self.ranker and self.weights.get("lexical", 1.0) > 0:
            assert dense_vectors is not None
            made_up = await self._made_up(query.texts, dense_vectors)
            pool.ranked, pool.below_floor = self._second_stage(fused, lists, points, made_up)
        else:
            pool.ranked = fused
        return pool

    def _second_stage(
        self,
        fused: Sequence[tuple[str, float]],
        lists: Mapping[tuple[str, str], Sequence[tuple[str, float]]],
        points: Mapping[str, StoredPoint],
        made_up: Sequence[str] = (),
    ) -> tuple[list[tuple[str, float]], int]:
        """The fused candidates re-ordered by `rank`'s model, those under its floor out."""
        ids = [pid for pid, _ in fused]
        shown = {
            pid: [m for m in points[pid].payload.get("messages", []) if has_text(m)] for pid in ids
        }
        bodies = {pid: [str(m["body"]) for m in ms] for pid, ms in shown.items()}
        senders = {pid: [str(m["sender"]) for m in ms] for pid, ms in shown.items()}
        spans = {pid: window_span(window_of(points[pid]), ms) for pid, ms in shown.items() if ms}
        per_text: dict[str, tuple[rank.Found, rank.Found]] = {}
        for retriever, text in lists:
            if retriever == "dense":  # one entry a text, as the fusion counts it
                per_text.setdefault(
                    text_key(text), (lists[("dense", text)], lists[("lexical", text)])
                )
        model = self._rank_model()
        if self.relevance_floor is None:
            floor, wordless = model.floor, model.wordless_floor
        else:
            floor = wordless = self.relevance_floor
        return rank.rerank(
            ids,
            bodies,
            per_text,
            senders,
            spans=spans,
            coefficients=model.coefficients,
            match=model.match,
            floor=floor,
            wordless_floor=wordless,
            made_up={text_key(t) for t in made_up},
        )

    def _rank_model(self) -> RankModel:
        return rank.for_embedder(self.embedder.identity.model if self.embedder else "")

    async def _made_up(
        self, texts: Sequence[str], vectors: Sequence[Sequence[float]]
    ) -> list[str]:
        """The texts near the embedder's made-up words (`RankModel.made_up`); the direction of
        those is embedded once a searcher."""
        threshold = self._rank_model().made_up
        if threshold is None or self.embedder is None or self.relevance_floor is not None:
            return []
        if self._nonsense is None or self._nonsense[0] != self.embedder.identity:
            try:
                refs = await self.embedder.embed_queries(list(rank.MADE_UP))
            except (EmbedError, EmbedUnavailable):
                return []
            self._nonsense = (self.embedder.identity, rank.unit_mean(refs))
        return rank.near(texts, vectors, self._nonsense[1], threshold)

    def lexical_query(self, text: str) -> SparseVector:
        """The sparse query vector of one text, without its stop words: "when did … the …"
        otherwise fills the list with windows that share only function words."""
        return lexical.query_vector(" ".join(rank.content_terms(text)) or text)

    def _sparse(self, text: str, vocabulary: Counter[str]) -> SparseVector:
        """`lexical_query`, with each `word*` standing for the words of `vocabulary` it starts
        (`lexical.expand_prefix`)."""
        if not vocabulary:
            return self.lexical_query(text)
        words = plain_text(text)
        expanded = [w for s in prefixes(text) for w in lexical.expand_prefix(s, vocabulary)]
        return lexical.query_vector(" ".join(rank.content_terms(words)) or words, expanded)

    def _depth(self, query: SearchQuery) -> int:
        """Candidates a list fetches: more for a filter that drops some, or a later page."""
        depth = self.candidates
        if query.filter or query.offset:
            depth = max(depth, (query.offset + query.limit) * FILTERED_DEPTH, MAX_LIMIT)
        return min(depth, MAX_CANDIDATES)

    async def _vocabulary(
        self, col: Collection, query: SearchQuery, flt: PointFilter
    ) -> Counter[str]:
        """The words said in the query's rooms (its filter's points, up to `VOCABULARY_POINTS`),
        read only when a text has a `word*`."""
        if not any(prefixes(t) for t in query.texts):
            return Counter()  # empty: the query has no `word*`

        def read() -> Counter[str]:
            words: Counter[str] = Counter()
            for point in itertools.islice(col.scroll(flt), VOCABULARY_POINTS):
                for m in point.payload.get("messages", []):
                    if has_text(m):
                        words.update(lexical.tokens(str(m["body"])))
            return words

        return await asyncio.to_thread(read)

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

    async def _query_vectors(
        self, col: Collection, texts: Sequence[str], result: SearchResult | Candidates
    ) -> list[list[float]] | None:
        """Embed all texts in one batch; None (lexical only, with a warning) if we cannot."""
        if self.embedder is None:
            result.warnings.append("no embedder configured: lexical results only")
            return None
        # Embed first: an unreachable embedder must be reported as such, and an Ollama
        # identity (its dimension) is only known once the model has answered.
        try:
            vectors = await self.embedder.embed_queries(list(texts))
        except EmbedUnavailable as e:
            log.warning("embedder unavailable, answering from lexical only: %s", e)
            result.warnings.append(f"embedder unavailable ({e}): lexical results only")
            return None
        except EmbedError as e:
            log.warning("embedder failed, answering from lexical only: %s", e)
            result.warnings.append(f"embedder failed ({e}): lexical results only")
            return None
        compat = await asyncio.to_thread(col.get_meta, COMPAT_KEY) or {}
        built_with = compat.get("embedder")
        mine = dict(self.embedder.identity.as_record())
        if built_with is not None and built_with != mine:
            result.warnings.append(
                f"the index was built with another embedder ({_describe(built_with)}, "
                f"configured: {_describe(mine)}): lexical results only until a refresh "
                "rebuilds it"
            )
            return None
        return vectors

    async def marks(self) -> dict[str, str]:
        """Each room's mark: the newest event the writer has walked (its cursor's
        `last_event_id`). Taken before a read of a room's log, a log that reaches back to it
        holds everything the points read later may lack (`_rank`'s `logs`). {} when the index
        is empty or cannot be read: the tails are then read as usual."""
        try:
            col = await self._active()
            records = await asyncio.to_thread(col.list_meta, CURSOR_PREFIX) if col else {}
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
        if self.purges is not None:
            filed.extend(map(Tombstone.from_meta, await asyncio.to_thread(self.purges.read)))
        try:
            col = await self._active()
            if col is None:
                return filed
            stored = await asyncio.to_thread(col.list_meta, TOMBSTONE_PREFIX)
        except StoreError as e:
            if self.purges is None:
                raise
            log.warning("store unavailable, purges read from %s: %s", self.purges.path, e)
            return filed
        return [*filed, *map(Tombstone.from_meta, stored.values())]


def _describe(identity: Mapping[str, object]) -> str:
    return f"{identity.get('provider')}/{identity.get('model')}, {identity.get('dimension')}-d"


def _above_floor(found: Sequence[StoredPoint], floor: float) -> list[StoredPoint]:
    """The candidates scoring at least `floor` × the best score (`found` is best first)."""
    if not found or floor <= 0:
        return list(found)
    cut = found[0].score * floor
    return [p for p in found if p.score >= cut]


def _scored(
    found: Sequence[StoredPoint], points: dict[str, StoredPoint]
) -> list[tuple[str, float]]:
    """The candidates' (id, score), best first, minus windows that say nothing any more: every
    message in them was edited into what is not indexed text (kept for a redaction's revert)."""
    said = [p for p in found if any(has_text(m) for m in p.payload.get("messages", []))]
    for p in said:
        points.setdefault(p.id, p)
    return [(p.id, p.score) for p in said]
