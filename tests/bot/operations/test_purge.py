"""Rule 12 while the service runs: `POST /_muninn/purge`, `muninn purge` falling back to it while
`muninn run` holds the embedded store, and a purge during a rebuild honoured by search at once.

Real Synapse, the embedded qdrant-edge store and the real MiniLM embedder. The services run in
client mode (a fresh reader user each), so they never contend for the appservice port.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.chat.commands.dates import shown
from bot.cli.main import parse_time
from bot.config import parse_config
from bot.demo.synapse import SynapseServer, free_port
from bot.service.http_api import PURGE_PATH, TOKEN_FILE, PurgeRequest, read_token
from bot.service.run import Service
from ingest.config import IndexConfig, StoreConfig
from ingest.errors import EmbedUnavailable, QueryError
from ingest.index.records import TOMBSTONE_PREFIX
from ingest.rules.stamps import utc_minute
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.store import open_store
from ingest.types import RoomID
from tests.bot.service.http_api.listener import FAR_PEER, from_afar_on_every_address, post
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    Indexer,
    RenamedEmbedder,
    muninn,
    reader_config,
    shared_embedder,
    write_config,
)
from tests.inprocess import muninn_here

BASE = 1_700_000_000_000
HOUR = 3_600_000
FROM, TO = BASE + HOUR // 2, BASE + 3 * HOUR // 2  # covers only the middle message
EVENTUALLY = 20.0  # seconds a purge has to take effect through the running service


def config_doc(synapse: SynapseServer, reader: MatrixUser, folder: Path, port: int | None) -> Any:
    doc: dict[str, Any] = {
        "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
        "index": {"store": {"path": str(folder / "qdrant")}, "collection": "muninn_purge"},
        "refresh": {"debounce_seconds": 0.3, "interval_seconds": 3600},
    }
    if port is not None:
        doc["metrics"] = {"port": port}
    return doc


@dataclass
class Running:
    service: Service
    config: Path  # the same config as a file, for the CLI
    base: str
    room: str
    kept: str  # event id of a message outside the purge range
    doomed: str  # event id of the message inside it
    late: str

    async def post(
        self, body: Any, *, headers: dict[str, str] | None = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        """POST as `muninn purge` does, with the service's token."""
        assert self.service.api is not None and self.service.api.token_file is not None
        token = read_token(self.service.api.token_file)
        sent = {"Authorization": f"Bearer {token}", **(headers or {})}
        return await post(self.base + PURGE_PATH, body, headers=sent, raw=raw)


