"""`muninn run` in client mode (a `/sync` loop as a plain user) against the real Synapse."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.config import parse_config
from bot.demo.synapse import SynapseServer
from bot.service.run import Service
from ingest.embed import minilm
from ingest.store import open_store
from ingest.types import RoomID
from tests.bot.service.test_burst import until
from tests.botkit import ask, replies, service_config, wait_membership, wait_reply
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import muninn, shared_embedder, spawn_muninn, write_config

RUN_START_TIMEOUT = 60.0  # seconds for `muninn run` in a child process to say it is running


@dataclass
class Running:
    """A `muninn run` child process: its stderr lines so far, and the rest once it stopped."""

    proc: asyncio.subprocess.Process
    logged: list[bytes] = field(default_factory=list)
    err: bytes = b""


@contextlib.asynccontextmanager
async def muninn_run(config: Path, ready: bytes, stop_within: float) -> AsyncIterator[Running]:
    """`muninn run` in a child process, entered once a stderr line holds `ready` (each line
    within RUN_START_TIMEOUT; an end of stderr first fails, showing what it logged). On exit
    SIGTERM, and it must stop within `stop_within` seconds with exit 0."""
    run = Running(await spawn_muninn(config, "run", stderr=asyncio.subprocess.PIPE))
    assert run.proc.stderr is not None
    try:
        while not run.logged or ready not in run.logged[-1]:
            line = await asyncio.wait_for(run.proc.stderr.readline(), RUN_START_TIMEOUT)
            run.logged.append(line)
            assert line, b"".join(run.logged).decode()  # EOF: it exited first
        yield run
    finally:
        run.proc.send_signal(signal.SIGTERM)
        _, run.err = await asyncio.wait_for(run.proc.communicate(), stop_within)
    assert run.proc.returncode == 0, (b"".join(run.logged) + run.err).decode()


async def test_bot_client_mode_answers_and_survives_a_restart(
    synapse: SynapseServer,
    hs: Homeserver,
    alice: MatrixUser,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Commands over /sync are answered; one sent while the bot was down is answered after the
    restart, and exactly once even when the next restart's first /sync delivers it again."""
    me = await hs.register(displayname="Muninn client")
    cfg = service_config(synapse, tmp_path_factory.mktemp("client"), client=me)
    room = await hs.fresh_room(alice)
    await me.join(room)
    await alice.send_text(room, "the kiwi orchard needs water")

    service = Service(cfg, embedder=shared_embedder(), full_at_start=False)
    await service.start()
    try:
        _, reply = await ask(alice, room, "!search kiwi", me.user_id)
        assert "**kiwi** orchard" in reply["content"]["body"]
        dm = await alice.create_room(
            preset="trusted_private_chat", invite=[me.user_id], is_direct=True
        )
        await wait_membership(alice, dm, me.user_id, "leave")
    finally:
        await service.stop()

    missed = await alice.send_text(room, "!search orchard")  # nobody is listening
    for _ in range(2):  # two restarts: the command is answered once
        service = Service(cfg, embedder=shared_embedder(), full_at_start=False)
        await service.start()
        try:
            await wait_reply(alice, room, missed, me.user_id)
            await ask(alice, room, "!help", me.user_id)  # a barrier: the first sync is in
            await service.queue.join()  # ... and no worker is still busy with its batch
        finally:
            await service.stop()
    assert len(await replies(alice, room, missed, me.user_id)) == 1


