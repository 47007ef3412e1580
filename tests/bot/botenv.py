"""The bot's end-to-end environment shared by tests/bot/chat/test_searching.py,
test_command_room.py, service/test_run.py and their neighbours: one `muninn run` service a module
(the `env` fixture in tests/bot/conftest.py) and the helpers those tests share."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer
from bot.service.run import Service
from ingest.embed import Embedder
from ingest.matrix import Request, Response
from ingest.search.permalink import permalink
from ingest.types import RoomID
from tests.botkit import ask, before_recheck, service_config, wait_membership, wait_reply
from tests.homeserver import Homeserver, MatrixUser
from tests.transport import Recorder, answer

TRANSCRIPT_LIMIT = 50
BASE_TS = int(time.time() * 1000) - 3 * 86_400_000  # three days ago
# A command room's history: a member added later reads none of the earlier replies (rule 14).
JOINED_HISTORY = {
    "type": "m.room.history_visibility",
    "state_key": "",
    "content": {"history_visibility": "joined"},
}


@dataclass
class Env:
    service: Service
    hs: Homeserver
    synapse: SynapseServer
    persona: MatrixUser
    command_room: str
    bot_id: str
    requests: Recorder  # the service's transport: every homeserver request it sent

    def sent_since(self, mark: int) -> list[Request]:
        """The service's homeserver requests after the first `mark` (`len(requests.requests)`)."""
        return self.requests.requests[mark:]

    async def room(self, owner: MatrixUser, **kwargs: Any) -> str:
        """A fresh public room with the bot in it."""
        room_id = await self.hs.fresh_room(owner, **kwargs)
        await self.hs.bot().join(room_id)
        return room_id

    async def new_command_room(self, owner: MatrixUser, monkeypatch: pytest.MonkeyPatch) -> str:
        """A fresh invite-only room (`joined` history), made the command room for this test;
        the bot, invited, joins it itself (every other invite waits for the roster)."""
        room_id = await self.hs.fresh_room(
            owner, preset="private_chat", initial_state=[JOINED_HISTORY]
        )
        monkeypatch.setattr(self.service.handler.replier, "command_room", RoomID(room_id))
        await owner.invite(room_id, self.bot_id)
        await wait_membership(owner, room_id, self.bot_id, "join")
        return room_id

    async def quiesce(self, user: MatrixUser, room_id: str) -> None:
        """Everything pushed so far is handled: the answer to a `!help` comes after the earlier
        events (transactions are in order), and the queue's join waits for the workers still
        busy with them (a reply is sent before its batch is done)."""
        await ask(user, room_id, "!help", self.bot_id)
        await self.service.queue.join()

    async def settle(self, *rooms: str) -> None:
        """Wait until the one writer has refreshed these rooms."""
        await asyncio.wait_for(self.service.scheduler.settle([RoomID(r) for r in rooms]), 30)


@contextlib.asynccontextmanager
async def service_env(
    synapse: SynapseServer, hs: Homeserver, folder: Path, embedder: Embedder
) -> AsyncIterator[Env]:
    """A `muninn run` service with `embedder` and its command room (a persona's, `joined`
    history), started and pinged; stopped on exit (the `env` fixture's, tests/bot/conftest.py)."""
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
        folder,
        bot={
            "command_room": f"#{alias_local}:{synapse.server_name}",
            "command_room_askers": [r"@persona-.*:muninn\.test"],
            "transcript_limit": TRANSCRIPT_LIMIT,
            "rate_per_minute": 1000,
        },
    )
    requests = Recorder()  # every request the service sends (`Env.requests`)
    service = Service(cfg, embedder=embedder, full_at_start=False, transport=requests)
    await service.start()
    await hs.ping_appservice()
    try:
        yield Env(service, hs, synapse, persona, command_room, synapse.bot_user_id, requests)
    finally:
        await service.stop()


async def pages(
    user: MatrixUser, room: str, command: str, bot_id: str, most: int = 10
) -> list[str]:
    """The bodies of `command`'s reply and of each `!more` after it, up to the last page (or
    `most` pages)."""
    _, reply = await ask(user, room, command, bot_id)
    bodies = [body_of(reply)]
    while "!more" in bodies[-1] and len(bodies) < most:
        _, reply = await ask(user, room, "!more", bot_id)
        bodies.append(body_of(reply))
    return bodies


def body_of(event: dict[str, Any]) -> str:
    return str(event["content"]["body"])


def link(room_id: str, event_id: str) -> str:
    return permalink(room_id, event_id, "muninn.test")


async def pin_then_board(
    env: Env,
    alice: MatrixUser,
    room: str,
    target: str,
    pin: str = "!pin",
    filler: int = TRANSCRIPT_LIMIT + 5,
) -> dict[str, Any]:
    """`filler` messages (by default enough to push `target` past the scanned bound), then
    `pin` as a reply to `target`, answered; the `!pins` board that follows."""
    # All after `target`; their order among themselves does not matter, so send them at once.
    await asyncio.gather(
        *(alice.send_text(room, f"filler chatter number {i} about lunch") for i in range(filler))
    )
    await wait_reply(alice, room, await alice.send_reply(room, target, pin), env.bot_id)
    _, board = await ask(alice, room, "!pins", env.bot_id)
    return board


async def aliased_room(env: Env, owner: MatrixUser) -> tuple[str, str]:
    local = unique_localpart("pins")
    room = await env.room(owner, alias_localpart=local)
    return room, f"#{local}:{env.synapse.server_name}"


def join_at_recheck(env: Env, monkeypatch: pytest.MonkeyPatch, act: Any) -> list[bool]:
    """Run `act` once, between a reply's build and its audience re-check; the list says
    whether it ran."""
    ran: list[bool] = []

    async def hook() -> None:
        if not ran:
            ran.append(True)
            await act()

    replier = env.service.handler.replier
    monkeypatch.setattr(replier, "withheld", before_recheck(replier, hook))
    return ran


def refuse_replies_while(env: Env, monkeypatch: pytest.MonkeyPatch, act: Any) -> list[bool]:
    """The homeserver refuses the service's reply `PUT`s (503) from the first one until `act`
    (started at that first refusal) has run, and once more after it: an outage during which
    the room changes, then the homeserver is back. The outbox repeats at once (10 ms). The
    list says whether `act` ran."""
    done: list[bool] = []
    running: list[asyncio.Task[None]] = []

    async def run() -> None:
        await act()
        done.append(True)

    def outage(request: Request) -> Response | None:
        if request.method != "PUT" or not REPLY_PUT.match(request.path):
            return None
        if not running:
            running.append(asyncio.create_task(run()))
        if len(done) > 1:
            return None
        if done:
            done.append(True)  # one refusal after the change: the repeat is the one checked
        return answer(503, {"errcode": "M_UNKNOWN", "error": "down for the test"})

    monkeypatch.setattr(env.service.handler.outbox, "_first", 0.01)
    monkeypatch.setattr(env.requests, "fault", outage)
    return done


REPLY_PUT = re.compile(r"^/_matrix/client/v3/rooms/.+/send/m\.room\.message/muninn\..+$")


async def seen_by(user: MatrixUser, room: str) -> str:
    """Every body `user` can read in the room now."""
    chunk = (await user.messages(room, direction="b", limit=100))["chunk"]
    return "\n".join(str(e.get("content", {}).get("body", "")) for e in chunk)
