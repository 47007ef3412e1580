"""One contract for both store adapters: embedded qdrant-edge and Qdrant through qdrant-client
(each adapter's own faults: test_edge_faults.py, test_server.py).

The server adapter runs against qdrant-client's local mode with a path (not ":memory:"), so that
closing and reopening the store is a real persistence check for it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient

from ingest.config import IndexConfig, StoreConfig
from ingest.errors import CompatibilityError, StoreError
from ingest.store import Collection, PointFilter, PointRecord, Store, generation_name, open_store
from ingest.store.server import ServerStore
from ingest.types import SparseVector
from tests.ingest.store.storekit import COLLECTION, DIM, GEN, OTHER_GEN, names, pid, point

Opener = Callable[[], Store]


def make_opener(kind: str, root: Path) -> Opener:
    """Opens (and after a close, reopens) the same backing store under `root`."""
    if kind == "edge":
        cfg = IndexConfig(store=StoreConfig(path=Path("qdrant")), collection=COLLECTION)
        return lambda: open_store(cfg, root)

    def server() -> Store:
        # to_thread tests call from worker threads; local mode's sqlite must allow that.
        client = QdrantClient(path=str(root / "local"), force_disable_check_same_thread=True)
        return ServerStore(client, COLLECTION, "qdrant local mode")

    return server


@pytest.fixture(params=["edge", "server"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    return make_opener(request.param, tmp_path)


@pytest.fixture
def store(opener: Opener) -> Iterator[Store]:
    s = opener()
    yield s
    s.close()


@pytest.fixture
def coll(store: Store) -> Collection:
    return store.open(GEN, dense_dim=DIM, create=True)


# ---------------------------------------------------------------- points


def test_upsert_retrieve_roundtrips_payload(coll: Collection) -> None:
    """A retrieved point carries the payload exactly as written, plus corpus "chat"."""
    p = point("A", thread="$root", events=("$a1", "$a2"), text="hello")
    coll.upsert([p])
    [got] = coll.retrieve([p.id])
    assert got.id == p.id
    assert dict(got.payload) == {**p.payload, "corpus": "chat"}


def test_upsert_same_id_replaces(coll: Collection) -> None:
    """Upserting an id again replaces its payload and vectors; the count does not grow."""
    coll.upsert([point("A", text="old", dense=(1.0, 0.0, 0.0, 0.0))])
    coll.upsert([point("A", text="new", dense=(0.0, 1.0, 0.0, 0.0))])
    assert coll.count() == 1
    assert coll.retrieve([pid("A")])[0].payload["text"] == "new"
    [hit] = coll.dense_search([0.0, 1.0, 0.0, 0.0], None, 1)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_delete_removes_points(coll: Collection) -> None:
    """Deleted ids are gone from retrieve, count and search; other points stay."""
    coll.upsert([point("A"), point("B")])
    coll.delete([pid("A")])
    assert coll.retrieve([pid("A"), pid("B")])[0].id == pid("B")
    assert coll.count() == 1
    assert names(coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 10)) == {"B"}


def test_retrieve_keeps_order_and_skips_missing(coll: Collection) -> None:
    """retrieve answers in the order asked, once per id, leaving out unknown ids."""
    coll.upsert([point("A"), point("B")])
    got = coll.retrieve([pid("B"), pid("Z"), pid("A"), pid("B")])
    assert [p.id for p in got] == [pid("B"), pid("A")]


def test_upsert_wrong_dimension_raises(coll: Collection) -> None:
    """A dense vector of another dimension is refused before it reaches the engine."""
    with pytest.raises(CompatibilityError):
        coll.upsert([point("A", dense=(1.0, 0.0, 0.0))])


def test_scroll_streams_every_point_across_batches(coll: Collection) -> None:
    """scroll pages through the whole collection whatever the batch size."""
    coll.upsert([point(n) for n in "ABCDEFG"])
    assert names(coll.scroll(batch=2)) == set("ABCDEFG")


# ---------------------------------------------------------------- filters

CORPUS = [
    point("A", room="!r1", senders=("@alice:x",), span=(1000, 2000), events=("$a1", "$a2")),
    point("B", room="!r1", senders=("@bob:x", "@alice:x"), span=(3000, 4000), events=("$b1",)),
    point("C", room="!r2", senders=("@carol:x",), span=(5000, 6000), thread="$root"),
    point(
        "D",
        room="!r2",
        senders=("@bob:x",),
        span=(2500, 5500),
        events=("$d1", "$d2", "$d3"),
        thread="$root",
    ),
]
FILTER_CASES = [
    (PointFilter(), "ABCD"),
    (PointFilter(room_ids=("!r1",)), "AB"),
    (PointFilter(room_ids=("!r1", "!r2")), "ABCD"),
    (PointFilter(senders=("@alice:x",)), "AB"),
    (PointFilter(senders=("@carol:x", "@bob:x")), "BCD"),
    (PointFilter(after_ts=4000), "BCD"),  # B ends exactly at 4000: overlap is inclusive
    (PointFilter(after_ts=4001), "CD"),
    (PointFilter(before_ts=2500), "AD"),  # D starts exactly at 2500
    (PointFilter(after_ts=1500, before_ts=2600), "AD"),  # A ends inside, D starts inside
    (PointFilter(event_ids=("$d2",)), "D"),
    (PointFilter(event_ids=("$a1", "$C1")), "AC"),
    (PointFilter(thread_roots=("$root",)), "CD"),
    (PointFilter(thread_roots=(None,)), "AB"),
    (PointFilter(thread_roots=(None, "$root")), "ABCD"),
    (PointFilter(content_hashes=("h-B", "h-C")), "BC"),
    (PointFilter(room_ids=("!r2",), senders=("@bob:x",)), "D"),
    (PointFilter(room_ids=()), ""),  # nothing visible never widens to everything
    (PointFilter(after_ts=3000, before_ts=2000), ""),
]


@pytest.fixture(scope="module", params=["edge", "server"])
def corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Collection]:
    """CORPUS plus meta entries, built once per adapter: the filter tests only read it."""
    store = make_opener(request.param, tmp_path_factory.mktemp(request.param))()
    coll = store.open(GEN, dense_dim=DIM, create=True)
    coll.upsert(CORPUS)
    coll.put_meta("cursor/!r1", {"event_id": "$a2"})
    coll.put_meta("tombstone/!r2", {"from": 0, "to": 9_999})
    yield coll
    store.close()


def _run(coll: Collection, op: str, flt: PointFilter) -> set[str] | int:
    if op == "scroll":
        return names(coll.scroll(flt, batch=2))
    if op == "count":
        return coll.count(flt)
    if op == "dense":
        return names(coll.dense_search([1.0, 0.5, 0.0, 0.0], flt, 50))
    if op == "sparse":
        return names(coll.sparse_search(SparseVector((0,), (1.0,)), flt, 50))
    raise AssertionError(op)


@pytest.mark.parametrize("op", ["scroll", "count", "dense", "sparse"])
@pytest.mark.parametrize(("flt", "expected"), FILTER_CASES)
def test_filter_selects_matching_points(
    corpus: Collection, op: str, flt: PointFilter, expected: str
) -> None:
    """Every filter field narrows scroll, count and both searches alike; meta never shows."""
    want = len(expected) if op == "count" else set(expected)
    assert _run(corpus, op, flt) == want


# ---------------------------------------------------------------- ranking


def test_dense_search_ranks_nearest_first(coll: Collection) -> None:
    """Dense hits come best first by cosine similarity, with scores that say so."""
    coll.upsert(
        [
            point("A", dense=(0.0, 1.0, 0.0, 0.0)),
            point("B", dense=(1.0, 0.1, 0.0, 0.0)),
            point("C", dense=(1.0, 1.0, 0.0, 0.0)),
        ]
    )
    hits = coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 3)
    assert [h.id for h in hits] == [pid("B"), pid("C"), pid("A")]
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[0].payload["room_id"] == "!r1"


def test_dense_searches_are_each_vectors_own_list(coll: Collection) -> None:
    """A pair's two lists read in one call are each vector's own, payloads and all; a query
    vector of another dimension is refused as a single search's is."""
    coll.upsert(
        [
            point("A", dense=(0.0, 1.0, 0.0, 0.0)),
            point("B", dense=(1.0, 0.1, 0.0, 0.0)),
            point("C", dense=(1.0, 1.0, 0.0, 0.0), room="!r2"),
        ]
    )
    vectors = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    first, second = coll.dense_searches(vectors, None, 2)
    assert [h.id for h in first] == [pid("B"), pid("C")]
    assert [h.id for h in second] == [pid("A"), pid("C")]
    assert [(h.id, h.score, h.payload) for h in second] == [
        (h.id, h.score, h.payload) for h in coll.dense_search(vectors[1], None, 2)
    ]
    only_r2 = PointFilter(room_ids=("!r2",))
    assert [[h.id for h in hits] for hits in coll.dense_searches(vectors, only_r2, 5)] == [
        [pid("C")],
        [pid("C")],
    ]
    with pytest.raises(CompatibilityError):
        coll.dense_searches([[1.0, 0.0, 0.0]], None, 2)


