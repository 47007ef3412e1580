"""ingest.index.refresh end to end, rules 12–13: a purge tombstone removes a window for good, a
changed rule set builds a new generation then switches.

Real Synapse, the embedded qdrant-edge store and the real MiniLM embedder.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest

from ingest.config import load_config
from ingest.errors import EmbedUnavailable
from ingest.index.records import COMPAT_KEY, CURSOR_PREFIX, TOMBSTONE_PREFIX, add_tombstone
from ingest.types import RoomID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, RenamedEmbedder, reader_config, shared_embedder
from tests.ingest.index.refreshkit import reader_in, room_report, write_reader_config
from tests.inprocess import muninn_here

# ---------------------------------------------------------------- rule 12: purge tombstones


async def test_refresh_tombstone_deletes_window_and_never_reindexes(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A purge tombstone deletes its messages on the next refresh; later ones never return them."""
    room = await hs.fresh_room(seeder)
    reader = await reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    early = await seeder.send_text(room, "early kept message", ts=base)
    doomed = [
        await seeder.send_text(room, f"doomed message dodo{i}", ts=base + 60_000 * (i + 1))
        for i in range(3)
    ]
    late = await seeder.send_text(room, "late kept message", ts=base + 600_000)
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert set(await ix.bodies()) == {early, late, *doomed}
        add_tombstone(await ix.collection(), RoomID(room), base + 30_000, base + 300_000)
        report = room_report(await ix.refresh(), room)
        assert report.purged_messages == 3
        assert set(await ix.bodies()) == {early, late}
        await seeder.send_edit(room, doomed[0], "doomed message edited back dodoX", ts=base + 1)
        await seeder.send_text(room, "after the purge", ts=base + 700_000)
        await ix.refresh()
        col = await ix.collection()
        col.delete_meta(CURSOR_PREFIX + room)  # walk the whole room again from its start
        await ix.refresh()
        bodies = await ix.bodies()
        assert not set(doomed) & set(bodies)
        assert early in bodies and late in bodies
        assert "dodo" not in json.dumps([p.payload for p in await ix.points()])


async def test_refresh_applies_tombstone_written_by_purge_cli(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`muninn purge --room R --from T1 --to T2` writes a tombstone the next refresh applies;
    `--dry-run` counts the messages the range covers and writes nothing, and on a terminal
    the count is shown and a purge not confirmed writes nothing (issue 36 item 4)."""
    room = await hs.fresh_room(seeder)
    reader = await reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    kept = await seeder.send_text(room, "kept message", ts=base)
    await seeder.send_text(room, "purged by the operator zqcliq", ts=base + 3_600_000)
    store = tmp_path / "qdrant"
    config = tmp_path / "config.yaml"
    write_reader_config(config, hs, reader, store)
    ix = Indexer(load_config(config))
    await ix.refresh()
    await ix.close()  # one process per store path
    span = ("purge", "--room", room, "--from", str(base + 1), "--to", "2023-11-15T00:00")
    dry = await muninn_here(config, *span, "--dry-run")
    assert dry.rc == 0, dry.err
    assert dry.out.startswith(f"would purge 1 message of {room} from ")
    assert "nothing written" in dry.out
    monkeypatch.setattr(sys, "stdin", _Terminal("n\n"))
    declined = await muninn_here(config, *span)
    assert declined.rc == 1 and declined.out.startswith(f"purge 1 message of {room} from ")
    assert "for good? [y/N]" in declined.out and "nothing purged" in declined.out
    assert not _purges_filed(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # a script: not a terminal, not asked
    run = await muninn_here(config, *span, "--json")
    assert run.doc()["room_id"] == room and _purges_filed(tmp_path)
    async with Indexer(load_config(config)) as ix:
        report = room_report(await ix.refresh(), room)
        assert report.purged_messages == 1
        assert set(await ix.bodies()) == {kept}
        assert "zqcliq" not in json.dumps([p.payload for p in await ix.points()])


def _purges_filed(folder: Path) -> list[str]:
    return [line for p in folder.glob("purges-*.jsonl") for line in p.read_text().splitlines()]


class _Terminal(io.StringIO):
    """Standard input as a terminal gives it: the operator's typed answer."""

    def isatty(self) -> bool:
        return True


# ---------------------------------------------------------------- rule 13: generations


async def test_refresh_compat_change_builds_new_generation_then_switches(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another embedder identity builds a new generation beside the active one, switching only
    once it is complete, with the old generation's tombstones carried over; the log marks the
    switch (issue 36)."""
    room = await hs.fresh_room(seeder)
    reader = await reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    kept = await seeder.send_text(room, "kept across generations", ts=base)
    purged = await seeder.send_text(room, "purged emuword", ts=base + 60_000)
    cfg = reader_config(hs, reader, tmp_path)
    old = Indexer(cfg)
    await old.refresh()
    old_gen = old.writer.generation
    add_tombstone(await old.collection(), RoomID(room), base + 30_000, base + 90_000)
    await old.close()

    renamed = RenamedEmbedder(shared_embedder(), "minilm-renamed", fail=1)
    new = Indexer(cfg, embedder=renamed)
    try:
        with pytest.raises(EmbedUnavailable):
            await new.refresh()  # the new generation's build fails partway
        new_gen = new.writer.generation
        assert new_gen != old_gen
        assert new.store.active() == old_gen
        assert set(new.store.generations()) == {old_gen, new_gen}
        with caplog.at_level(logging.WARNING, logger="muninn.index"):
            report = await new.refresh()
        assert report.activated
        assert f"switched to {new_gen}: searches read it from now on" in caplog.text
        assert new.store.active() == new_gen
        assert new.store.generations() == [new_gen]
        col = new.store.open(new_gen, dense_dim=None, create=False)
        compat = col.get_meta(COMPAT_KEY)
        assert compat is not None and compat["complete"]
        assert compat["embedder"]["model"] == "minilm-renamed"
        assert any(k.startswith(TOMBSTONE_PREFIX) for k in col.list_meta(""))
        assert set(await new.bodies()) == {kept}
        assert purged not in await new.dump()
    finally:
        await new.close()
