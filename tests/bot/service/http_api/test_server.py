"""`bot.service.http_api`: /healthz, /metrics and `POST /_muninn/search` of a running `muninn run`,
who may ask them and from where, and `muninn search` falling back to it while the service holds
the embedded store.

One appservice-mode service for the module (real Synapse, store and MiniLM: the `api` fixture of
conftest.py); the store-fault test runs its own client-mode service, so that it can break the
store without harming others.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from bot.chat.replies.words import plural
from bot.demo.synapse import SynapseServer, free_port
from bot.service.http_api import (
    PURGE_PATH,
    SEARCH_PATH,
    STATUS_PATH,
    TOKEN_FILE,
    is_loopback,
    read_token,
)
from bot.service.run import Service
from ingest.config import IndexConfig, StoreConfig
from ingest.index.records import TOMBSTONE_PREFIX
from ingest.matrix.transport import ConnectFailed
from ingest.search.query import SearchQuery
from ingest.store import open_store
from ingest.types import RoomID
from tests.bot.operations.test_search import check_contract
from tests.bot.service.http_api.listener import (
    FAR_PEER,
    Api,
    bare_api,
    config_doc,
    from_afar_on_every_address,
    get,
    post,
    raw_request,
)
from tests.bot.service.test_metrics import parse_exposition, value
from tests.botkit import service_config
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Run, muninn, shared_embedder, write_config
from tests.transport import Scripted

# ---------------------------------------------------------------- /healthz


async def test_http_api_healthz_ok(api: Api) -> None:
    """Every part answers: 200 with status ok and, to the token's holder, a detail per part."""
    status, body = await get(api.base + "/healthz", api.token)
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
        assert service.api is not None and service.api.token_file is not None
        token = service.api.token_file.read_text().strip()
        status, body = await get(base + "/healthz", token)
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
    status, body = await get(api.base + "/metrics", api.token)
    assert status == 200
    fams = parse_exposition(body)
    assert value(fams, "muninn_events_indexed_total") >= 3
    assert value(fams, "muninn_refresh_lag_seconds", room=api.room) >= 0


async def test_http_api_open_endpoints_name_no_room_homeserver_or_reader(api: Api) -> None:
    """Regression (issue 21 item 12): without the listener token, /metrics carries no room id
    (only the aggregate lag) and /healthz only each part's ok, with the same status code; the
    token's holder reads both in full."""
    status, body = await get(api.base + "/metrics")
    assert status == 200
    fams = parse_exposition(body)
    assert api.room not in body and "muninn_refresh_lag_seconds" not in fams
    assert 0 <= value(fams, "muninn_refresh_lag_max_seconds") < 3600
    assert value(fams, "muninn_rooms", verdict="eligible") >= 1
    status, body = await get(api.base + "/healthz")
    assert status == 200
    doc = json.loads(body)
    assert doc["status"] == "ok"
    assert doc["checks"] == {n: {"ok": True} for n in ("service", "store", "homeserver")}
    for secret in (api.synapse.base_url, api.synapse.bot_user_id, "points"):
        assert secret not in body
    assert api.room in (await get(api.base + "/metrics", api.token))[1]
    assert api.synapse.bot_user_id in (await get(api.base + "/healthz", api.token))[1]


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
        ({"texts": ["q"], "room_ids": [f"!r{i}:x" for i in range(101)]}, "room_ids"),
        ({"texts": ["q"], "senders": [f"@u{i}:x" for i in range(101)]}, "senders"),
        ({"texts": ["q"], "after": -1}, "after"),
        ({"texts": ["q"], "before": 2**53}, "before"),
        ({"texts": ["q"], "after": 2**64}, "after"),
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
    """While `muninn run` holds the store, `muninn search --json` gives the same document, and
    says from the service's status that the room searched is current (`indexing`, issue 49)."""
    run = await muninn(api.config, "search", "otters", "feeding", "--room", api.alias, "--json")
    assert run.rc == 0, run.err
    doc = run.doc()
    status, direct = await api.post(
        {"texts": ["otters", "feeding"], "room_ids": [api.room], "limit": 5}
    )
    assert status == 200
    assert doc.pop("indexing") == [] and "indexing" not in direct
    assert doc == direct
    assert {e for h in doc["hits"] for e in h["event_ids"]} >= {api.otters[0], api.otters[1]}
    human = await muninn(api.config, "search", "otters", "--limit", "1")
    assert human.rc == 0, human.err
    assert "matrix.to" in human.out and "retrievers: dense, lexical" in human.err
    bad = await muninn(api.config, "search", "q", "--room", "#nowhere-at-all:muninn.test")
    assert bad.rc == 1 and "muninn: room: " in bad.err


async def test_cli_status_asks_the_running_service(api: Api) -> None:
    """`muninn status` runs beside `muninn run` (regression: "held by another process"): the
    store's half comes from the service's listener, the same facts the service holds."""
    run = await muninn(api.config, "status", "--json")
    assert run.rc == 0, run.err
    doc = run.doc()
    assert doc["generation"] == await asyncio.to_thread(api.service.store.active)
    room = next(r for r in doc["rooms"] if r["room_id"] == api.room)
    assert room["indexed"] and room["points"] >= 1 and room["cursor"]
    assert doc["points"] >= room["points"]
    human = await muninn(api.config, "status")
    assert human.rc == 0, human.err
    assert f"{api.alias}: indexed, {plural(room['points'], 'point')}" in human.out


