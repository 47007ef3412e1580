"""ingest.search without a homeserver: query validation, and fusion as the read path applies it.

The fusion checks run `Searcher.search` over a real embedded store holding hand-made points
(chosen dense and sparse vectors), so every list's ranks are known exactly; `TableEmbedder`
maps each query text to a chosen vector.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ingest.config import IndexConfig, StoreConfig
from ingest.errors import QueryError
from ingest.index.records import COMPAT_KEY, TOMBSTONE_PREFIX
from ingest.rules import lexical
from ingest.search import Searcher, SearchSettings
from ingest.search.hits import best_message
from ingest.search.query import MAX_LIMIT, MAX_TEXT_BYTES, SearchQuery
from ingest.search.ranking.fusion import text_key
from ingest.search.retrieve import RRF_K
from ingest.store import Collection, PointRecord, Store, open_store
from ingest.types import EmbedderIdentity, SparseVector

DIM = 4
ROOM = "!fusion"
SERVER = "example.org"
COLLECTION = "muninn_test"
GEN = f"{COLLECTION}-000000000001"


# ---------------------------------------------------------------- query validation


@pytest.mark.parametrize(
    "texts",
    [
        [],
        [f"text {i}" for i in range(9)],
        [""],
        ["ok", "   "],
        ["ok", "\n\t"],
    ],
    ids=["none", "nine", "empty", "blank", "whitespace"],
)
def test_query_build_refuses_bad_texts(texts: list[str]) -> None:
    """No text, more than 8, or an empty one is refused with an error naming `texts`."""
    with pytest.raises(QueryError) as e:
        SearchQuery.build(texts)
    assert e.value.field == "texts"
    assert str(e.value).startswith("texts: ")


def test_query_build_refuses_one_string() -> None:
    """A bare string is not taken as a list of its characters."""
    with pytest.raises(QueryError) as e:
        SearchQuery.build("hello")
    assert e.value.field == "texts"


def test_query_build_accepts_one_to_eight_texts() -> None:
    """1 and 8 texts are both within the bound."""
    assert SearchQuery.build(["a"]).texts == ("a",)
    assert len(SearchQuery.build([f"t{i}" for i in range(8)]).texts) == 8


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("x" * MAX_TEXT_BYTES, True),
        ("x" * (MAX_TEXT_BYTES + 1), False),
        ("北" * 333, True),  # 999 bytes
        ("北" * 334, False),  # 334 characters, but 1,002 bytes
    ],
    ids=["1000-ascii", "1001-ascii", "999-bytes-cjk", "1002-bytes-cjk"],
)
def test_query_build_bounds_text_bytes(text: str, ok: bool) -> None:
    """A text is bounded at 1,000 UTF-8 bytes, not characters; over it names `texts`."""
    if ok:
        SearchQuery.build(["fine", text])
        return
    with pytest.raises(QueryError) as e:
        SearchQuery.build(["fine", text])
    assert e.value.field == "texts"
    assert "text 2" in str(e.value)


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1])
def test_query_build_refuses_limit_out_of_range(limit: int) -> None:
    """limit 0 or 51 is refused with an error naming `limit`."""
    with pytest.raises(QueryError) as e:
        SearchQuery.build(["q"], limit=limit)
    assert e.value.field == "limit"


def test_query_build_limit_defaults_to_five_and_allows_fifty() -> None:
    """The default is 5 hits; 1 and 50 are the bounds."""
    assert SearchQuery.build(["q"]).limit == 5
    assert SearchQuery.build(["q"], limit=1).limit == 1
    assert SearchQuery.build(["q"], limit=MAX_LIMIT).limit == MAX_LIMIT


def test_query_build_refuses_after_later_than_before() -> None:
    """after > before is refused naming `after`; after == before is one instant, allowed."""
    with pytest.raises(QueryError) as e:
        SearchQuery.build(["q"], after_ts=2000, before_ts=1000)
    assert e.value.field == "after"
    SearchQuery.build(["q"], after_ts=1000, before_ts=1000)


def test_query_point_filter_carries_every_filter() -> None:
    """room, sender and time filters reach the store filter unchanged."""
    q = SearchQuery.build(
        ["q"], room_ids=["!a"], senders=["@b:x"], after_ts=1, before_ts=2, limit=3
    )
    flt = q.point_filter()
    assert (flt.room_ids, flt.senders, flt.after_ts, flt.before_ts) == (("!a",), ("@b:x",), 1, 2)


# ---------------------------------------------------------------- best message


def test_best_message_shares_most_query_terms_earliest_on_ties() -> None:
    """The excerpt is the message with the most query terms; the earliest wins a tie."""
    messages = [
        {"event_id": "$1", "body": "nothing here"},
        {"event_id": "$2", "body": "the kiwi crop"},
        {"event_id": "$3", "body": "kiwi crop export"},
        {"event_id": "$4", "body": "kiwi crop export"},
    ]
    assert best_message(messages, ["kiwi export"]) == "$3"
    assert best_message(messages, ["unrelated"]) == "$1"
    assert best_message(messages, ["crop", "the"]) == "$2"


# ---------------------------------------------------------------- fusion through the Searcher


class TableEmbedder:
    """Query vectors from a table (by normalised text), counting calls: ranks are chosen."""

    def __init__(self, table: Mapping[str, Sequence[float]]) -> None:
        self.table = {text_key(k): list(v) for k, v in table.items()}
        self.calls: list[list[str]] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity(provider="table", model="table", dimension=DIM)

    async def probe(self) -> EmbedderIdentity:
        return self.identity

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("the read path never embeds documents")

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.table.get(text_key(t), [0.0, 0.0, 0.0, 1.0]) for t in texts]

    async def close(self) -> None:
        pass


def pid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def point(name: str, dense: Sequence[float], terms: Mapping[str, float], ts: int) -> PointRecord:
    """A one-message window named `name` whose lexical vector holds exactly `terms`."""
    weights: dict[int, float] = {}
    for term, w in terms.items():
        weights[lexical.term_index(term)] = w
    ordered = sorted(weights.items())
    sparse = SparseVector(tuple(i for i, _ in ordered), tuple(v for _, v in ordered))
    event = f"${name}"
    payload: dict[str, Any] = {
        "corpus": "chat",
        "room_id": ROOM,
        "room_alias": None,
        "thread_root": None,
        "event_ids": [event],
        "first_event_id": event,
        "last_event_id": event,
        "first_ts": ts,
        "last_ts": ts,
        "senders": ["@u:example.org"],
        "messages": [{"event_id": event, "sender": "@u:example.org", "ts": ts, "body": name}],
        "content_hash": name,
    }
    return PointRecord(pid(name), dense, sparse, payload)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(
        IndexConfig(store=StoreConfig(path=tmp_path / "q"), collection=COLLECTION), tmp_path
    )
    try:
        yield s
    finally:
        s.close()


def fill(store: Store, points: Sequence[PointRecord], generation: str = GEN) -> Collection:
    col = store.open(generation, dense_dim=DIM, create=True)
    col.upsert(points)
    col.flush()
    store.activate(generation)
    return col


def names(hits: Sequence[Any]) -> list[str]:
    return [h.first_event_id.removeprefix("$") for h in hits]


# Ids are uuid5s; these orderings make a tie-break on id the *wrong* answer in each test below.
def by_id(*labels: str) -> list[str]:
    return sorted(labels, key=pid)


E1, E2, E3, E4 = [1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]


def corpus() -> list[PointRecord]:
    """Five windows; lexical and dense ranks for each query below are fixed by construction."""
    return [
        point("a", [0.9, 0.1, 0, 0], {"alpha": 1.0, "beta": 1.0}, 1000),
        point("b", [0.8, 0.3, 0, 0], {"gamma": 1.0}, 2000),
        point("c", [0.5, 0.5, 0.5, 0], {"alpha": 0.6}, 3000),
        point("d", [0, 0, 0.9, 0.1], {"delta": 1.0}, 4000),
        point("e", [0, 0.2, 0.2, 0.9], {"beta": 0.5}, 5000),
    ]


@pytest.mark.parametrize("retriever", ["lexical", "dense"])
async def test_searcher_one_text_gives_the_single_retriever_order(
    store: Store, retriever: str
) -> None:
    """One text answered by one retriever returns exactly that retriever's hits, in its order."""
    col = fill(store, corpus())
    if retriever == "lexical":
        text, embedder = "alpha beta", None
        expected = col.sparse_search(lexical.query_vector(text), None, 50)
    else:
        text = "no shared word"  # no window holds these terms: only dense answers
        embedder = TableEmbedder({text: [0.7, 0.2, 0.6, 0.1]})
        expected = col.dense_search([0.7, 0.2, 0.6, 0.1], None, 50)
    # The first stage alone: the second (`ingest.search.ranking.rank`) re-orders and floors fused
    # candidates.
    first_stage = SearchSettings(lexical_floor=0, ranker=False)
    searcher = Searcher(store, embedder, server_name=SERVER, settings=first_stage)
    result = await searcher.search(SearchQuery.build([text], limit=50))
    assert [h.point_id for h in result.hits] == [p.id for p in expected]
    assert len(result.hits) == (3 if retriever == "lexical" else 5)
    again = await searcher.search(SearchQuery.build([text], limit=50))
    assert again.hits == result.hits