async def start_service(
    synapse: SynapseServer, hs: Homeserver, seeder: MatrixUser, folder: Path
) -> Running:
    """A seeded room (three windows, an hour apart), indexed by a running client-mode service."""
    reader = await hs.register(displayname="Muninn purge")
    room = await hs.fresh_room(seeder)
    await reader.join(room)
    kept = await seeder.send_text(room, "the walrus colony sunbathes on the pier", ts=BASE)
    doomed = await seeder.send_text(room, "the quokka vault code is zqpurgeword", ts=BASE + HOUR)
    late = await seeder.send_text(room, "the walrus colony left the pier", ts=BASE + 2 * HOUR)
    port = free_port()
    doc = config_doc(synapse, reader, folder, port)
    config = write_config(folder / "config.yaml", doc)
    service = Service(parse_config(doc, folder), embedder=shared_embedder(), full_at_start=False)
    await service.start()
    try:
        await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 30)
    except BaseException:
        await service.stop()
        raise
    return Running(service, config, f"http://127.0.0.1:{port}", room, kept, doomed, late)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def running(
    synapse: SynapseServer,
    hs: Homeserver,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Running]:
    """One service for the endpoint's refusals (none of them writes a tombstone)."""
    seeder = await hs.seed_user()
    it = await start_service(synapse, hs, seeder, tmp_path_factory.mktemp("purge-api"))
    try:
        yield it
    finally:
        await it.service.stop()


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> float:
    """Poll `check` until it holds, within EVENTUALLY seconds; how long it took."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > EVENTUALLY:
            raise AssertionError(f"{what}: not within {EVENTUALLY:g} s")
        await asyncio.sleep(0.2)
    return time.monotonic() - started


def cited(doc: dict[str, Any]) -> set[str]:
    return {e for h in doc["hits"] for e in h["event_ids"]}


def expected_document(room: str) -> dict[str, Any]:
    return {"room_id": room, "from_ts": FROM, "to_ts": TO, "key": f"tombstone:{room}:{FROM}:{TO}"}


# ---------------------------------------------------------------- `muninn purge` → the service


async def test_cli_purge_falls_back_to_the_running_service(
    synapse: SynapseServer, hs: Homeserver, seeder: MatrixUser, tmp_path: Path
) -> None:
    """While `muninn run` holds the store, `muninn purge` succeeds through the service: the
    purged message leaves `muninn search --json` within seconds, the service's refresh deletes
    its point, and the output is exactly what a direct purge prints."""
    it = await start_service(synapse, hs, seeder, tmp_path)
    args = ("purge", "--room", it.room, "--from", str(FROM), "--to", str(TO))
    try:
        before = await muninn_here(it.config, "search", "quokka vault code", "--json")
        assert it.doomed in cited(before.doc()), before.err

        run = await muninn_here(it.config, *args, "--json")
        assert run.rc == 0, run.err
        assert run.doc() == expected_document(it.room)
        human = await muninn_here(it.config, *args)
        assert human.rc == 0, human.err

        async def gone_from_search() -> bool:
            doc = (await muninn_here(it.config, "search", "quokka vault code", "--json")).doc()
            return it.doomed not in cited(doc)

        await eventually(gone_from_search, "the purged message left `muninn search`")
        col = await it.service.writer.open()

        async def applied() -> bool:
            points = await asyncio.to_thread(lambda: list(col.scroll()))
            ids = {m["event_id"] for p in points for m in p.payload["messages"]}
            stone = await asyncio.to_thread(col.get_meta, expected_document(it.room)["key"])
            return it.doomed not in ids and stone is not None and bool(stone["applied"])

        await eventually(applied, "the service's refresh applied the tombstone")
        after = (await muninn_here(it.config, "search", "walrus colony pier", "--json")).doc()
        assert {it.kept, it.late} <= cited(after)
        assert it.doomed not in cited(after)
    finally:
        await it.service.stop()

    # The store is free again: the same command purges directly, and prints the same.
    direct = await muninn_here(it.config, *args, "--json")
    assert direct.rc == 0, direct.err
    assert direct.out == run.out
    direct_human = await muninn_here(it.config, *args)
    assert direct_human.rc == 0, direct_human.err
    assert direct_human.out == human.out
    # Dates, not raw milliseconds (regression: "[1793534400000, 1793538000000]").
    assert human.out.startswith(
        f"purge tombstone written for {it.room} from {shown(FROM)} to {shown(TO)}"
    )
    assert str(FROM) not in human.out


async def test_cli_purge_fallback_names_a_bad_room(running: Running) -> None:
    """An unknown alias is refused by name before anything is written."""
    nowhere = "#nowhere-at-all:muninn.test"
    run = await muninn_here(running.config, "purge", "--room", nowhere, "--from", "1", "--to", "2")
    assert run.rc == 1 and "muninn: room: " in run.err
    assert "Traceback" not in run.err


async def test_cli_purge_held_without_a_port_says_how_to_enable_it(
    synapse: SynapseServer, hs: Homeserver, tmp_path: Path
) -> None:
    """Without metrics.port the held-store error names the cause and how to fix it."""
    reader = await hs.register(displayname="Muninn held")
    doc = config_doc(synapse, reader, tmp_path, None)
    config = write_config(tmp_path / "config.yaml", doc)
    holder = open_store(
        IndexConfig(store=StoreConfig(path=tmp_path / "qdrant"), collection="muninn_purge"),
        tmp_path,
    )
    try:
        run = await muninn(config, "purge", "--room", "!x", "--from", "1", "--to", "2", "--json")
    finally:
        holder.close()
    assert run.rc == 1 and run.out == ""
    assert f"held by another process (pid {os.getpid()})" in run.err
    assert "metrics: {port:" in run.err and "`muninn purge` then asks it" in run.err
    assert "Traceback" not in run.err


# ---------------------------------------------------------------- POST /_muninn/purge refusals


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "room_id"),
        ({"from_ts": 1, "to_ts": 2}, "room_id"),
        ({"room_id": 7, "from_ts": 1, "to_ts": 2}, "room_id"),
        ({"room_id": "general", "from_ts": 1, "to_ts": 2}, "room_id"),
        ({"room_id": "#nowhere-at-all:muninn.test", "from_ts": 1, "to_ts": 2}, "room_id"),
        ({"room_id": "!r", "to_ts": 2}, "from_ts"),
        ({"room_id": "!r", "from_ts": "2024-01-01", "to_ts": 2}, "from_ts"),
        ({"room_id": "!r", "from_ts": True, "to_ts": 2}, "from_ts"),
        ({"room_id": "!r", "from_ts": 1}, "to_ts"),
        ({"room_id": "!r", "from_ts": 1, "to_ts": 1.5}, "to_ts"),
        ({"room_id": "!r", "from_ts": 5, "to_ts": 4}, "to_ts"),
        ({"room_id": "!r", "from_ts": 1, "to_ts": 2**53}, "to_ts"),
        ({"room_id": "!r", "from_ts": -5, "to_ts": 2}, "from_ts"),
        ({"room_id": "!r", "from_ts": 1, "to_ts": 2, "colour": "blue"}, "colour"),
        (["!r", 1, 2], "body"),
    ],
)
async def test_purge_endpoint_errors_name_the_field(
    running: Running, body: Any, field: str
) -> None:
    """A malformed purge is a 400 naming the field, and writes no tombstone."""
    status, doc = await running.post(body)
    assert status == 400, doc
    assert doc["field"] == field
    assert doc["error"] == f"{field}: {doc['message']}"
    col = await running.service.writer.open()
    assert await asyncio.to_thread(col.list_meta, TOMBSTONE_PREFIX) == {}


async def test_purge_endpoint_refuses_non_json_and_foreign_hosts(running: Running) -> None:
    """Not JSON: 400 naming the body; a non-JSON content type: 415; a foreign Host: 403."""
    headers = {"Content-Type": "application/json"}
    status, doc = await running.post(None, raw=b"{not json", headers=headers)
    assert (status, doc["field"]) == (400, "body")
    good = {"room_id": running.room, "from_ts": FROM, "to_ts": TO}
    status, _ = await running.post(None, raw=json.dumps(good).encode())  # octet-stream
    assert status == 415
    status, doc = await running.post(good, headers={"Host": "evil.example"})
    assert status == 403 and "Host" in doc["error"]
    col = await running.service.writer.open()
    assert await asyncio.to_thread(col.list_meta, TOMBSTONE_PREFIX) == {}


async def test_purge_endpoint_refuses_non_loopback_peers(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """On a wildcard bind, a peer that is not loopback never reaches the writer, even holding
    the token."""
    caplog.set_level(logging.WARNING, logger="muninn.service")
    server, port = from_afar_on_every_address(tmp_path)
    await server.start()
    try:
        body = {"room_id": "!r", "from_ts": 1, "to_ts": 2}
        auth = {"Authorization": f"Bearer {read_token(tmp_path / TOKEN_FILE)}"}
        status, doc = await post(f"http://127.0.0.1:{port}{PURGE_PATH}", body, headers=auth)
        assert status == 403
        assert "only loopback peers may purge" in doc["error"]
        assert f"{PURGE_PATH} from a non-loopback peer {FAR_PEER}" in caplog.text
    finally:
        await server.stop()


def test_purge_request_parse() -> None:
    """All three fields are required; the range may be one instant."""
    req = PurgeRequest.parse({"room_id": "#r:x", "from_ts": 5, "to_ts": 5})
    assert (req.room_id, req.from_ts, req.to_ts) == ("#r:x", 5, 5)
    with pytest.raises(QueryError) as e:
        PurgeRequest.parse({"room_id": "!r", "from_ts": 6, "to_ts": 5})
    assert e.value.field == "to_ts"


# ---------------------------------------------------------------- a purge during a rebuild


async def test_purge_during_rebuild_is_honoured_by_search_on_the_active_generation(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A compatibility change is building a new generation beside the active one: a purge is
    recorded in both, so search (still on the active one) drops its hits at once, and the new
    generation never holds the purged text once it is switched to. The log gives the range as
    dates (issue 36: milliseconds before)."""
    reader = await hs.register(displayname="Reader")
    room = await hs.fresh_room(seeder)
    await reader.join(room)
    kept = await seeder.send_text(room, "the narwhal tusk is a tooth", ts=BASE)
    doomed = await seeder.send_text(room, "narwhal vault code zqrebuildword", ts=BASE + HOUR)
    cfg = reader_config(hs, reader, tmp_path)
    old = Indexer(cfg)
    await old.refresh()
    old_gen = old.writer.generation
    await old.close()

    new = Indexer(cfg, embedder=RenamedEmbedder(shared_embedder(), "minilm-renamed", fail=1))
    try:
        with pytest.raises(EmbedUnavailable):
            await new.refresh()  # the build is under way (and failed partway)
        new_gen = new.writer.generation
        assert new_gen != old_gen and new.store.active() == old_gen
        searcher = Searcher(new.store, shared_embedder(), server_name=hs.server_name)
        query = SearchQuery.build(["narwhal vault code zqrebuildword"], limit=10)
        before = await searcher.search(query)
        assert before.retrievers == ["dense", "lexical"]
        assert doomed in {e for h in before.hits for e in h.event_ids}

        with caplog.at_level(logging.INFO, logger="muninn.index"):
            stone = await new.writer.add_tombstone(RoomID(room), FROM, TO)
        assert f"purge of {room} from {utc_minute(FROM)} to {utc_minute(TO)} UTC" in caplog.text
        assert str(FROM) not in caplog.text

        after = await searcher.search(query)  # no refresh in between
        assert doomed not in {e for h in after.hits for e in h.event_ids}
        assert after.dropped_stale >= 1
        assert kept in {e for h in after.hits for e in h.event_ids}
        active = new.store.open(old_gen, dense_dim=None, create=False)
        building = new.store.open(new_gen, dense_dim=None, create=False)
        for col in (active, building):
            record = col.get_meta(stone.key)
            assert record is not None and record["applied"] is False
            assert (record["from_ts"], record["to_ts"]) == (FROM, TO)

        report = await new.refresh()  # the build completes and switches
        assert report.activated and new.store.active() == new_gen
        assert set(await new.bodies()) == {kept}
        assert "zqrebuildword" not in await new.dump()
    finally:
        await new.close()


@pytest.mark.parametrize("given", ["9007199254740992", "99999999999999999999", "1969-12-31"])
def test_cli_purge_times_are_bounded(given: str) -> None:
    """`--from`/`--to` outside [0, 2^53) ms are a usage error naming the value, as the
    endpoint refuses them: a larger int is stored as a float and its tombstone never matches."""
    with pytest.raises(argparse.ArgumentTypeError, match="not a time from 1970 on"):
        parse_time(given)
    assert parse_time("9007199254740991") == 2**53 - 1
