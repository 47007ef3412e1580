"""Shared fixtures: one real Synapse for the whole session, fresh users and rooms per test."""

from __future__ import annotations

import compileall
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from bot.demo.synapse import SynapseServer, start_synapse
from tests.homeserver import Homeserver, MatrixUser

# Fixtures that mean "this test talks to the real homeserver" (for the `synapse` marker).
_SYNAPSE_FIXTURES = {"synapse", "hs"}


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the project once, before the workers start: the suite runs `muninn` in a
    child process dozens of times, and where PYTHONDONTWRITEBYTECODE is set (as on the CI
    machine) each child would compile every module of `bot` and `ingest` again (~0.35 s)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller has done it
    root = Path(__file__).resolve().parent.parent
    for package in ("bot", "ingest"):
        compileall.compile_dir(root / package, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _SYNAPSE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.synapse)


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynapseServer]:
    """A Synapse on loopback (SQLite, no outbound traffic, relaxed limits, one appservice)."""
    server = start_synapse(tmp_path_factory.mktemp("synapse"))
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def hs(synapse: SynapseServer) -> AsyncIterator[Homeserver]:
    """The test homeserver's client side: register users, act as the appservice."""
    async with aiohttp.ClientSession() as session:
        yield Homeserver(synapse, session)


@pytest_asyncio.fixture(loop_scope="session")
async def alice(hs: Homeserver) -> MatrixUser:
    """A fresh ordinary user, new for every test."""
    return await hs.register(displayname="Alice")


@pytest_asyncio.fixture(loop_scope="session")
async def bob(hs: Homeserver) -> MatrixUser:
    """A second fresh ordinary user."""
    return await hs.register(displayname="Bob")


@pytest_asyncio.fixture(loop_scope="session")
async def seeder(hs: Homeserver) -> MatrixUser:
    """A fresh `@seed-*` appservice user; its messages may be backdated with `ts=`."""
    return await hs.seed_user()


@pytest_asyncio.fixture(loop_scope="session")
async def room(hs: Homeserver, alice: MatrixUser) -> str:
    """A fresh public room owned by `alice`."""
    return await hs.fresh_room(alice)


@pytest.fixture
def bot(hs: Homeserver) -> MatrixUser:
    """The appservice bot user `@muninn:<server>`, acting with the as_token."""
    return hs.bot()
