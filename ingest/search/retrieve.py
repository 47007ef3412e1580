"""`ingest.search.retrieve`: the first stage — each text's dense and lexical lists.

For every text of a query, the lexical list (BM25-style sparse vectors, `ingest.rules.lexical`; a
`word*` stands for the words of the query's rooms it starts) and, when the embedder answers and
the index was built with it, the dense list, read from the active generation. Weak lexical
candidates are floored out before fusion (`LEXICAL_FLOOR`). What the lists hold is fused by
`ingest.search.ranking.fusion.rrf` and re-ordered by the second stage (`ingest.search.second`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ingest.embed import Embedder
from ingest.embed.pair import PART_SCALE, is_pair, parts
from ingest.errors import EmbedError, EmbedUnavailable, failure_retrieved
from ingest.index.records import COMPAT_KEY
from ingest.rules import lexical
from ingest.search.hits import has_text
from ingest.search.notices import other_embedder
from ingest.search.query import MAX_LIMIT, SearchQuery, plain_text, prefixes
from ingest.search.ranking import rank
from ingest.store import AsyncCollection, Collection, PointFilter
from ingest.types import SparseVector, StoredPoint

__all__ = [
    "CANDIDATES",
    "LEXICAL_FLOOR",
    "MAX_CANDIDATES",
    "RRF_K",
    "WEIGHTS",
    "Lists",
    "Retriever",
    "lexical_query",
]

log = logging.getLogger("muninn.search")

# Candidates fetched per (retriever, text) before fusion, and per-retriever fusion weights.
CANDIDATES = 30  # per (retriever, text); measured on the locomo-dev folds (RESULTS.md §1b)
RRF_K = 10  # RRF's k: the folds favour the top ranks more than the k = 60 of Cormack et al.
# dense2: a pair embedder's second model (`ingest.embed.pair`), its own list in the fusion.
WEIGHTS: Mapping[str, float] = {"dense": 1.0, "dense2": 1.0, "lexical": 1.0}
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


def lexical_query(text: str) -> SparseVector:
    """The sparse query vector of one text, without its stop words: "when did … the …"
    otherwise fills the list with windows that share only function words."""
    return lexical.query_vector(" ".join(rank.content_terms(text)) or text)


@dataclass
class Lists:
    """The first stage's answer: each (retriever, text)'s (point id, score), best first; the
    points they name; the query's dense vectors (None: lexical only) and the warnings why."""

    lists: dict[tuple[str, str], list[tuple[str, float]]] = field(default_factory=dict)
    points: dict[str, StoredPoint] = field(default_factory=dict)
    dense: list[list[float]] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def retrievers(self) -> list[str]:
        """The kinds that answered, `dense` and `lexical` (a pair's two lists are `dense`)."""
        kinds = {"dense" if r == "dense2" else r for r, _ in self.lists}
        return sorted(kinds, key=["dense", "lexical"].index)


