"""The appservice edge without a homeserver: its tokens, de-duplication, queue and queries."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.service.appservice import AppserviceServer
from tests.bot.service.http_api.listener import raw_request

TOKEN = "hs-secret"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sink:
    def __init__(self) -> None:
        self.batches: list[list[Mapping[str, Any]]] = []
        self.full = False

    def __call__(self, events: Sequence[Mapping[str, Any]]) -> bool:
        if self.full:
            return False
        self.batches.append(list(events))
        return True


@pytest_asyncio.fixture
async def edge() -> AsyncIterator[tuple[AppserviceServer, Sink, str]]:
    sink = Sink()
    port = _port()
    server = AppserviceServer(TOKEN, sink, host="127.0.0.1", port=port, seen_capacity=8)
    await server.start()
    try:
        yield server, sink, f"http://127.0.0.1:{port}"
    finally:
        await server.stop()


async def _put(url: str, txn: str, events: list[dict[str, Any]], **kw: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as s,
        s.put(f"{url}/_matrix/app/v1/transactions/{txn}", json={"events": events}, **kw) as r,
    ):
        return r.status, await r.json()


def _auth(token: str = TOKEN) -> dict[str, Any]:
    return {"headers": {"Authorization": f"Bearer {token}"}}


EVENT = {"event_id": "$a", "type": "m.room.message", "room_id": "!r", "content": {}}


async def test_appservice_duplicate_transaction_is_processed_once(edge: Any) -> None:
    """The same transaction pushed twice reaches the queue once; both answers are 200 {}."""
    _, sink, url = edge
    assert await _put(url, "1", [EVENT], **_auth()) == (200, {})
    assert await _put(url, "1", [EVENT], **_auth()) == (200, {})
    assert len(sink.batches) == 1


async def test_appservice_reused_txn_id_with_new_events_is_processed(edge: Any) -> None:
    """Synapse on SQLite restarts txn ids at 1: same id, other events, is a new transaction."""
    _, sink, url = edge
    await _put(url, "1", [EVENT], **_auth())
    await _put(url, "1", [{**EVENT, "event_id": "$b"}], **_auth())
    assert [b[0]["event_id"] for b in sink.batches] == ["$a", "$b"]


@pytest.mark.parametrize(
    ("kw", "status", "errcode"),
    [
        ({}, 401, "M_UNAUTHORIZED"),
        ({"headers": {"Authorization": "Bearer "}}, 401, "M_UNAUTHORIZED"),
        (_auth("wrong"), 403, "M_FORBIDDEN"),
        ({"params": {"access_token": "wrong"}}, 403, "M_FORBIDDEN"),
    ],
    ids=["missing", "empty", "wrong", "wrong-legacy"],
)
async def test_appservice_rejects_bad_tokens(
    edge: Any, kw: dict[str, Any], status: int, errcode: str
) -> None:
    """The spec's answers: no hs_token 401 M_UNAUTHORIZED, a wrong one 403 M_FORBIDDEN; nothing
    queued either way."""
    _, sink, url = edge
    got, body = await _put(url, "9", [EVENT], **kw)
    assert (got, body["errcode"]) == (status, errcode)
    assert sink.batches == []


async def test_appservice_token_that_is_not_utf8_is_forbidden_not_a_crash(edge: Any) -> None:
    """Hostile bytes in the Authorization header get 403 M_FORBIDDEN, not a 500."""
    _, sink, url = edge
    answer = await raw_request(
        int(url.rsplit(":", 1)[1]),
        b"PUT /_matrix/app/v1/transactions/7 HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\xc3",
        b'{"events": []}',
    )
    assert answer.startswith(b"HTTP/1.1 403 ") and b"M_FORBIDDEN" in answer, answer[:200]
    assert sink.batches == []


async def test_appservice_accepts_the_legacy_query_token(edge: Any) -> None:
    _, sink, url = edge
    assert (await _put(url, "2", [EVENT], params={"access_token": TOKEN}))[0] == 200
    assert len(sink.batches) == 1


async def test_appservice_full_queue_is_not_acknowledged(edge: Any) -> None:
    """A full queue answers 503 and forgets the id, so Synapse's retry is processed."""
    _, sink, url = edge
    sink.full = True
    assert (await _put(url, "3", [EVENT], **_auth()))[0] == 503
    sink.full = False
    assert (await _put(url, "3", [EVENT], **_auth()))[0] == 200
    assert len(sink.batches) == 1


async def test_appservice_ping_and_queries(edge: Any) -> None:
    """Ping answers {}; user and room queries are 404 (Muninn creates nothing on demand)."""
    _, _, url = edge
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/_matrix/app/v1/ping", json={}, **_auth()) as r:
            assert r.status == 200
        async with s.get(f"{url}/_matrix/app/v1/users/@x:y", **_auth()) as r:
            assert r.status == 404
        async with s.post(f"{url}/_matrix/app/v1/ping", json={}) as r:
            assert r.status == 401
