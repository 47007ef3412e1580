"""Fixtures of the bot's end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer
from bot.service.run import Service
from tests.bot.botenv import JOINED_HISTORY, TRANSCRIPT_LIMIT, Env
from tests.bot.fastkit import FastBot, fast_bot
from tests.botkit import service_config
from tests.homeserver import Homeserver
from tests.indexing import shared_embedder
from tests.transport import Recorder


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(
    synapse: SynapseServer, hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    persona = await hs.register(unique_localpart("persona-"), displayname="Persona")
    alias_local = unique_localpart("commands")
    command_room = await persona.create_room(
        preset="private_chat",
        alias_localpart=alias_local,
        name="commands",
        initial_state=[JOINED_HISTORY],
    )
    await hs.join_bot(persona, command_room)
    cfg = service_config(
        synapse,
        tmp_path_factory.mktemp("bot"),
        bot={
            "command_room": f"#{alias_local}:{synapse.server_name}",
            "command_room_askers": [r"@persona-.*:muninn\.test"],
            "transcript_limit": TRANSCRIPT_LIMIT,
            "rate_per_minute": 1000,
        },
    )
    requests = Recorder()  # every request the service sends (`Env.requests`)
    service = Service(cfg, embedder=shared_embedder(), full_at_start=False, transport=requests)
    await service.start()
    await hs.ping_appservice()
    try:
        yield Env(service, hs, synapse, persona, command_room, synapse.bot_user_id, requests)
    finally:
        await service.stop()


@pytest.fixture
def make_bot(tmp_path: Path) -> Iterator[Callable[..., FastBot]]:
    """Builds the fast tier's in-process bots (tests/bot/fastkit.py); closes their stores."""
    made: list[FastBot] = []

    def make(**settings: Any) -> FastBot:
        made.append(fast_bot(tmp_path / f"bot{len(made)}", **settings))
        return made[-1]

    yield make
    for bot in made:
        bot.close()
