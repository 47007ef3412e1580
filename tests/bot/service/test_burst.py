"""Commands answered concurrently: bounded in flight, each under a deadline, state in order.

A command is made slow by an embedder that holds every query about "glacier" until the test
lets it go (a stalled embedder is a fault the real model cannot produce on demand); every other
query goes to the session's real MiniLM.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bot.demo.synapse import SynapseServer
from bot.service.run import Service
from ingest.embed import DelegatingEmbedder, Embedder
from ingest.types import RoomID
from tests.botkit import REPLY_TIMEOUT, ask, replies, service_config, wait_reply
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import shared_embedder

SLOW = "glacier"


class HeldEmbedder(DelegatingEmbedder):
    """The real embedder; a query naming `SLOW` waits for `release` (and counts how many
    commands' questions wait: a command's warm-up and its search ask the same texts)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.release = asyncio.Event()
        self.waiting: Counter[tuple[str, ...]] = Counter()
        self.most_held = 0

    @property
    def held(self) -> int:
        return len(self.waiting)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if any(SLOW in t for t in texts):
            self.waiting[tuple(texts)] += 1
            self.most_held = max(self.most_held, self.held)
            try:
                await self.release.wait()
            finally:
                self.waiting[tuple(texts)] -= 1
                if not self.waiting[tuple(texts)]:
                    del self.waiting[tuple(texts)]
        return await self.inner.embed_queries(texts)

    async def close(self) -> None:
        """The session's embedder outlives this service."""


async def until(check: Any, what: str) -> None:
    """Poll `check()` until true (a bound for a hung test, not a timing assertion)."""
    for _ in range(int(REPLY_TIMEOUT * 10)):
        if check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never: {what}")


@asynccontextmanager
async def running(
    synapse: SynapseServer, tmp: Path, client: MatrixUser | None, **bot: Any
) -> AsyncIterator[tuple[Service, HeldEmbedder]]:
    queue_batches = bot.pop("queue_batches", 1024)
    cfg = service_config(synapse, tmp, client=client, bot={"rate_per_minute": 1000, **bot})
    embedder = HeldEmbedder(shared_embedder())
    service = Service(cfg, embedder=embedder, full_at_start=False, queue_batches=queue_batches)
    await service.start()
    try:
        yield service, embedder
    finally:
        embedder.release.set()
        await service.stop()


async def indexed_room(
    service: Service, hs: Homeserver, owner: MatrixUser, bot: MatrixUser
) -> str:
    """A fresh room the bot is in, with one indexed message about otters and a glacier."""
    room = await hs.fresh_room(owner)
    await bot.join(room)
    await owner.send_text(room, "the otter exhibit opens at noon; a glacier talk follows")
    await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 30)
    return room


async def test_bot_slow_command_holds_neither_the_others_nor_its_reply(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A search stuck past `command_timeout_seconds` gets a short error reply; a search sent
    after it is answered first, with its results, instead of waiting behind it."""
    me = await hs.register(displayname="Muninn burst")
    async with running(
        synapse, tmp_path, me, max_concurrent_commands=2, command_timeout_seconds=3
    ) as (service, _):
        room = await indexed_room(service, hs, alice, me)
        stuck = await alice.send_text(room, f"!search {SLOW}")
        _, answer = await ask(alice, room, "!search otter", me.user_id)
        assert "otter" in answer["content"]["body"]
        late = await wait_reply(alice, room, stuck, me.user_id)
    assert "took longer than 3 s" in late["content"]["body"]
    assert answer["origin_server_ts"] <= late["origin_server_ts"]
    assert len(await replies(alice, room, stuck, me.user_id)) == 1


async def test_bot_runs_at_most_max_concurrent_commands(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """With two slots, a third slow search waits for one to end; all three are answered."""
    me = await hs.register(displayname="Muninn burst")
    async with running(synapse, tmp_path, me, max_concurrent_commands=2) as (service, held):
        room = await indexed_room(service, hs, alice, me)
        asked = [await alice.send_text(room, f"!search {SLOW} {n}") for n in range(3)]
        await until(lambda: service.commands.waiting == 1, "the third command waits")
        assert (held.held, service.commands.running) == (2, 2)
        held.release.set()
        answers = [await wait_reply(alice, room, e, me.user_id) for e in asked]
    assert held.most_held == 2
    assert all(SLOW in a["content"]["body"] for a in answers)


async def test_bot_handles_state_before_the_commands_after_it(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """In a burst, a room turned encrypted refuses the commands sent after the change, even
    while an earlier command is still running: state is applied in order, before them."""
    me = await hs.register(displayname="Muninn burst")
    async with running(synapse, tmp_path, me, max_concurrent_commands=4) as (service, held):
        room = await indexed_room(service, hs, alice, me)
        await alice.send_text(room, f"!search {SLOW}")
        await until(lambda: held.held == 1, "the early command runs")
        await alice.enable_encryption(room)
        after = [await alice.send_text(room, f"!search otter {n}") for n in range(3)]
        other = await hs.fresh_room(alice)
        await me.join(other)
        await ask(alice, other, "!help", me.user_id)  # a barrier: the burst was dispatched
        held.release.set()
        await service.queue.join()  # ... and every command of it has finished
        assert service.commands.running == 0
        for event_id in after:
            assert await replies(alice, room, event_id, me.user_id) == []


async def _put(synapse: SynapseServer, events: list[dict[str, Any]]) -> int:
    url = f"{synapse.appservice_url}/_matrix/app/v1/transactions/{uuid.uuid4().hex}"
    headers = {"Authorization": f"Bearer {synapse.hs_token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.put(url, json={"events": events}, headers=headers) as resp,
    ):
        await resp.read()
        return resp.status


async def test_bot_busy_with_commands_answers_503_and_drops_nothing(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Every slot busy and the queue full: a pushed transaction gets 503 (Synapse retries);
    once the commands finish, the retried one is accepted and every command is answered."""
    bot = hs.bot()
    async with running(synapse, tmp_path, None, max_concurrent_commands=1, queue_batches=1) as (
        service,
        held,
    ):
        await hs.ping_appservice()
        room = await indexed_room(service, hs, alice, bot)
        asked = [await alice.send_text(room, f"!search {SLOW} {n}") for n in range(2)]
        await until(lambda: service.commands.waiting == 1, "the second command waits")
        stray = await alice.get_event(room, asked[0])
        filler = {**stray, "event_id": f"$filler-{uuid.uuid4().hex}", "room_id": room}
        filler["content"] = {"msgtype": "m.text", "body": "just chatting"}
        statuses = [await _put(synapse, [filler]) for _ in range(2)]
        assert 503 in statuses
        held.release.set()
        await until(lambda: service.commands.running == 0, "the burst is done")
        assert await _put(synapse, [filler]) == 200
        for event_id in asked:
            answer = await wait_reply(alice, room, event_id, bot.user_id)
            assert SLOW in answer["content"]["body"]
