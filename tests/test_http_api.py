"""`bot.http_api`: /healthz, /metrics and `POST /_muninn/search` of a running `muninn run`,
and `muninn search` falling back to it while the service holds the embedded store.

One appservice-mode service for the module (real Synapse, store and MiniLM); the store-fault
test runs its own client-mode service, so that it can break the store without harming others.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.http_api import SEARCH_PATH, HttpApi, SearchRequest, is_loopback
from bot.metrics import ServiceMetrics
from bot.service import Service
from ingest.config import IndexConfig, MetricsConfig, StoreConfig, parse_config
from ingest.errors import QueryError
from ingest.search import SearchQuery
from ingest.store import open_store
from ingest.types import RoomID
from tests.botkit import service_config
from tests.homeserver import Homeserver, MatrixUser, SynapseServer, free_port, unique_localpart
from tests.indexing import muninn, shared_embedder, write_config
from tests.test_metrics import parse_exposition, value
from tests.test_search_cli import check_contract


@dataclass
class Api:
    service: Service
    synapse: SynapseServer
    config: Path  # the same config as a file, for the CLI
    base: str
    room: str
    alias: str
    otters: list[str]  # event ids of the seeded messages

    async def post(
        self, body: Any, *, headers: dict[str, str] | None = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session:
            kwargs: dict[str, Any] = {"data": raw} if raw is not None else {"json": body}
            async with session.post(self.base + SEARCH_PATH, headers=headers, **kwargs) as resp:
                return resp.status, await resp.json(content_type=None)


def config_doc(synapse: SynapseServer, folder: Path, **metrics: Any) -> dict[str, Any]:
    return {
        "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
        "appservice": {
            "registration": str(synapse.registration_path),
            "host": "127.0.0.1",
            "port": synapse.appservice_port,
        },
        "index": {"store": {"path": str(folder / "qdrant")}, "collection": "muninn_api"},
        "refresh": {"debounce_seconds": 0.3, "interval_seconds": 3600},
        "metrics": metrics,
    }


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def api(
    synapse: SynapseServer, hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Api]:
    folder = tmp_path_factory.mktemp("http-api")
    port = free_port()
    doc = config_doc(synapse, folder, port=port)
    config = write_config(folder / "config.yaml", doc)
    owner = await hs.register(displayname="Otto")
    local = unique_localpart("otters")
    room = await owner.create_room(alias_localpart=local, name="otters", preset="public_chat")
    await hs.bot().join(room)
    otters = [
        await owner.send_text(room, text)
        for text in (
            "the otters at the aquarium hold hands while they sleep",
            "feeding time for the otters is at noon",
            "unrelated: the printer on floor two is jammed again",
        )
    ]
    service = Service(parse_config(doc, folder), embedder=shared_embedder(), full_at_start=False)
    await service.start()
    try:
        await hs.ping_appservice()
        await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 30)
        alias = f"#{local}:{synapse.server_name}"
        yield Api(service, synapse, config, f"http://127.0.0.1:{port}", room, alias, otters)
    finally:
        await service.stop()


async def get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        body = await resp.text()
        return resp.status, body


# ---------------------------------------------------------------- /healthz


async def test_http_api_healthz_ok(api: Api) -> None:
    """Every part answers: 200 with status ok and a detail per part."""
    status, body = await get(api.base + "/healthz")
    assert status == 200
    doc = json.loads(body)
    assert doc["status"] == "ok"
    assert set(doc["checks"]) == {"service", "store", "homeserver"}
    assert all(c["ok"] for c in doc["checks"].values())
    assert "points" in doc["checks"]["store"]["detail"]


async def test_http_api_healthz_names_the_store_when_it_is_closed(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A closed store (a real fault of the adapter) makes /healthz 503 naming the store."""
    me = await hs.register(displayname="Muninn health")
    port = free_port()
    cfg = service_config(synapse, tmp_path, client=me, metrics={"port": port})
    room = await hs.fresh_room(alice)
    await me.join(room)
    await alice.send_text(room, "something to index so that a generation is active")
    service = Service(cfg, embedder=shared_embedder(), full_at_start=False)
    await service.start()
    base = f"http://127.0.0.1:{port}"
    try:
        await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 30)
        assert (await get(base + "/healthz"))[0] == 200
        await asyncio.to_thread(service.store.close)
        status, body = await get(base + "/healthz")
        metrics = parse_exposition((await get(base + "/metrics"))[1])
    finally:
        await service.stop()
    doc = json.loads(body)
    assert status == 503
    assert doc["status"] == "failing" and doc["failing"] == ["store"]
    assert "closed" in doc["checks"]["store"]["detail"]
    assert doc["checks"]["homeserver"]["ok"] and doc["checks"]["service"]["ok"]
    assert value(metrics, "muninn_store_errors_total", op="open") >= 1


