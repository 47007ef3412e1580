"""`bot.chat.command_alias`: a command room alias the homeserver could not resolve at start is
resolved later, and meanwhile said to be unresolved, in the room and by `muninn status`.

A resolution failing at start is a fault a real Synapse cannot produce on demand: the service's
own transport answers the alias lookups 502 (as a proxy before a restarting homeserver does)
until the test lets them through (tests/transport.py `Recorder.fault`); the rest is the real
Synapse. Client mode: the service is this test's own, beside the module's other services.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from bot.config import parse_config
from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer, free_port
from bot.service.run import Service
from ingest.matrix import Request, Response
from ingest.matrix.http import Retry
from ingest.types import RoomID
from tests.bot.botenv import JOINED_HISTORY, body_of
from tests.botkit import ask, service_doc
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import muninn, shared_embedder, write_config
from tests.transport import Recorder, answer


async def test_bot_command_room_alias_unresolved_at_start_is_said_then_resolved(
    synapse: SynapseServer,
    hs: Homeserver,
    alice: MatrixUser,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Regression (issue 46): one failed lookup of `bot.command_room`'s alias at start turned
    cross-room search off for the whole run, the command room answered as an ordinary room
    and `muninn status` said "served". Until the alias resolves, a command there is told it is
    not resolved yet (why included) and status says NOT served; once the homeserver answers,
    the background retries resolve it and the room searches every room."""
    folder = tmp_path_factory.mktemp("unresolved")
    me = await hs.register(displayname="Muninn client")
    persona = await hs.register(unique_localpart("persona-"), displayname="Persona")
    local = unique_localpart("commands")
    alias = f"#{local}:{synapse.server_name}"
    commands = await persona.create_room(
        preset="private_chat", alias_localpart=local, initial_state=[JOINED_HISTORY]
    )
    await persona.invite(commands, me.user_id)
    await me.join(commands)
    herons = await hs.fresh_room(alice)
    await me.join(herons)
    await alice.send_text(herons, "the heron colony nests in the tall pines by the lake")
    doc = service_doc(
        synapse,
        folder,
        client=me,
        bot={"command_room": alias, "command_room_askers": [r"@persona-.*:muninn\.test"]},
        metrics={"port": free_port()},
    )
    config = write_config(folder / "config.yaml", doc)
    down = [True]

    def bad_gateway(request: Request) -> Response | None:
        if down and "/directory/room/" in unquote(request.path):
            return answer(502, {"errcode": "M_UNKNOWN", "error": "bad gateway"})
        return None

    service = Service(
        parse_config(doc, folder),
        embedder=shared_embedder(),
        full_at_start=False,
        transport=Recorder(fault=bad_gateway),
    )
    service.client.retry = Retry(attempts=1, backoff=0.0)  # the fault at once, not in 8 s
    await service.start()
    try:
        assert service.handler.command_alias.pending
        _, reply = await ask(persona, commands, "!search heron", me.user_id)
        said = body_of(reply)
        assert said.startswith("The command room is not resolved yet") and "502" in said
        status = await muninn(config, "status", "--json")
        command = json.loads(status.out)["command_room"]
        assert command["serving"] is False and command["verdict"] == "unresolved"
        assert "has not resolved it yet" in command["detail"]
        down.clear()  # the homeserver answers again: the next retry resolves it
        await service.handler.command_alias.now(30)
        assert service.handler.command_room == commands
        await service.scheduler.settle([RoomID(herons)])
        _, reply = await ask(persona, commands, "!search heron colony", me.user_id)
        assert "pines by the lake" in body_of(reply)
        status = await muninn(config, "status", "--json")
        assert json.loads(status.out)["command_room"]["serving"] is True
    finally:
        await service.stop()