@dataclass
class Retriever:
    """Dense and lexical candidates of a query from one generation (`Searcher`'s settings)."""

    embedder: Embedder | None
    candidates: int = CANDIDATES
    weights: Mapping[str, float] = field(default_factory=lambda: dict(WEIGHTS))
    lexical_floor: float = LEXICAL_FLOOR
    # the sparse vector of one text (`Searcher.lexical_query`, which a subclass may change)
    sparse_of: Callable[[str], SparseVector] = lexical_query
    # The embedder the last collection read was built with: a generation's never changes (a
    # new embedder builds a new generation), and its read was a thread hop on every query.
    _built_with: tuple[AsyncCollection, Any] | None = field(default=None, repr=False)

    _warming: set[asyncio.Future[Any]] = field(default_factory=set, repr=False)

    def warm(self, texts: Sequence[str]) -> None:
        """Start embedding a search's texts now, as `lists` will (the embedder remembers a
        question's vectors, and a call while its run is under way joins it): a command's
        question runs in the models while its room's log is read, not after it. None for a
        `word*` (the lexical side's), nor without an embedder; a failure is `lists`' to tell."""
        if self.embedder is None or not texts or any(prefixes(t) for t in texts):
            return
        run = asyncio.ensure_future(self.embedder.embed_queries([plain_text(t) for t in texts]))
        self._warming.add(run)  # held until done: the loop keeps only a weak reference
        run.add_done_callback(self._warming.discard)
        run.add_done_callback(failure_retrieved)  # the search's own call reports a failure

    def fusing(self, found: Lists) -> bool:
        """Whether dense lists are fused (then the lexical floor and the ranker apply)."""
        return found.dense is not None and self.weights.get("dense", 1.0) > 0

    async def lists(self, col: AsyncCollection, query: SearchQuery) -> Lists:
        """Every (retriever, text) list of `query`, read from `col`."""
        found = Lists()
        flt = query.point_filter()
        depth = self._depth(query)
        vocabulary = await self._vocabulary(col, query, flt)

        async def dense() -> list[list[float]] | None:
            # A `word*` is the lexical side's: its words are the room's, which neither the
            # embedder nor the ranker's term features know. Such a query is answered lexically,
            # as is one asking for its words alone (`match: words`): no model runs for it.
            if vocabulary or query.match == "words":
                return None
            texts = [plain_text(t) for t in query.texts]
            return await self._query_vectors(col, texts, found.warnings)

        # The lexical lists are read while the query is embedded: the store and the models
        # run in worker threads, and on two cores neither fills both.
        lexical = asyncio.gather(
            *(col.sparse_search(self._sparse(t, vocabulary), flt, depth) for t in query.texts)
        )
        found.dense, sparse = await asyncio.gather(dense(), lexical)
        # The floor keeps weak lexical matches from outvoting dense ones; alone, they are
        # still the best answer there is.
        floor = self.lexical_floor if self.fusing(found) else 0.0
        for text, scored in zip(query.texts, sparse, strict=True):
            found.lists[("lexical", text)] = _scored(_above_floor(scored, floor), found.points)
        if found.dense is not None:
            await self._dense_lists(col, query.texts, found.dense, flt, depth, found)
        return found

    async def _dense_lists(
        self,
        col: AsyncCollection,
        texts: Sequence[str],
        vectors: Sequence[Sequence[float]],
        flt: PointFilter,
        depth: int,
        found: Lists,
    ) -> None:
        """Each text's dense list, all read at once; a pair embedder's two (`dense`, `dense2`):
        one a model, each scored by that model's own cosine (`ingest.embed.pair.parts`)."""
        pair = self.embedder is not None and is_pair(self.embedder.identity)
        named: list[tuple[str, str, Sequence[float]]] = []
        for text, vector in zip(texts, vectors, strict=True):
            if pair:
                first, second = parts(vector)
                named += [("dense", text, first), ("dense2", text, second)]
            else:
                named.append(("dense", text, vector))
        # One hop: the engine holds the GIL throughout, so two lists in two threads ran one
        # after the other anyway, a hop each.
        read = await col.dense_searches([v for _, _, v in named], flt, depth)
        scale = PART_SCALE if pair else 1.0
        for (name, text, _), scored in zip(named, read, strict=True):
            listed = _scored(scored, found.points)
            found.lists[(name, text)] = [(pid, score * scale) for pid, score in listed]

    def _sparse(self, text: str, vocabulary: Counter[str]) -> SparseVector:
        """`sparse_of`, with each `word*` standing for the words of `vocabulary` it starts
        (`lexical.expand_prefix`)."""
        if not vocabulary:
            return self.sparse_of(text)
        words = plain_text(text)
        expanded = [w for s in prefixes(text) for w in lexical.expand_prefix(s, vocabulary)]
        return lexical.query_vector(" ".join(rank.content_terms(words)) or words, expanded)

    def _depth(self, query: SearchQuery) -> int:
        """Candidates a list fetches: more for a filter that drops some (`match: words` drops
        the windows holding only some of the words), or a later page."""
        depth = self.candidates
        if query.filter or query.offset or query.match == "words":
            depth = max(depth, (query.offset + query.limit) * FILTERED_DEPTH, MAX_LIMIT)
        return min(depth, MAX_CANDIDATES)

    async def _vocabulary(
        self, col: AsyncCollection, query: SearchQuery, flt: PointFilter
    ) -> Counter[str]:
        """The words said in the query's rooms (its filter's points, up to `VOCABULARY_POINTS`),
        read only when a text has a `word*`."""
        if not any(prefixes(t) for t in query.texts):
            return Counter()  # empty: the query has no `word*`

        def read(points: Collection) -> Counter[str]:
            words: Counter[str] = Counter()
            for point in itertools.islice(points.scroll(flt), VOCABULARY_POINTS):
                for m in point.payload.get("messages", []):
                    if has_text(m):
                        words.update(lexical.tokens(str(m["body"])))
            return words

        return await col.run(read)

    async def _query_vectors(
        self, col: AsyncCollection, texts: Sequence[str], warnings: list[str]
    ) -> list[list[float]] | None:
        """Embed all texts in one batch; None (lexical only, with a warning) if we cannot."""
        if self.embedder is None:
            warnings.append("no embedder configured: lexical results only")
            return None
        # Embed first: an unreachable embedder must be reported as such, and an Ollama
        # identity (its dimension) is only known once the model has answered.
        try:
            vectors = await self.embedder.embed_queries(list(texts))
        except EmbedUnavailable as e:
            log.warning("embedder unavailable, answering from lexical only: %s", e)
            warnings.append(f"embedder unavailable ({e}): lexical results only")
            return None
        except EmbedError as e:
            log.warning("embedder failed, answering from lexical only: %s", e)
            warnings.append(f"embedder failed ({e}): lexical results only")
            return None
        built_with = await self._embedder_of(col)
        mine = dict(self.embedder.identity.as_record())
        if built_with is not None and built_with != mine:
            warnings.append(other_embedder(built_with, mine))
            return None
        return vectors

    async def _embedder_of(self, col: AsyncCollection) -> Any:
        """The embedder identity `col`'s generation records (None: not recorded yet)."""
        if self._built_with is not None and self._built_with[0] is col:
            return self._built_with[1]
        built_with = (await col.get_meta(COMPAT_KEY) or {}).get("embedder")
        if built_with is not None:
            self._built_with = (col, built_with)
        return built_with


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
