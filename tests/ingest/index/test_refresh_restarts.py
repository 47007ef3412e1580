"""ingest.index.refresh end to end, rule 10: a pass that fails or is killed keeps its cursor, and
the next one converges to what a clean run writes.

Real Synapse, the embedded qdrant-edge store and the real MiniLM embedder; a refused upsert and
an embedder that is down are injected at the adapter edge (`tests.indexing`), a kill is a real
SIGKILL of a child process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ingest.config import load_config
from ingest.errors import EmbedUnavailable, StoreError
from ingest.index.records import CURSOR_PREFIX
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    PROJECT,
    FlakyCollection,
    FlakyEmbedder,
    Indexer,
    reader_config,
    send_texts,
    shared_embedder,
)
from tests.ingest.index.refreshkit import hashes, reader_in, room_report, write_reader_config

# ---------------------------------------------------------------- rule 10: faults


async def test_refresh_failed_upsert_keeps_cursor_and_next_run_converges(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """A StoreError on upsert leaves the cursor unchanged; the next refresh indexes everything."""
    reader = await reader_in(hs, alice, room)
    first = await send_texts(alice, room, ["one fish", "two fish"])
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        col = await ix.collection()
        cursor = col.get_meta(CURSOR_PREFIX + room)
        more = await send_texts(alice, room, ["red fish", "blue fish"])
        flaky = FlakyCollection(col, fail_upserts=1)
        ix.writer.collection = flaky
        with pytest.raises(StoreError, match="injected"):
            await ix.refresh()
        assert col.get_meta(CURSOR_PREFIX + room) == cursor
        await ix.refresh()
        assert flaky.upserts >= 1
        bodies = await ix.bodies()
        assert sorted(bodies) == sorted(first + more)


async def test_refresh_failed_embed_keeps_cursor_and_next_run_converges(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """EmbedUnavailable mid-refresh leaves the cursor unchanged; the next refresh converges."""
    reader = await reader_in(hs, alice, room)
    first = await send_texts(alice, room, ["alpha line", "beta line"])
    embedder = FlakyEmbedder(shared_embedder(), fail=0)
    async with Indexer(reader_config(hs, reader, tmp_path), embedder=embedder) as ix:
        await ix.refresh()
        col = await ix.collection()
        cursor = col.get_meta(CURSOR_PREFIX + room)
        before = await hashes(ix)
        more = await send_texts(alice, room, ["gamma line"])
        embedder.fail = 1
        with pytest.raises(EmbedUnavailable):
            await ix.refresh()
        assert col.get_meta(CURSOR_PREFIX + room) == cursor
        assert await hashes(ix) == before
        await ix.refresh()
        assert sorted(await ix.bodies()) == sorted(first + more)


# ---------------------------------------------------------------- rule 10: killed and restarted


_KILLED_REFRESH = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from pathlib import Path
    from ingest.config import load_config
    from ingest.index.records import CURSOR_PREFIX
    from tests.indexing import Indexer

    mode, after = sys.argv[2], int(sys.argv[3])

    async def main() -> None:
        ix = Indexer(load_config(sys.argv[1]))
        col = await ix.collection()
        upsert, put_meta = col.upsert, col.put_meta
        page_writes: list[str] = []  # the current page's upsert and cursor save, in order
        pages = [0]

        def write(kind):
            # The page's second write, whichever it is: its first is done, this one never is.
            if mode == "between-writes" and pages[0] + 1 == after and len(page_writes) == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            page_writes.append(kind)

        def upsert_between(points):
            write("upsert")
            upsert(points)

        def put_meta_between(key, value):
            if key.startswith(CURSOR_PREFIX):
                write("cursor")
            put_meta(key, value)

        col.upsert, col.put_meta = upsert_between, put_meta_between

        def progress(tick):
            if tick.pages == 0:
                return  # the room begins: no page written yet
            pages[0] += 1
            page_writes.clear()
            print(f"page {tick.events}", flush=True)

        await ix.writer.refresh(progress=progress)

    asyncio.run(main())
    """
)