async def _held_without_a_port(synapse: SynapseServer, tmp_path: Path, *args: str) -> Run:
    """`muninn <args>` while another process holds the store and no listener is configured."""
    config = write_config(tmp_path / "config.yaml", config_doc(synapse, tmp_path))
    holder = open_store(
        IndexConfig(store=StoreConfig(path=tmp_path / "qdrant"), collection="muninn_api"),
        tmp_path,
    )
    try:
        return await muninn(config, *args)
    finally:
        holder.close()


async def test_cli_search_held_without_a_port_says_how_to_enable_it(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """Without metrics.port the held-store error names the cause and how to fix it."""
    run = await _held_without_a_port(synapse, tmp_path, "search", "otters", "--json")
    assert run.rc == 1 and run.out == ""
    assert f"held by another process (pid {os.getpid()})" in run.err
    assert "metrics: {port:" in run.err
    assert "Traceback" not in run.err


async def test_cli_status_held_without_a_port_says_how_to_enable_it(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """`muninn status` beside a service with no listener names the cause and the fix."""
    run = await _held_without_a_port(synapse, tmp_path, "status")
    assert run.rc == 1 and "held by another process" in run.err
    assert "For `muninn status` while `muninn run` holds the store" in run.err
    assert "metrics: {port:" in run.err and "Traceback" not in run.err
    # the port the deploy guide, the example config and compose use (issue 36: 9464 here)
    assert "metrics: {port: 9108}" in run.err and "deploy/README.md" in run.err


# ---------------------------------------------------------------- who may search and purge


@pytest.mark.parametrize("path", [SEARCH_PATH, PURGE_PATH, STATUS_PATH])
async def test_http_api_search_and_purge_need_the_service_token(api: Api, path: str) -> None:
    """Any local process reaches the port, but only the holder of the service's token is
    answered: none is 401, a wrong one 403; neither reaches the read path or the writer."""
    body = {
        SEARCH_PATH: {"texts": ["otters"]},
        PURGE_PATH: {"room_id": api.room, "from_ts": 0, "to_ts": 2**53 - 1},
        STATUS_PATH: {},
    }[path]
    status, doc = await api.post(body, path=path, token=None)
    assert status == 401 and "Authorization: Bearer" in doc["error"], doc
    status, doc = await api.post(body, path=path, token="not-" + api.token)
    assert status == 403 and "not the token" in doc["error"], doc
    status, doc = await api.post(body, path=path, headers={"Authorization": "Basic eDp5"})
    assert status == 401, doc
    col = await api.service.writer.open()
    assert await asyncio.to_thread(col.list_meta, TOMBSTONE_PREFIX) == {}
    assert (await get(api.base + "/metrics"))[0] == 200  # /metrics and /healthz stay open
    assert (await get(api.base + "/healthz"))[0] == 200


async def test_cli_search_without_the_token_names_the_file(api: Api) -> None:
    """A caller who cannot read the token file (another user) is told which file and why."""
    assert api.service.api is not None and api.service.api.token_file is not None
    token_file = api.service.api.token_file
    hidden = token_file.with_name("hidden")
    token_file.rename(hidden)
    try:
        run = await muninn(api.config, "search", "otters", "--json")
    finally:
        hidden.rename(token_file)
    assert run.rc == 1 and run.out == ""
    assert f"cannot read the service's listener token {token_file}" in run.err
    assert "service's own user" in run.err and "Traceback" not in run.err


async def test_http_api_token_that_is_not_utf8_is_refused_not_a_crash(tmp_path: Path) -> None:
    """Hostile bytes in the Authorization header get a 403, not a 500 from an encoding error."""

    port = free_port()
    server = bare_api(port, token_file=tmp_path / TOKEN_FILE)
    await server.start()
    try:
        head = b"POST " + SEARCH_PATH.encode() + b" HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\xc3"
        answer = await raw_request(port, head)
    finally:
        await server.stop()
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:100]


async def test_http_api_non_loopback_bind_warns_and_search_refuses_remote_peers(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """A wildcard bind is warned about; /metrics answers a non-loopback peer, search does not,
    even with the right token."""
    caplog.set_level(logging.WARNING, logger="muninn.service")
    server, port = from_afar_on_every_address(tmp_path)
    await server.start()
    try:
        assert "not a loopback address" in caplog.text
        base = f"http://127.0.0.1:{port}"
        assert (await get(base + "/metrics"))[0] == 200
        auth = {"Authorization": f"Bearer {read_token(tmp_path / TOKEN_FILE)}"}
        status, doc = await post(base + SEARCH_PATH, {"texts": ["x"]}, headers=auth)
        assert status == 403 and "loopback" in doc["error"]
        assert f"{SEARCH_PATH} from a non-loopback peer {FAR_PEER} refused" in caplog.text
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


async def test_http_api_search_with_the_homeserver_down_fails_at_once_naming_it(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 item 5: while the homeserver refuses connections (the service's transport
    seam, as a stopped Synapse does), a search through the running service is answered 503
    saying the homeserver is unreachable, before any search is run (no model, no retries of
    each hit's revalidation), and `muninn search` prints it. Last in the file: the service's
    other requests fail meanwhile too."""
    refused = Scripted(ConnectFailed("ClientConnectorError: Connect call failed"), repeat=True)
    monkeypatch.setattr(api.service.client, "transport", refused)
    status, doc = await api.post({"texts": ["otters"], "room_ids": [api.room]})
    assert status == 503 and doc["error"].startswith("the homeserver is unreachable ("), doc
    assert "so none is" in doc["error"] and api.room not in doc["error"]
    run = await muninn(api.config, "search", "otters")
    assert run.rc == 1 and "the homeserver is unreachable (" in run.err, run.err
    assert "Traceback" not in run.err
