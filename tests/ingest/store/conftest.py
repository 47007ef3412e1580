"""The store contract's fixtures: each adapter's store (`opener`, `store`), a created
generation (`coll`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.store import Collection, Store
from tests.ingest.store.storekit import (
    DIM,
    GEN,
    Opener,
    make_opener,
)


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
