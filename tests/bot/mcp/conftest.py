"""The seeded index every `muninn mcp` test reads (`tests.bot.mcp.harness`), built once."""

from __future__ import annotations

import pytest
import pytest_asyncio

from tests.bot.mcp.harness import Seeded, seed
from tests.homeserver import Homeserver


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def seeded(hs: Homeserver, tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return await seed(hs, tmp_path_factory.mktemp("mcp"))