async def test_searcher_first_in_two_lists_outranks_first_in_one(store: Store) -> None:
    """A window ranked first for two texts beats one ranked first for one text only."""
    first_in_one, first_in_two = by_id("b", "a")  # whichever sorts first is the lone winner
    fill(
        store,
        [
            point(first_in_two, E1, {"alpha": 1.0, "beta": 1.0}, 1000),
            point(first_in_one, E2, {"gamma": 1.0}, 2000),
            point("c", E3, {"alpha": 0.5, "beta": 0.5}, 3000),
        ],
    )
    searcher = Searcher(store, None, server_name=SERVER)
    result = await searcher.search(SearchQuery.build(["alpha", "beta", "gamma"]))
    order = names(result.hits)
    assert order[0] == first_in_two
    assert order.index(first_in_two) < order.index(first_in_one)
    assert result.hits[0].score == pytest.approx(2 / (RRF_K + 1))
    assert result.hits[order.index(first_in_one)].score == pytest.approx(1 / (RRF_K + 1))


@pytest.mark.parametrize("duplicate", ["alpha", "ALPHA", "  alpha "])
async def test_searcher_duplicated_text_does_not_count_twice(store: Store, duplicate: str) -> None:
    """Asking the same text twice (up to case and spacing) changes no score and no order."""
    lone, doubled = by_id("a", "b")  # a double count would put `doubled` first
    fill(
        store,
        [point(doubled, E1, {"alpha": 1.0}, 1000), point(lone, E2, {"beta": 1.0}, 2000)],
    )
    table = {"alpha": E1, "beta": E2}
    once = await Searcher(store, TableEmbedder(table), server_name=SERVER).search(
        SearchQuery.build(["alpha", "beta"])
    )
    twice = await Searcher(store, TableEmbedder(table), server_name=SERVER).search(
        SearchQuery.build(["alpha", duplicate, "beta"])
    )
    assert [(h.point_id, h.score) for h in twice.hits] == [
        (h.point_id, h.score) for h in once.hits
    ]
    assert names(twice.hits)[:2] == [lone, doubled]  # a tie, broken by id: no extra vote
    assert twice.hits[0].score == twice.hits[1].score