async def test_bot_unloads_an_idle_model_and_answers_after_it(
    synapse: SynapseServer,
    hs: Homeserver,
    alice: MatrixUser,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The service's own MiniLM is unloaded after `embedder.unload_after_seconds` without a
    call, and the next `!search` loads it again and answers with both retrievers."""
    me = await hs.register(displayname="Muninn idle")
    cfg = service_config(
        synapse,
        tmp_path_factory.mktemp("idle"),
        client=me,
        embedder={"unload_after_seconds": 0.5},
    )
    room = await hs.fresh_room(alice)
    await me.join(room)
    await alice.send_text(room, "the quince orchard needs water")
    service = Service(cfg)  # its own embedder, from the config
    await service.start()
    try:
        await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 30)  # embedded it
        await until(lambda: not minilm.loaded(), "the idle model unloaded")
        before = minilm.loads()
        _, reply = await ask(alice, room, "!search orchard water", me.user_id)
        body = reply["content"]["body"]
        assert "Alice: the quince orchard needs water" in body.replace("**", "")  # marked words
        # The search loaded the model again (the dense side answered); counted, not read from
        # `loaded()`, which a slow reply lets the 0.5 s unload clear again.
        assert minilm.loads() > before
    finally:
        await service.stop()


async def test_bot_run_stops_cleanly_on_sigterm(
    synapse: SynapseServer,
    hs: Homeserver,
    alice: MatrixUser,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`muninn run` answers a command, then exits 0 on SIGTERM and releases the store."""
    me = await hs.register(displayname="Muninn cli")
    tmp = tmp_path_factory.mktemp("run")
    room = await hs.fresh_room(alice)
    await me.join(room)
    doc = {
        "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
        "reader": {"user_id": me.user_id, "access_token": me.access_token},
        "index": {"store": {"path": str(tmp / "qdrant")}},
    }
    # A cold start (interpreter, imports, the model, the store, the first full pass) is not
    # part of the reply's budget: wait until the service says it runs, then ask.
    async with muninn_run(write_config(tmp / "config.yaml", doc), b"muninn is running as", 30):
        await ask(alice, room, "!help", me.user_id)
    store = open_store(parse_config(doc, tmp).index, tmp)  # the lock was released
    store.close()


async def test_bot_run_honours_sigterm_while_the_homeserver_does_not_answer(
    synapse: SynapseServer, hs: Homeserver, tmp_path: Path
) -> None:
    """SIGTERM during a start that waits on the homeserver (`https://` to its plain-HTTP port)
    stops `muninn run` within seconds, exit 0 (regression: it was ignored until the start gave
    up, ~5 min, past systemd's TimeoutStopSec and into a SIGKILL)."""
    me = await hs.register()
    doc = {
        "homeserver": {
            "url": synapse.base_url.replace("http://", "https://"),
            "server_name": synapse.server_name,
        },
        "reader": {"user_id": me.user_id, "access_token": me.access_token},
        "index": {"store": {"path": str(tmp_path / "qdrant")}},
    }
    config = write_config(tmp_path / "config.yaml", doc)
    async with muninn_run(config, b"TLS to a port that speaks plain HTTP?", 15) as run:
        pass  # SIGTERM while the start still waits
    # The shutdown is logged (regression: `muninn run` said nothing as it stopped).
    assert b"SIGTERM received: stopping" in run.err and b"muninn stopped" in run.err, (
        run.err.decode()
    )


async def test_bot_run_that_cannot_start_says_so_not_stopped(
    hs: Homeserver, tmp_path: Path
) -> None:
    """Issue 36 item 9: a `muninn run` whose start fails (here its store is held by another
    process) logs that it did not start, with the cause, and never "muninn stopped", which an
    operator tailing the log reads as the live service stopping; it exits 1 naming the cause."""
    me = await hs.register()
    doc = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": me.user_id, "access_token": me.access_token},
        "index": {"store": {"path": str(tmp_path / "qdrant")}},
    }
    config = write_config(tmp_path / "config.yaml", doc)
    held = open_store(parse_config(doc, tmp_path).index, tmp_path)
    try:
        run = await muninn(config, "run")
    finally:
        held.close()
    assert run.rc == 1, run.err
    assert "muninn did not start: " in run.err and "held by another process" in run.err
    assert "muninn stopped" not in run.err and "Traceback" not in run.err
