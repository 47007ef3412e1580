"""A `!search`'s question runs in the models while its room's log is read
(`Retriever.warm`), once, and never for a command the asker's rate drops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ingest.search.retrieve import Retriever
from tests.bot.fastkit import FastBot
from tests.indexing import shared_embedder

MakeBot = Callable[..., FastBot]
ALICE = "@alice:fast.test"


async def test_a_question_warmed_while_the_log_is_read_runs_the_model_once() -> None:
    """The search's own embedding finds the warmed question (ready, or its run under way):
    one model run for both, the very vector; a `word*` is the lexical side's: no run."""
    embedder = shared_embedder()
    runs = embedder.queries.runs  # type: ignore[attr-defined]
    retriever = Retriever(embedder)
    retriever.warm(["where did the grebe census land"])
    [vector] = await embedder.embed_queries(["where did the grebe census land"])
    assert embedder.queries.runs == runs + 1  # type: ignore[attr-defined]
    assert vector == (await embedder.embed_queries(["where did the grebe census land"]))[0]
    retriever.warm(["grebe* census"])
    await asyncio.sleep(0.05)
    assert embedder.queries.runs == runs + 1  # type: ignore[attr-defined]


async def test_a_command_the_rate_drops_runs_no_model(make_bot: MakeBot) -> None:
    """Work begun before the log read is begun only for a command the asker's rate lets
    through: a flood past the limit costs the models nothing."""
    bot = make_bot(rate_per_minute=2)
    room = bot.rooms.create_room(ALICE)
    embedder = shared_embedder()
    for n in range(2):
        await bot.ask(room, ALICE, f"!search the heron count {n}")
    await asyncio.gather(*bot.searcher.first._warming)  # an empty index answers first
    runs = embedder.queries.runs  # type: ignore[attr-defined]
    for n in range(3):  # the notice, then silence: none of them embeds its question
        await bot.ask(room, ALICE, f"!search the osprey nest {n}")
    assert embedder.queries.runs == runs  # type: ignore[attr-defined]