async def test_searcher_embeds_all_texts_in_one_batch(store: Store) -> None:
    """Every query text goes to the embedder in one call, and both retrievers answer."""
    fill(store, corpus())
    embedder = TableEmbedder({"alpha": E1, "delta": E3})
    result = await Searcher(store, embedder, server_name=SERVER).search(
        SearchQuery.build(["alpha", "delta", "gamma"])
    )
    assert embedder.calls == [["alpha", "delta", "gamma"]]
    assert result.retrievers == ["dense", "lexical"]
    assert result.warnings == []


async def test_searcher_exact_term_beats_weak_partial_matches(store: Store) -> None:
    """A window holding the rare term outranks windows the dense side prefers that share only a
    common one (regression: RRF put the `ERR_7731X` window fourth behind `err`-only windows)."""
    target = point("target", E4, {"err_7731x": 3.0, "7731x": 3.0, "err": 0.3}, 1000)
    weak = [point(f"weak{i}", [1.0, 0.1 * i, 0, 0], {"err": 0.3}, 2000 + i) for i in range(6)]
    fill(store, [target, *weak])
    embedder = TableEmbedder({"ERR_7731X": E1})  # dense ranks every weak window first
    # The first stage's own guard (the second stage reads bodies; these hold no query term, and
    # `tests/ingest/search/test_searcher.py` asks the same of the whole read path over real
    # messages).
    searcher = Searcher(store, embedder, server_name=SERVER, settings=SearchSettings(ranker=False))
    result = await searcher.search(SearchQuery.build(["ERR_7731X"]))
    assert names(result.hits)[0] == "target"


