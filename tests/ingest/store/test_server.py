"""The Qdrant server adapter's own fault: a server that refuses connections is named."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ingest.config import IndexConfig, StoreConfig
from ingest.errors import StoreUnavailable
from ingest.store import open_store
from tests.ingest.store.storekit import COLLECTION, DIM, GEN


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_server_store_unreachable_raises_unavailable_naming_url() -> None:
    """A server that refuses connections gives StoreUnavailable whose message names the URL."""
    url = f"http://127.0.0.1:{_closed_port()}"
    store = open_store(IndexConfig(store=StoreConfig(url=url), collection=COLLECTION), Path("."))
    try:
        with pytest.raises(StoreUnavailable, match=url):
            store.generations()
        with pytest.raises(StoreUnavailable, match=url):
            store.open(GEN, dense_dim=DIM, create=True)
    finally:
        store.close()
