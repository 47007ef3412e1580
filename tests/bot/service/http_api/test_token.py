"""The listener token (`bot.service.http_api.token`): private, fresh at each start, retired at
stop, in the store's directory; no token file, no search.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from bot.config import parse_config
from bot.demo.synapse import SynapseServer, free_port
from bot.service.http_api import (
    SEARCH_PATH,
    TOKEN_FILE,
    read_token,
    token_path,
)
from ingest.search.hits import SearchResult
from ingest.search.query import SearchQuery
from tests.bot.service.http_api.listener import (
    bare_api,
    config_doc,
    get,
    post,
)


async def test_http_api_token_file_is_private_fresh_and_retired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a permissive umask the token file is still 0600; a restart writes a new token
    (the old one is refused), and a stop removes the file."""

    async def found(query: SearchQuery) -> Any:
        return SearchResult()

    port = free_port()
    url = f"http://127.0.0.1:{port}{SEARCH_PATH}"
    token_file = tmp_path / TOKEN_FILE
    old = os.umask(0o002)
    try:
        tokens: list[str] = []
        for _ in range(2):
            server = bare_api(port, search=found, token_file=token_file)
            await server.start()
            try:
                assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
                tokens.append(read_token(token_file))
                # The first run's token: accepted by that run, refused after the restart.
                auth = {"Authorization": f"Bearer {tokens[0]}"}
                status, _ = await post(url, {"texts": ["x"]}, headers=auth)
                assert status == (200 if len(tokens) == 1 else 403)
            finally:
                await server.stop()
            assert not token_file.exists()
    finally:
        os.umask(old)
    assert tokens[0] != tokens[1]
    assert os.listdir(tmp_path) == []  # no temporary file left behind


async def test_http_api_without_a_token_file_serves_no_search() -> None:
    """A service with no place for a token (a Qdrant server store) serves /metrics only."""

    port = free_port()
    server = bare_api(port)
    await server.start()
    try:
        base = f"http://127.0.0.1:{port}"
        assert (await get(base + "/metrics"))[0] == 200
        assert (await post(base + SEARCH_PATH, {"texts": ["x"]}))[0] == 404
    finally:
        await server.stop()


def test_http_api_token_path_is_in_the_store_directory(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """The token lives in the embedded store's 0700 directory; a server store has none."""
    cfg = parse_config(config_doc(synapse, tmp_path), tmp_path)
    assert token_path(cfg) == tmp_path / "qdrant" / TOKEN_FILE
    doc = config_doc(synapse, tmp_path)
    doc["index"]["store"] = {"url": "http://127.0.0.1:6333"}
    assert token_path(parse_config(doc, tmp_path)) is None
