"""One contract for both store adapters, their generations: opened, listed, activated, reopened,
dropped, and a closed store refused (the fixtures: conftest.py).
"""

from __future__ import annotations

import asyncio

import pytest

from ingest.errors import CompatibilityError, StoreError
from ingest.store import Collection, Store
from tests.ingest.store.storekit import (
    DIM,
    GEN,
    OTHER_GEN,
    Opener,
    names,
    point,
)

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