async def _run_killed_refresh(config: Path, mode: str, after: int) -> int:
    """Run a refresh in a subprocess and SIGKILL it partway; the events of the pages it
    reported done (their cursor saved)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _KILLED_REFRESH,
        str(config),
        mode,
        str(after),
        cwd=PROJECT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    done = 0
    if mode == "external":
        pages = 0
        while pages < after:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, (await proc.stderr.read()).decode() if proc.stderr else "no output"
            pages += line.startswith(b"page ")
        os.kill(proc.pid, signal.SIGKILL)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    for line in out.decode().splitlines():
        done = int(line.removeprefix("page ")) if line.startswith("page ") else done
    return done


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def long_room(hs: Homeserver) -> tuple[MatrixUser, str]:
    """One room of a few hundred events (messages, edits, redactions), seeded once a module."""
    seeder = await hs.seed_user()
    room = await hs.fresh_room(seeder)
    base = 1_700_000_000_000
    ids: list[str] = []
    for i in range(150):
        # Backdated, with a long silence every 50 messages, so windows close by gap and size.
        ts = base + i * 20_000 + (i // 50) * 7_200_000
        ids.append(await seeder.send_text(room, f"line {i} of the long log, word w{i}", ts=ts))
        if i % 30 == 29:
            await seeder.send_edit(room, ids[i - 5], f"line {i - 5} edited, word e{i}", ts=ts + 1)
            await seeder.redact(room, ids[i - 20])
    return seeder, room


_KILLED_EXTRA: dict[str, Any] = {"chunker": {"max_bytes": 700}, "refresh": {"page_size": 20}}


@dataclass(frozen=True)
class CleanRun:
    reader: MatrixUser  # the killed runs read as the same user: the same room, joins and all
    events_read: int
    hashes: dict[str, str]
    bodies: dict[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def clean_run(
    hs: Homeserver, long_room: tuple[MatrixUser, str], tmp_path_factory: pytest.TempPathFactory
) -> CleanRun:
    """One uninterrupted refresh of `long_room` (which no test changes), once a module: what
    every killed-and-restarted run, by the same reader, must equal."""
    seeder, room = long_room
    reader = await reader_in(hs, seeder, room)
    folder = tmp_path_factory.mktemp("clean")
    clean = Indexer(reader_config(hs, reader, folder, **_KILLED_EXTRA))
    try:
        every = room_report(await clean.refresh(), room)
        return CleanRun(reader, every.events_read, await hashes(clean), await clean.bodies())
    finally:
        await clean.close()


@pytest.mark.parametrize("mode", ["between-writes", "external"])
async def test_refresh_killed_midway_converges_to_clean_run(
    hs: Homeserver,
    long_room: tuple[MatrixUser, str],
    clean_run: CleanRun,
    tmp_path: Path,
    mode: str,
) -> None:
    """SIGKILL mid-refresh, then restart: the same point ids and content hashes as a clean run.

    `between-writes` kills a page between its two writes (its points and its cursor, in
    whichever order the writer makes them): the restart must read that page again, so the
    cursor may only move once the page's points are written."""
    room = long_room[1]
    config = tmp_path / "killed.yaml"
    write_reader_config(config, hs, clean_run.reader, tmp_path / "killed", **_KILLED_EXTRA)
    acknowledged = await _run_killed_refresh(config, mode, after=2)
    killed = Indexer(load_config(config))
    try:
        partial = await hashes(killed)
        assert partial, "the killed run wrote nothing"
        restarted = room_report(await killed.refresh(), room)
        assert len(partial) < len(clean_run.hashes), "the kill came after the refresh had finished"
        if mode == "between-writes":
            # The killed page and everything after it, read again: nothing skipped.
            assert acknowledged == 20
            assert restarted.events_read == clean_run.events_read - acknowledged
        assert await hashes(killed) == clean_run.hashes
        assert await killed.bodies() == clean_run.bodies
    finally:
        await killed.close()
