"""`muninn mcp` and the embedded store's one holder (issue 46): an agent searching back to back
while the service is stopped (a restart, an upgrade) must not keep `muninn run` from starting.
"""

from __future__ import annotations

import asyncio

from bot.config import parse_config
from bot.demo.synapse import free_port
from bot.service.run import Service
from tests.bot.mcp.harness import Seeded, call, event_ids, muninn_mcp
from tests.indexing import shared_embedder, write_config


async def test_muninn_run_starts_while_an_agent_searches_back_to_back(seeded: Seeded) -> None:
    """An agent searches without pause through `muninn mcp` (each search opens the embedded
    store and closes it); `muninn run` is started beside it three times and starts each time
    (it failed 5 of 5 times: "held by another process"), and the agent's searches go on
    answering, through the running service's listener while it holds the store."""
    doc = {**seeded.doc, "metrics": {"port": free_port()}}
    config = write_config(seeded.folder / "hold.yaml", doc)
    async with muninn_mcp(config) as session:
        assert seeded.ids["harvest"] in event_ids(await call(session, "search", query="kiwi"))
        stop, answered, failed = asyncio.Event(), asyncio.Event(), []

        async def agent() -> None:
            count = 0
            while not stop.is_set():
                result = await session.call_tool("search", {"query": "kiwi harvest"})
                if result.is_error:
                    failed.append(result.content)
                    continue
                count += 1
                if count % 2 == 0:
                    answered.set()  # two more searches answered

        async def two_more() -> None:
            answered.clear()
            await asyncio.wait_for(answered.wait(), 60)

        searching = asyncio.create_task(agent())
        try:
            for _ in range(3):
                await two_more()  # searches are under way, back to back
                service = Service(
                    parse_config(doc, seeded.folder),
                    embedder=shared_embedder(),
                    full_at_start=False,
                )
                await service.start()  # "held by another process" before
                try:
                    await two_more()  # answered through the listener meanwhile
                finally:
                    await service.stop()
        finally:
            stop.set()
            await searching
    assert not failed