# ---------------------------------------------------------------- /metrics


async def test_http_api_metrics_parse(api: Api) -> None:
    """/metrics of the module's service parses and has counted its refresh."""
    status, body = await get(api.base + "/metrics")
    assert status == 200
    fams = parse_exposition(body)
    assert value(fams, "muninn_events_indexed_total") >= 3
    assert value(fams, "muninn_refresh_lag_seconds", room=api.room) >= 0


# ---------------------------------------------------------------- POST /_muninn/search


async def test_http_api_search_returns_the_section_7_document(api: Api) -> None:
    """The endpoint answers exactly what the service's read path answers, as §7 JSON."""
    body = {"texts": ["otters sleeping"], "room_ids": [api.alias], "limit": 10}
    status, doc = await api.post(body)
    assert status == 200
    check_contract(doc, api.synapse.server_name)
    assert doc["retrievers"] == ["dense", "lexical"]
    cited = {e for h in doc["hits"] for e in h["event_ids"]}
    assert api.otters[0] in cited
    query = SearchQuery.build(["otters sleeping"], room_ids=[api.room], limit=10)
    direct = (await api.service.searcher.search(query)).as_json()
    assert doc == direct
    metrics = parse_exposition((await get(api.base + "/metrics"))[1])
    assert value(metrics, "muninn_search_latency_seconds_count", source="api") >= 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "texts"),
        ({"texts": "otters"}, "texts"),
        ({"texts": []}, "texts"),
        ({"texts": ["x" * 1001]}, "texts"),
        ({"texts": ["ok", 3]}, "texts"),
        ({"texts": ["q"], "limit": 51}, "limit"),
        ({"texts": ["q"], "limit": "5"}, "limit"),
        ({"texts": ["q"], "limit": True}, "limit"),
        ({"texts": ["q"], "after": 10, "before": 5}, "after"),
        ({"texts": ["q"], "before": "2024-01-01"}, "before"),
        ({"texts": ["q"], "room_ids": "!one"}, "room_ids"),
        ({"texts": ["q"], "room_ids": ["#nowhere-at-all:muninn.test"]}, "room_ids"),
        ({"texts": ["q"], "senders": [1]}, "senders"),
        ({"texts": ["q"], "colour": "blue"}, "colour"),
        (["q"], "body"),
    ],
)
async def test_http_api_search_errors_name_the_field(api: Api, body: Any, field: str) -> None:
    """A malformed request is a 400 whose body names the field."""
    status, doc = await api.post(body)
    assert status == 400, doc
    assert doc["field"] == field
    assert doc["error"] == f"{field}: {doc['message']}"


async def test_http_api_search_refuses_non_json(api: Api) -> None:
    """A body that is not JSON is a 400 naming the body; a non-JSON content type is 415."""
    headers = {"Content-Type": "application/json"}
    status, doc = await api.post(None, raw=b"{not json", headers=headers)
    assert (status, doc["field"]) == (400, "body")
    status, _ = await api.post(None, raw=b'{"texts": ["otters"]}')  # application/octet-stream
    assert status == 415


