"""What the listener's tests share: the running service's listener (`Api`, its fixture in
conftest.py), requests to it, a bare listener with no service behind it, a peer from afar.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bot.config import MetricsConfig
from bot.demo.synapse import SynapseServer, free_port
from bot.service.http_api import (
    SEARCH_PATH,
    TOKEN_FILE,
    HttpApi,
    PurgeRequest,
)
from bot.service.metrics import ServiceMetrics
from bot.service.run import Service
from ingest.search.query import SearchQuery
from tests.botkit import service_doc


@dataclass
class Api:
    service: Service
    synapse: SynapseServer
    config: Path  # the same config as a file, for the CLI
    base: str
    room: str
    alias: str
    otters: list[str]  # event ids of the seeded messages

    @property
    def token(self) -> str:
        """What the service wrote for `muninn search` (re-read: a restart writes a new one)."""
        assert self.service.api is not None and self.service.api.token_file is not None
        return self.service.api.token_file.read_text().strip()

    async def post(
        self,
        body: Any,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        token: str | None = "",
        path: str = SEARCH_PATH,
    ) -> tuple[int, Any]:
        """POST as `muninn search` does (with the service's token); `token=None` sends none."""
        sent = dict(headers or {})
        if token is not None:
            sent.setdefault("Authorization", f"Bearer {token or self.token}")
        return await post(self.base + path, body, headers=sent, raw=raw)


async def post(
    url: str, body: Any, *, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        kwargs: dict[str, Any] = {"data": raw} if raw is not None else {"json": body}
        async with session.post(url, headers=headers, **kwargs) as resp:
            text = await resp.text()
    try:
        return resp.status, json.loads(text)
    except ValueError:
        return resp.status, text  # aiohttp's own plain 404


def config_doc(synapse: SynapseServer, folder: Path, **metrics: Any) -> dict[str, Any]:
    return service_doc(synapse, folder, index={"collection": "muninn_api"}, metrics=metrics)


async def get(url: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
        body = await resp.text()
        return resp.status, body


def bare_api(
    port: int,
    *,
    search: Any = None,
    token_file: Path | None = None,
    host: str = "127.0.0.1",
    purge: Any = None,
) -> HttpApi:
    """A listener with no service behind it: its read path (unless `search`) and its writer
    fail the test if reached."""
    return HttpApi(
        MetricsConfig(host=host, port=port),
        ServiceMetrics(),
        checks={},
        search=search or _never_search,
        resolve_room=_same_room,
        purge=purge,
        token_file=token_file,
    )


async def raw_request(port: int, head: bytes, body: bytes = b"{}") -> bytes:
    """One HTTP/1.1 request as raw bytes (headers no client library would send); the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            head + b"\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
        )
        await writer.drain()
        return await reader.read()
    finally:
        writer.close()


FAR_PEER = "203.0.113.7"  # TEST-NET-3: the listener sees a peer that is not loopback


@web.middleware
async def from_afar(request: web.Request, handler: Any) -> web.StreamResponse:
    """Every request as if it came from FAR_PEER (the peer address is all the rule reads)."""
    return await handler(request.clone(remote=FAR_PEER))


async def _never_search(query: SearchQuery) -> Any:
    raise AssertionError("reached the read path")


async def _never_purge(request: PurgeRequest) -> Any:
    raise AssertionError("reached the writer")


async def _same_room(room: str) -> str:
    return room


def from_afar_on_every_address(tmp_path: Path) -> tuple[HttpApi, int]:
    """A listener bound to every address whose every request seems to come from FAR_PEER; its
    search and purge fail the test if such a peer ever reaches them."""
    port = free_port()
    server = bare_api(port, host="0.0.0.0", purge=_never_purge, token_file=tmp_path / TOKEN_FILE)
    server.app.middlewares.append(from_afar)
    return server, port