async def test_searcher_lexical_alone_keeps_weak_matches(store: Store) -> None:
    """Without dense lists to outvote them, weak lexical matches are still answered, in order."""
    target = point("target", E4, {"err_7731x": 3.0, "7731x": 3.0, "err": 0.3}, 1000)
    weak = [point(f"weak{i}", E1, {"err": 0.3}, 2000 + i) for i in range(6)]
    fill(store, [target, *weak])
    result = await Searcher(store, None, server_name=SERVER).search(
        SearchQuery.build(["ERR_7731X"], limit=50)
    )
    assert result.retrievers == ["lexical"]
    assert names(result.hits)[0] == "target"
    assert len(result.hits) == 7


async def test_searcher_filters_reach_both_retrievers(store: Store) -> None:
    """A time filter holds for dense and lexical candidates alike: nothing outside it returns."""
    fill(store, corpus())
    embedder = TableEmbedder({"alpha beta": [0.5, 0.5, 0.5, 0.5]})
    result = await Searcher(store, embedder, server_name=SERVER).search(
        SearchQuery.build(["alpha beta"], after_ts=2500, before_ts=4500, limit=50)
    )
    assert sorted(names(result.hits)) == ["c", "d"]


async def test_searcher_adopts_the_stored_dimension_and_follows_activation(
    store: Store,
) -> None:
    """The active generation opens as built (any dimension); a new activation is picked up."""
    fill(store, corpus())
    searcher = Searcher(store, None, server_name=SERVER)
    first = await searcher.search(SearchQuery.build(["gamma"]))
    assert names(first.hits) == ["b"]
    other = f"{COLLECTION}-000000000002"
    col = store.open(other, dense_dim=7, create=True)
    col.upsert([PointRecord(pid("z"), [1.0] * 7, corpus()[1].sparse, corpus()[1].payload)])
    store.activate(other)
    second = await searcher.search(SearchQuery.build(["gamma"]))
    assert [h.point_id for h in second.hits] == [pid("z")]


