"""One room's persistent failure is that room's: reported, retried, and never the pass's.

Real Synapse, the embedded store and the real embedder. The persistent fault is one a real
Synapse cannot produce on demand (a cursor it refuses now heals, issue 46:
tests/ingest/index/test_refresh_faults.py): a proxy before it refusing one room's `/messages`
(400) on every pass until it is fixed, at the transport (tests/transport.py `Recorder.fault`),
the CLI's included (its default transport, in this process).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from urllib.parse import unquote

import pytest

from ingest.config import Config, load_config
from ingest.index.generations import SWITCH_AFTER_FAILED_PASSES
from ingest.index.records import RETRY_PREFIX
from ingest.matrix import MatrixReader, Request, Response, http
from ingest.types import RoomID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    Indexer,
    RenamedEmbedder,
    reader_config_doc,
    shared_embedder,
    two_rooms,
    write_config,
)
from tests.inprocess import muninn_here
from tests.transport import Recorder, answer


class Proxy:
    """Before the real Synapse: while `broken`, one room's `/messages` is refused (400)."""

    def __init__(self, room_id: str) -> None:
        self.room_id = room_id
        self.broken = False

    def fault(self, request: Request) -> Response | None:
        path = unquote(request.path)
        if self.broken and f"/rooms/{self.room_id}/messages" in path:
            return answer(400, {"errcode": "M_UNKNOWN", "error": "refused by the proxy"})
        return None

    def reader(self, cfg: Config) -> MatrixReader:
        return MatrixReader.from_config(cfg, transport=Recorder(fault=self.fault))

    def before_every_client(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The CLI's readers too (`muninn refresh`, `status` in this process)."""
        monkeypatch.setattr(http, "AiohttpTransport", lambda: Recorder(fault=self.fault))


def _by_room(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    rooms = doc["rooms"]
    assert isinstance(rooms, list)
    return {r["room_id"]: r for r in rooms}


async def test_refresh_failing_room_is_reported_retried_and_the_others_finish(
    hs: Homeserver,
    seeder: MatrixUser,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A room that fails every pass is named in the report, the log, `muninn refresh --json`
    and `muninn status`; the other rooms are indexed; once it can be read it catches up."""
    reader, failing, healthy = await two_rooms(hs, seeder)
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    proxy = Proxy(failing)
    proxy.before_every_client(monkeypatch)
    cfg = load_config(config)
    ix = Indexer(cfg, reader=proxy.reader(cfg))
    try:
        await ix.refresh()
        proxy.broken = True
        await seeder.send_text(failing, "alpha second words")
        beta = await seeder.send_text(healthy, "beta second words")
        caplog.set_level(logging.WARNING, logger="muninn.index")
        report = await ix.refresh()
        rooms = {r.room_id: r for r in report.rooms}
        assert rooms[healthy].error is None and rooms[healthy].indexed == 1
        assert rooms[failing].error is not None and "400" in rooms[failing].error
        assert rooms[failing].failed_passes == 1
        assert beta in await ix.bodies()
        assert "alpha second" not in await ix.dump()
        assert any(failing in r.getMessage() for r in caplog.records)
        assert report.activated is False and report.switch_held is None  # nothing to switch
        # The room's own refresh (the live stream wakes it) fails too, but counts no pass.
        alone = await ix.refresh([RoomID(failing)])
        assert [(r.room_id, r.failed_passes) for r in alone.failed] == [(failing, 1)]
    finally:
        await ix.close()  # one process per store path

    run = await muninn_here(config, "refresh", "--json")
    assert run.rc == 1, run.err
    assert failing in run.err
    cli = _by_room(json.loads(run.out))
    assert cli[failing]["failed_passes"] == 2 and "400" in str(cli[failing]["error"])
    assert cli[healthy]["error"] is None and cli[healthy]["failed_passes"] == 0

    status = _by_room((await muninn_here(config, "status", "--json")).doc())
    assert status[failing]["failed_passes"] == 2 and status[failing]["error"]
    assert status[healthy]["error"] is None
    plain = await muninn_here(config, "status")
    assert "FAILED 2 passes in a row" in plain.out

    proxy.broken = False  # the proxy is fixed
    async with Indexer(cfg, reader=proxy.reader(cfg)) as ix:
        col = await ix.collection()
        report = await ix.refresh()
        assert all(r.error is None for r in report.rooms)
        assert col.get_meta(RETRY_PREFIX + failing) is None
        assert "alpha second words" in (await ix.bodies()).values()


async def test_rebuilt_generation_switches_only_once_a_room_failure_persists(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A rebuild whose room fails holds its switch (the active generation still serves that
    room) for `SWITCH_AFTER_FAILED_PASSES` passes, then switches with the room recorded as
    needing a retry in the new active generation, and named in the report and the log."""
    reader, failing, healthy = await two_rooms(hs, seeder)
    cfg = load_config(
        write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    )
    old = Indexer(cfg)
    await old.refresh()
    old_gen = old.writer.generation
    await old.close()

    proxy = Proxy(failing)
    renamed = RenamedEmbedder(shared_embedder(), "minilm-renamed")
    new = Indexer(cfg, embedder=renamed, reader=proxy.reader(cfg))
    try:
        await new.refresh([RoomID(failing)])  # the rebuild has read the room once
        proxy.broken = True
        late = await seeder.send_text(failing, "alpha late words")
        caplog.set_level(logging.WARNING, logger="muninn.index")
        for passes in range(1, SWITCH_AFTER_FAILED_PASSES):
            report = await new.refresh()
            assert [(r.room_id, r.failed_passes) for r in report.failed] == [(failing, passes)]
            assert not report.activated and report.switch_held and failing in report.switch_held
            assert new.store.active() == old_gen
        report = await new.refresh()
        assert report.activated and report.switch_held is None
        assert [r.room_id for r in report.rooms if r.error is None] == [healthy]
        new_gen = new.writer.generation
        assert new.store.generations() == [new_gen]
        active = new.store.open(new_gen, dense_dim=None, create=False)
        record = active.get_meta(RETRY_PREFIX + failing)
        assert record is not None and record["failed_passes"] == SWITCH_AFTER_FAILED_PASSES
        assert any(
            "switched to" in r.getMessage() and failing in r.getMessage() for r in caplog.records
        )
        bodies = await new.bodies()
        assert late not in bodies  # missing, and recorded as missing
        assert "beta first words" in bodies.values()  # the other room is in the new generation

        proxy.broken = False  # the proxy is fixed
        report = await new.refresh()
        assert report.failed == [] and active.get_meta(RETRY_PREFIX + failing) is None
        assert late in await new.bodies()
    finally:
        await new.close()
