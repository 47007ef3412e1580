"""The listener's read token (`LISTENER_READ_TOKEN`, issue 46): what `muninn mcp` holds. It may
search and ask the status, as the listener token may; a purge with it is refused before the
writer is reached. Written beside the listener token, private, and retired with it.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from bot.demo.synapse import free_port
from bot.service.http_api import (
    PURGE_PATH,
    READ_TOKEN_FILE,
    SEARCH_PATH,
    TOKEN_FILE,
    PurgeRequest,
    read_token,
)
from ingest.search.hits import SearchResult
from ingest.search.query import SearchQuery
from tests.bot.service.http_api.listener import bare_api, post


async def test_http_api_read_token_searches_and_never_purges(tmp_path: Path) -> None:
    """The read token searches (200) and reads the per-room detail; a purge with it is 403
    naming the token that may, and never reaches the writer; the listener token still purges.
    The file is 0600 beside the other, holds another token, and goes at stop."""
    reached: list[str] = []

    async def found(query: SearchQuery) -> Any:
        return SearchResult()

    async def purge(request: PurgeRequest) -> Any:
        reached.append(request.room_id)
        raise AssertionError("the test's purge: only the write token's reaches it")

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = bare_api(port, search=found, purge=purge, token_file=tmp_path / TOKEN_FILE)
    await server.start()
    try:
        path = tmp_path / READ_TOKEN_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        read, write = read_token(path), read_token(tmp_path / TOKEN_FILE)
        assert read != write
        as_reader = {"Authorization": f"Bearer {read}"}
        searched, _ = await post(base + SEARCH_PATH, {"texts": ["otters"]}, headers=as_reader)
        body = {"room_id": "!r:hs", "from_ts": 0, "to_ts": 1}
        refused, said = await post(base + PURGE_PATH, body, headers=as_reader)
        assert reached == []
        as_writer = {"Authorization": f"Bearer {write}"}
        purged, _ = await post(base + PURGE_PATH, body, headers=as_writer)
    finally:
        await server.stop()
    assert searched == 200
    assert refused == 403 and "read token" in said["error"] and TOKEN_FILE in said["error"]
    assert reached == ["!r:hs"] and purged == 500  # the write token's purge reached the writer
    assert not path.exists()