async def test_searcher_reads_the_marks_and_purges_in_one_hop_and_follows_activation(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command's marks, cursors and purges each read the active generation and its records
    in one worker-thread hop (two each cost a command ~1.4 ms on the loaded host); a new
    activation between two commands is read, its records and none of the old one's."""
    import asyncio

    from ingest.index.records import CURSOR_PREFIX

    col = fill(store, corpus())
    col.put_meta(f"{CURSOR_PREFIX}!a", {"last_event_id": "$old"})
    searcher = Searcher(store, None, server_name=SERVER)
    assert await searcher.marks() == {"!a": "$old"}  # opens the generation
    hops: list[object] = []
    real = asyncio.to_thread

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(fn)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    assert await searcher.marks() == {"!a": "$old"} and len(hops) == 1
    assert await searcher.tombstones() == [] and len(hops) == 2
    other = f"{COLLECTION}-000000000002"
    fill(store, corpus(), other).put_meta(f"{CURSOR_PREFIX}!b", {"last_event_id": "$new"})
    assert await searcher.marks() == {"!b": "$new"}
    assert await searcher.marks() == {"!b": "$new"}


async def test_searcher_empty_store_warns_instead_of_failing(store: Store) -> None:
    """A store with no generation yet answers no hits and a warning naming the fix."""
    result = await Searcher(store, TableEmbedder({}), server_name=SERVER).search(
        SearchQuery.build(["anything"])
    )
    assert result.hits == []
    assert result.dropped_stale == 0
    assert len(result.warnings) == 1
    assert "empty" in result.warnings[0]
    assert "muninn refresh" in result.warnings[0]


async def test_searcher_refuses_dense_from_another_embedder(store: Store) -> None:
    """A generation built by another embedder is never queried with these vectors."""
    col = fill(store, corpus())
    col.put_meta(COMPAT_KEY, {"embedder": {"provider": "local", "model": "m", "dimension": DIM}})
    result = await Searcher(store, TableEmbedder({}), server_name=SERVER).search(
        SearchQuery.build(["alpha"])
    )
    assert result.retrievers == ["lexical"]
    assert any("another embedder" in w for w in result.warnings)
    assert names(result.hits) == ["a", "c"]


async def test_searcher_reads_the_embedder_of_each_generation_it_switches_to(
    store: Store,
) -> None:
    """The embedder a generation was built with is kept once read (rule 22d): its own queries
    keep their dense list, and a switch to a generation another embedder built is refused."""
    mine = TableEmbedder({"alpha": [0.9, 0.1, 0, 0]})
    col = fill(store, corpus())
    col.put_meta(COMPAT_KEY, {"embedder": dict(mine.identity.as_record())})
    searcher = Searcher(store, mine, server_name=SERVER)
    for _ in range(2):
        result = await searcher.search(SearchQuery.build(["alpha"]))
        assert result.retrievers == ["dense", "lexical"] and result.warnings == []
    other = fill(store, corpus(), generation=GEN + "-2")
    other.put_meta(COMPAT_KEY, {"embedder": {"provider": "local", "model": "m", "dimension": DIM}})
    result = await searcher.search(SearchQuery.build(["alpha"]))
    assert result.retrievers == ["lexical"]
    assert any("another embedder" in w for w in result.warnings)


async def test_searcher_drops_hits_inside_a_tombstone(store: Store) -> None:
    """A window with a message inside a not yet applied purge is dropped and counted."""
    col = fill(store, corpus())
    col.put_meta(
        f"{TOMBSTONE_PREFIX}{ROOM}:900:1100", {"room_id": ROOM, "from_ts": 900, "to_ts": 1100}
    )
    col.put_meta(
        f"{TOMBSTONE_PREFIX}!other:0:99999", {"room_id": "!other", "from_ts": 0, "to_ts": 99999}
    )
    result = await Searcher(store, None, server_name=SERVER).search(SearchQuery.build(["alpha"]))
    assert names(result.hits) == ["c"]
    assert result.dropped_stale == 1


async def test_searcher_revalidates_the_walk_in_rank_order(store: Store) -> None:
    """Hits are checked at once, as many as are missing: exactly the windows a one-by-one walk
    in rank order checks, so a stale hit gives its place to the next and is counted once."""
    fill(store, corpus())
    embedder = TableEmbedder({"spread": [0.5, 0.5, 0.5, 0.5]})
    ranked = await Searcher(store, embedder, server_name=SERVER).search(
        SearchQuery.build(["spread"], limit=5)
    )
    order = names(ranked.hits)
    assert len(order) == 5
    asked: list[str] = []

    async def live(room_id: str, event_ids: Sequence[str]) -> bool:
        asked.extend(e.removeprefix("$") for e in event_ids)
        return event_ids != [f"${order[1]}"]

    searcher = Searcher(store, embedder, server_name=SERVER, live_check=live)
    result = await searcher.search(SearchQuery.build(["spread"], limit=2))
    assert names(result.hits) == [order[0], order[2]]
    assert sorted(asked) == sorted(order[:3])
    assert result.dropped_stale == 1
