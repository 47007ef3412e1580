"""Rule 13c: a full disk stops the embedded store's writes by name, never by SIGBUS (issue 21
item 8).

The end-to-end test runs on a real 64 MiB tmpfs (skipped where mounting one is not permitted),
filled by a plain file: without the check qdrant-edge's mapped files killed the writer with
SIGBUS (rc 135, no message). The store-level test turns the free-space probe (the seam) to a
full disk, so it runs anywhere.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.service.http_api import store_check
from ingest.errors import DiskFull
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.store import PointRecord, generation_name
from ingest.store.edge import EdgeStore
from ingest.store.space import MIB, SpaceGuard, free_bytes
from ingest.types import SparseVector
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, muninn, reader_config, reader_config_doc, write_config

GEN = generation_name("muninn_test", {"embedder": "space", "dimension": 4})


def _point(rnd: random.Random) -> PointRecord:
    return PointRecord(
        id=str(uuid.uuid4()),
        dense=[rnd.uniform(0.1, 1.0) for _ in range(4)],
        sparse=SparseVector((1,), (1.0,)),
        payload={"room_id": "!r1", "first_ts": 1, "last_ts": 1},
    )


def test_store_refuses_writes_by_name_below_the_margin_and_resumes(tmp_path: Path) -> None:
    """Short of space every write raises DiskFull naming the path and the bytes free; reads
    go on; the store's health check fails with it; once space returns writes succeed again."""
    free = {"bytes": 10 * MIB}
    store = EdgeStore(
        tmp_path / "qdrant",
        "muninn_test",
        SpaceGuard(tmp_path / "qdrant", 4 * MIB, lambda _: free["bytes"]),
    )
    rnd = random.Random(1)
    try:
        coll = store.open(GEN, dense_dim=4, create=True)
        coll.upsert([_point(rnd) for _ in range(5)])
        store.activate(GEN)
        free["bytes"] = 3 * MIB
        for write in (
            lambda: coll.upsert([_point(rnd)]),
            lambda: coll.put_meta("cursor/!r1", {"token": "t"}),
            lambda: coll.delete_meta("cursor/!r1"),
        ):
            with pytest.raises(DiskFull, match=r"qdrant has 3,145,728 bytes free"):
                write()
        assert coll.count() == 5  # reads go on
        with pytest.raises(DiskFull, match="disk full"):
            asyncio.run(store_check(store)())
        free["bytes"] = 10 * MIB
        coll.upsert([_point(rnd)])
        assert coll.count() == 6
        assert "6 points" in asyncio.run(store_check(store)())
    finally:
        store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 MiB filesystem (tmpfs), unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """A file taking all but `leave` bytes of the disk's free space."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        remaining = free_bytes(disk) - leave
        while remaining > 0:
            chunk = min(remaining, MIB)
            f.write(b"\0" * chunk)
            remaining -= chunk
    return filler


async def test_full_disk_stops_the_writer_by_name_searches_go_on_and_writing_resumes(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path, small_disk: Path
) -> None:
    room = await hs.fresh_room(alice)
    reader = await hs.register(displayname="Reader")
    await admit(alice, room, reader)
    early = await alice.send_text(room, "the penguin pool is drained on mondays")
    store = {"path": str(small_disk / "qdrant"), "min_free_mb": 16}
    doc = reader_config_doc(hs, reader, tmp_path, index={"store": store})
    config = write_config(tmp_path / "config.yaml", doc)
    cfg = reader_config(hs, reader, tmp_path, index={"store": store})
    async with Indexer(cfg) as ix:
        await ix.refresh()

    filler = _fill(small_disk, 8 * MIB)
    run = await muninn(config, "refresh")  # was rc 135 (SIGBUS) and no message
    assert run.rc == 1, run.err
    last = run.err.strip().splitlines()[-1]
    assert last.startswith("muninn: disk full: ") and str(small_disk / "qdrant") in last
    assert "bytes free" in last and "Traceback" not in run.err
    filler.unlink()

    async with Indexer(cfg) as ix:
        await ix.collection()  # the running writer's store, opened while there was room
        filler = _fill(small_disk, 8 * MIB)
        late = await alice.send_text(room, "the narwhal tank needs a new filter")
        with pytest.raises(DiskFull, match="bytes free"):
            await ix.refresh()
        searcher = Searcher(ix.store, ix.embedder, server_name=hs.server_name)
        result = await searcher.search(SearchQuery.build(["penguin pool"], room_ids=[room]))
        assert early in {m["event_id"] for h in result.hits for m in h.messages}
        with pytest.raises(DiskFull):
            await store_check(ix.store)()

        filler.unlink()  # space returns: the next pass writes again
        await ix.refresh()
        assert late in await ix.bodies()
        assert "points" in await store_check(ix.store)()
