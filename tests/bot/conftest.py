"""Fixtures of the bot's end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.demo.synapse import SynapseServer
from tests.bot.botenv import Env, service_env
from tests.bot.fastkit import FastBot, fast_bot
from tests.homeserver import Homeserver
from tests.indexing import shared_embedder


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(
    synapse: SynapseServer, hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    async with service_env(synapse, hs, tmp_path_factory.mktemp("bot"), shared_embedder()) as e:
        yield e


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
