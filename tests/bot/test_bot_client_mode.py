"""`muninn run` in client mode (a `/sync` loop as a plain user) against the real Synapse."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
import yaml

from bot.config import parse_config
from bot.demo.synapse import SynapseServer
from bot.service import Service
from ingest.embed import minilm
from ingest.store import open_store
from ingest.types import RoomID
from tests.bot.test_bot_burst import until
from tests.botkit import ask, replies, service_config, wait_membership, wait_reply
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import shared_embedder, spawn_muninn

RUN_START_TIMEOUT = 60.0  # seconds for `muninn run` in a child process to say it is running


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
        _, reply = await ask(alice, room, "!search orchard water", me.user_id)
        body = reply["content"]["body"]
        assert "Alice: the quince orchard needs water" in body
        assert minilm.loaded()  # the search reloaded the model: the dense side answered
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
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = await spawn_muninn(config, "run", stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    logged: list[bytes] = []
    try:
        # A cold start (interpreter, imports, the model, the store, the first full pass) is
        # not part of the reply's budget: wait until the service says it runs, then ask.
        while not logged or b"muninn is running as" not in logged[-1]:
            logged.append(await asyncio.wait_for(proc.stderr.readline(), RUN_START_TIMEOUT))
            assert logged[-1], b"".join(logged).decode()  # EOF: it exited before running
        await ask(alice, room, "!help", me.user_id)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, (b"".join(logged) + err).decode()
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
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = await spawn_muninn(config, "run", stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    logged: list[bytes] = []
    try:
        while not logged or b"TLS to a port that speaks plain HTTP?" not in logged[-1]:
            logged.append(await asyncio.wait_for(proc.stderr.readline(), RUN_START_TIMEOUT))
            assert logged[-1], b"".join(logged).decode()  # EOF: it exited on its own
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, (b"".join(logged) + err).decode()
    # The shutdown is logged (regression: `muninn run` said nothing as it stopped).
    assert b"SIGTERM received: stopping" in err and b"muninn stopped" in err, err.decode()