def test_sparse_search_rare_term_outweighs_common(coll: Collection) -> None:
    """IDF is applied: one rare shared term beats a thrice-repeated term every document has."""
    common, rare = 1, 7
    filler = [point(n, sparse=SparseVector((common, 2), (1.0, 1.0))) for n in "ABCDEFGH"]
    heavy_common = point("X", sparse=SparseVector((common,), (3.0,)))
    has_rare = point("Y", sparse=SparseVector((common, rare), (1.0, 1.0)))
    coll.upsert([*filler, heavy_common, has_rare])
    hits = coll.sparse_search(SparseVector((common, rare), (1.0, 1.0)), None, 3)
    assert hits[0].id == pid("Y")
    assert hits[1].id == pid("X")  # without IDF, X (3.0) would outrank Y (2.0)


def test_sparse_search_skips_documents_without_query_terms(coll: Collection) -> None:
    """A lexical hit shares at least one term with the query."""
    coll.upsert([point("A", sparse=SparseVector((1,), (1.0,))), point("B")])
    assert names(coll.sparse_search(SparseVector((1, 99), (1.0, 1.0)), None, 10)) == {"A"}


@pytest.mark.parametrize("kind", ["dense", "sparse", "sparse-no-terms"])
def test_search_empty_collection_returns_empty(coll: Collection, kind: str) -> None:
    """Searching a generation with no chat points (meta only) returns no hits."""
    coll.put_meta("complete", {"done": False})
    if kind == "dense":
        assert coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 5) == []
    elif kind == "sparse":
        assert coll.sparse_search(SparseVector((1,), (1.0,)), None, 5) == []
    else:
        assert coll.sparse_search(SparseVector((), ()), None, 5) == []