async def test_http_api_search_refuses_a_foreign_host(api: Api) -> None:
    """A request whose Host is not a loopback name (DNS rebinding) is refused."""
    status, doc = await api.post({"texts": ["otters"]}, headers={"Host": "evil.example"})
    assert status == 403 and "Host" in doc["error"]


# ---------------------------------------------------------------- the CLI's fallback


async def test_cli_search_falls_back_to_the_running_service(api: Api) -> None:
    """While `muninn run` holds the store, `muninn search --json` gives the same document."""
    run = await muninn(api.config, "search", "otters", "feeding", "--room", api.alias, "--json")
    assert run.rc == 0, run.err
    doc = run.doc()
    status, direct = await api.post(
        {"texts": ["otters", "feeding"], "room_ids": [api.room], "limit": 5}
    )
    assert status == 200
    assert doc == direct
    assert {e for h in doc["hits"] for e in h["event_ids"]} >= {api.otters[0], api.otters[1]}
    human = await muninn(api.config, "search", "otters", "--limit", "1")
    assert human.rc == 0, human.err
    assert "matrix.to" in human.out and "retrievers: dense, lexical" in human.err
    bad = await muninn(api.config, "search", "q", "--room", "#nowhere-at-all:muninn.test")
    assert bad.rc == 1 and "muninn: room: " in bad.err


async def test_cli_search_held_without_a_port_says_how_to_enable_it(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """Without metrics.port the held-store error names the cause and how to fix it."""
    config = write_config(tmp_path / "config.yaml", config_doc(synapse, tmp_path))
    holder = open_store(
        IndexConfig(store=StoreConfig(path=tmp_path / "qdrant"), collection="muninn_api"),
        tmp_path,
    )
    try:
        run = await muninn(config, "search", "otters", "--json")
    finally:
        holder.close()
    assert run.rc == 1 and run.out == ""
    assert f"held by another process (pid {os.getpid()})" in run.err
    assert "metrics: {port:" in run.err
    assert "Traceback" not in run.err


# ---------------------------------------------------------------- loopback only


def outward_address() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


async def test_http_api_non_loopback_bind_warns_and_search_refuses_remote_peers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A wildcard bind is warned about; /metrics answers a non-loopback peer, search does not."""

    async def never(query: SearchQuery) -> Any:
        raise AssertionError("a remote peer reached the read path")

    async def same(room: str) -> str:
        return room

    caplog.set_level(logging.WARNING, logger="muninn.http")
    port = free_port()
    server = HttpApi(
        MetricsConfig(host="0.0.0.0", port=port),
        ServiceMetrics(),
        checks={},
        search=never,
        resolve_room=same,
    )
    await server.start()
    try:
        assert "not a loopback address" in caplog.text
        address = outward_address()
        if address is None:
            pytest.skip("no non-loopback address on this machine")
        base = f"http://{address}:{port}"
        assert (await get(base + "/metrics"))[0] == 200
        async with (
            aiohttp.ClientSession() as session,
            session.post(base + SEARCH_PATH, json={"texts": ["x"]}) as resp,
        ):
            assert resp.status == 403
            assert "loopback" in (await resp.json())["error"]
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("evil.example", False),
        ("", False),
        (None, False),
    ],
)
def test_http_api_is_loopback(host: str | None, loopback: bool) -> None:
    """Loopback means localhost or a loopback address, IPv4-mapped included."""
    assert is_loopback(host) is loopback


def test_http_api_search_request_parse_defaults() -> None:
    """Only texts is required; limit defaults to 5; a bad type raises naming the field."""
    req = SearchRequest.parse({"texts": ["a", "b"]})
    assert (req.texts, req.room_ids, req.limit) == (["a", "b"], None, 5)
    with pytest.raises(QueryError) as e:
        SearchRequest.parse({"texts": ["a"], "after": 1.5})
    assert e.value.field == "after"
