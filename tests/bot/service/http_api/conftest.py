"""The running `muninn run` whose listener this folder's tests ask (one per test module)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from bot.config import parse_config
from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer, free_port
from bot.service.run import Service
from ingest.types import RoomID
from tests.bot.service.http_api.listener import Api, config_doc
from tests.homeserver import Homeserver
from tests.indexing import shared_embedder, write_config


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def api(
    synapse: SynapseServer, hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Api]:
    folder = tmp_path_factory.mktemp("http-api")
    port = free_port()
    doc = config_doc(synapse, folder, port=port)
    config = write_config(folder / "config.yaml", doc)
    owner = await hs.register(displayname="Otto")
    local = unique_localpart("otters")
    room = await owner.create_room(alias_localpart=local, name="otters", preset="public_chat")
    await hs.bot().join(room)
    otters = [
        await owner.send_text(room, text)
        for text in (
            "the otters at the aquarium hold hands while they sleep",
            "feeding time for the otters is at noon",
            "unrelated: the printer on floor two is jammed again",
        )
    ]
    service = Service(parse_config(doc, folder), embedder=shared_embedder(), full_at_start=False)
    await service.start()
    try:
        await hs.ping_appservice()
        await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 30)
        alias = f"#{local}:{synapse.server_name}"
        yield Api(service, synapse, config, f"http://127.0.0.1:{port}", room, alias, otters)
    finally:
        await service.stop()