def test_optimize_keeps_results(coll: Collection) -> None:
    """optimize() (a no-op on the server) changes no answer."""
    coll.upsert([point(n, dense=(1.0, i, 0.0, 0.0)) for i, n in enumerate("ABCD")])
    before = [h.id for h in coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 4)]
    coll.optimize()
    assert [h.id for h in coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 4)] == before
    assert coll.count() == 4


# ---------------------------------------------------------------- meta


def test_meta_put_get_overwrite_delete(coll: Collection) -> None:
    """A meta entry reads back as written, put again overwrites, delete removes it."""
    assert coll.get_meta("cursor/!r1") is None
    coll.put_meta("cursor/!r1", {"event_id": "$a", "ts": 5, "nested": {"l": [1, 2]}})
    assert coll.get_meta("cursor/!r1") == {"event_id": "$a", "ts": 5, "nested": {"l": [1, 2]}}
    coll.put_meta("cursor/!r1", {"event_id": "$b"})
    assert coll.get_meta("cursor/!r1") == {"event_id": "$b"}
    coll.delete_meta("cursor/!r1")
    assert coll.get_meta("cursor/!r1") is None
    coll.delete_meta("never-written")


def test_meta_list_by_prefix(coll: Collection) -> None:
    """list_meta returns exactly the entries under a prefix, keyed by their full key."""
    coll.put_meta("cursor/!r1", {"n": 1})
    coll.put_meta("cursor/!r2", {"n": 2})
    coll.put_meta("tombstone/!r1/1", {"from": 1, "to": 2})
    assert coll.list_meta("cursor/") == {"cursor/!r1": {"n": 1}, "cursor/!r2": {"n": 2}}
    assert set(coll.list_meta()) == {"cursor/!r1", "cursor/!r2", "tombstone/!r1/1"}
    assert coll.list_meta("nothing/") == {}


def test_meta_never_appears_in_chat_reads(coll: Collection) -> None:
    """Meta entries are invisible to scroll, count, retrieve and both searches."""
    coll.upsert([point("A")])
    for i in range(5):
        coll.put_meta(f"cursor/!r{i}", {"i": i})
    assert names(coll.scroll()) == {"A"}
    assert coll.count() == 1
    assert names(coll.dense_search([1.0, 0.0, 0.0, 0.0], None, 10)) == {"A"}
    assert names(coll.sparse_search(SparseVector((0,), (1.0,)), None, 10)) == {"A"}


def test_meta_and_chat_payload_must_be_json(coll: Collection) -> None:
    """Values that are not plain JSON are refused with ValueError, not stored half-way."""
    with pytest.raises(ValueError):
        coll.put_meta("bad", {"x": object()})
    with pytest.raises(ValueError):
        coll.put_meta("nan", {"x": float("nan")})


# ---------------------------------------------------------------- generations


def test_store_open_create_lists_generation(store: Store) -> None:
    """open(create=True) makes a generation that generations() lists; nothing is active yet."""
    assert store.generations() == []
    store.open(GEN, dense_dim=DIM, create=True)
    assert store.generations() == [GEN]
    assert store.active() is None


def test_store_open_missing_without_create_raises(store: Store) -> None:
    """open(create=False) of an unknown generation is an error, and creates nothing."""
    with pytest.raises(StoreError):
        store.open(GEN, dense_dim=DIM, create=False)
    assert store.generations() == []


def test_store_open_foreign_name_raises(store: Store) -> None:
    """A generation must be named after the store's collection, so stores never mix."""
    with pytest.raises(StoreError):
        store.open("other_collection-abc", dense_dim=DIM, create=True)


def test_store_activate_switches_active(store: Store) -> None:
    """activate() moves the pointer searches read from one generation to another."""
    store.open(GEN, dense_dim=DIM, create=True)
    store.open(OTHER_GEN, dense_dim=DIM, create=True)
    store.activate(GEN)
    assert store.active() == GEN
    store.activate(OTHER_GEN)
    assert store.active() == OTHER_GEN
    assert store.generations() == sorted([GEN, OTHER_GEN])


def test_store_activate_unknown_raises(store: Store) -> None:
    """The pointer never names a generation that does not exist."""
    with pytest.raises(StoreError):
        store.activate(GEN)
    assert store.active() is None


def test_store_reopen_keeps_data_and_active(store: Store, opener: Opener) -> None:
    """Closing and reopening the store keeps points, meta and the active pointer."""
    coll = store.open(GEN, dense_dim=DIM, create=True)
    coll.upsert([point("A"), point("B", dense=(0.0, 1.0, 0.0, 0.0))])
    coll.put_meta("cursor/!r1", {"event_id": "$b1"})
    coll.flush()
    store.activate(GEN)
    store.close()
    again = opener()
    try:
        assert again.active() == GEN
        reopened = again.open(GEN, dense_dim=DIM, create=False)
        assert reopened.count() == 2
        assert reopened.get_meta("cursor/!r1") == {"event_id": "$b1"}
        assert names(reopened.dense_search([0.0, 1.0, 0.0, 0.0], None, 1)) == {"B"}
    finally:
        again.close()


def test_store_reopen_other_dimension_raises(store: Store, opener: Opener) -> None:
    """A generation keeps its dense dimension; opening it with another one is refused."""
    store.open(GEN, dense_dim=DIM, create=True)
    with pytest.raises(CompatibilityError):
        store.open(GEN, dense_dim=DIM + 1, create=True)
    store.close()
    again = opener()
    try:
        with pytest.raises(CompatibilityError):
            again.open(GEN, dense_dim=DIM + 1, create=True)
    finally:
        again.close()


def test_store_drop_removes_generation_and_data(store: Store) -> None:
    """drop() deletes a generation with its points and meta; recreating it starts empty."""
    coll = store.open(GEN, dense_dim=DIM, create=True)
    coll.upsert([point("A")])
    coll.put_meta("cursor/!r1", {"n": 1})
    store.open(OTHER_GEN, dense_dim=DIM, create=True)
    store.activate(OTHER_GEN)
    store.drop(GEN)
    assert store.generations() == [OTHER_GEN]
    assert store.active() == OTHER_GEN
    fresh = store.open(GEN, dense_dim=DIM, create=True)
    assert fresh.count() == 0
    assert fresh.get_meta("cursor/!r1") is None


def test_store_drop_active_clears_active(store: Store) -> None:
    """Dropping the active generation leaves no pointer rather than a dangling one."""
    store.open(GEN, dense_dim=DIM, create=True)
    store.activate(GEN)
    store.drop(GEN)
    assert store.active() is None
    assert store.generations() == []


def test_store_closed_refuses_use(store: Store) -> None:
    """After close() the store raises StoreError instead of touching a released engine."""
    store.close()
    with pytest.raises(StoreError):
        store.open(GEN, dense_dim=DIM, create=True)
    store.close()


async def test_collection_works_from_worker_threads(coll: Collection) -> None:
    """The interface is synchronous and safe to call through asyncio.to_thread concurrently."""
    await asyncio.to_thread(coll.upsert, [point(n) for n in "ABCD"])
    counts = await asyncio.gather(*(asyncio.to_thread(coll.count) for _ in range(8)))
    assert counts == [4] * 8


# ---------------------------------------------------------------- pure helpers


def test_generation_name_depends_on_content_only() -> None:
    """The same compatibility record names the same generation, whatever its key order."""
    a = generation_name("muninn_chat", {"model": "m", "dimension": 384, "chunker": 1})
    b = generation_name("muninn_chat", {"chunker": 1, "dimension": 384, "model": "m"})
    c = generation_name("muninn_chat", {"chunker": 2, "dimension": 384, "model": "m"})
    assert a == b != c
    assert a.startswith("muninn_chat-") and len(a) == len("muninn_chat-") + 12


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id": "not-a-uuid"}, "UUID"),
        ({"sparse": SparseVector((1, 1), (1.0, 1.0))}, "duplicate"),
        ({"sparse": SparseVector((1,), (1.0, 2.0))}, "length"),
        ({"payload": {"corpus": "meta"}}, "corpus"),
    ],
)
def test_point_record_rejects_malformed(kwargs: dict[str, Any], message: str) -> None:
    """A PointRecord that either engine would reject or misfile fails at construction."""
    fields: dict[str, Any] = {
        "id": pid("A"),
        "dense": (1.0, 0.0, 0.0, 0.0),
        "sparse": SparseVector((1,), (1.0,)),
        "payload": {},
    }
    with pytest.raises(ValueError, match=message):
        PointRecord(**{**fields, **kwargs})
