"""Rule 4 by sender in `muninn run`: a room where a bridge puppet spoke and then left.

The puppet's `leave` stays in the room's state, so the state check refuses the room at once,
before the writer has read it and however far back the puppet spoke (the first test). The rest
of the module takes the state away, as a reader may see it before it knows a room's full
member list (`tests.indexing.without_past_members`: a partial state after a faster join; a
local Synapse room always has it all, so the fault is injected). Then only the room log shows
the puppet: the bot must find it there when a command reads the log, refuse the room (silent
in it; the command room is told it is not indexed), remember the refusal after the puppet's
message has scrolled out of the scanned bound, and never quote the puppet's text.

The puppet is an ordinary user in the default `@discord_.*` namespace (`scope` is not set in the
module's config), as in the writer's tests (`tests/ingest/index/test_scope_synapse.py`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.demo.client import unique_localpart
from ingest.types import Refusal, RoomID, RoomState
from tests.bot.botenv import TRANSCRIPT_LIMIT, Env, body_of
from tests.botkit import ask, replies
from tests.homeserver import MatrixUser
from tests.indexing import without_past_members

RELAYED = "relayed from discord: the marmalade cellar door code is 4711"
# Any of these in a reply leaks the puppet (the queries below never contain them: a search
# reply echoes its query).
TELLS = ("4711", "relayed from discord")


async def quiesce(env: Env) -> None:
    """Everything the homeserver pushed so far is handled (`Env.quiesce`, in the command room)."""
    await env.quiesce(env.persona, env.command_room)


def joined_members(state: list[dict[str, Any]]) -> set[str]:
    return {
        e["state_key"]
        for e in state
        if e["type"] == "m.room.member" and e["content"].get("membership") == "join"
    }


async def bot_messages(user: MatrixUser, room_id: str, bot_id: str) -> list[dict[str, Any]]:
    """Every message the bot sent in the room (its latest 100 events)."""
    chunk = (await user.messages(room_id, direction="b", limit=100))["chunk"]
    return [e for e in chunk if e["sender"] == bot_id and e["type"] == "m.room.message"]


def leaks(event: dict[str, Any], relayed: str) -> list[str]:
    """What of the puppet's message the event shows (body, HTML and JSON results)."""
    text = json.dumps(event["content"])
    return [t for t in (*TELLS, relayed) if t in text]


async def puppet_room(env: Env, owner: MatrixUser, *, pin: bool = False) -> tuple[str, str, str]:
    """A room with the bot where a puppet said `RELAYED` and left: (room, puppet, event id).

    With `pin`, `owner` pins the relayed message while the puppet is still there (the bot is
    silent then: the state names the puppet), so the room's board holds it.
    """
    room = await env.room(owner)
    puppet = await env.hs.register(unique_localpart("discord_"), displayname="Discord relay")
    await puppet.join(room)
    relayed = await puppet.send_text(room, RELAYED)
    await owner.send_text(room, "sure, I will bring the jars")
    if pin:
        await owner.send_reply(room, relayed, "!pin #cellar")
    await puppet.leave(room)
    # The premise: the room's current member list shows no puppet; its log still does.
    members = joined_members(await owner.state(room))
    assert env.bot_id in members and puppet.user_id not in members
    chunk = (await owner.messages(room, direction="b", limit=100))["chunk"]
    assert relayed in {e["event_id"] for e in chunk}
    # the writer has seen it (and refused it: tests/ingest/index/test_scope_synapse.py)
    await env.settle(room)
    assert await env.service.writer.refused_by_puppet(RoomID(room)) == puppet.user_id
    # The bot's state cache may still hold the state from while the puppet was a member (it
    # expires after 60 s). Drop it once nothing is in flight, as if it had expired: from here
    # the bot knows the current state only, and by that state alone the room is eligible.
    await quiesce(env)
    env.service.rooms.invalidate(room)
    state = await env.service.client.room_state(room)
    assert env.service.rooms.scope.decide(state, set()).eligible
    return room, puppet.user_id, relayed


@pytest.fixture
def partial_state(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's reader (the writer's too) gets room states without their past members."""
    full = env.service.client.room_state

    async def room_state(room_id: RoomID | str) -> RoomState:
        return without_past_members(await full(room_id))

    monkeypatch.setattr(env.service.client, "room_state", room_state)


async def test_bot_refuses_a_room_a_puppet_left_by_its_state_at_once(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the puppet's message far beyond the scanned bound and no record consulted, the
    state's `leave` alone refuses the room: silent in it, "not indexed" in the command room."""
    monkeypatch.setattr(env.service.rooms, "remembered_puppet", None)
    room = await env.room(alice)
    puppet = await env.hs.register(unique_localpart("discord_"), displayname="Discord relay")
    await puppet.join(room)
    await puppet.send_text(room, RELAYED)
    await puppet.leave(room)
    await bob.join(room)
    for i in range(TRANSCRIPT_LIMIT + 5):
        await alice.send_text(room, f"filler chatter number {i} about lunch")
    asked = await bob.send_text(room, "!search lunch")
    await quiesce(env)
    assert await replies(bob, room, asked, env.bot_id) == []
    assert await bot_messages(bob, room, env.bot_id) == []
    info = await env.service.rooms.get(room)
    assert info.verdict.reason is Refusal.BRIDGED
    assert f"past member {puppet.user_id}" in info.verdict.detail
    _, reply = await ask(env.persona, env.command_room, f"!search lunch in:{room}", env.bot_id)
    assert body_of(reply) == f"{room} is not a room Muninn indexes"


@pytest.mark.usefixtures("partial_state")
async def test_bot_stays_silent_in_a_room_a_puppet_spoke_in_and_left(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """!search and !pin there get no reply at all, then or after the puppet scrolled away.

    The bot's own check of the log, alone: the writer's lasting record is not consulted here
    (the restart test below covers it).
    """
    monkeypatch.setattr(env.service.rooms, "remembered_puppet", None)
    room, puppet, relayed = await puppet_room(env, alice)
    await bob.join(room)
    searched = await bob.send_text(room, "!search marmalade")
    pinned = await bob.send_reply(room, relayed, "!pin #cellar")
    await quiesce(env)
    assert await replies(bob, room, searched, env.bot_id) == []
    assert await replies(bob, room, pinned, env.bot_id) == []
    assert await bot_messages(bob, room, env.bot_id) == []
    info = await env.service.rooms.get(room)  # remembered as bridged, the puppet named
    assert info.verdict.reason is Refusal.BRIDGED and puppet in info.verdict.detail

    # The puppet's message falls out of the bot's transcript bound; the room stays refused
    # whole: neither the old word nor the new chatter is answered.
    for i in range(TRANSCRIPT_LIMIT + 10):
        await alice.send_text(room, f"filler chatter number {i} about lunch")
    latest = (await bob.messages(room, direction="b", limit=TRANSCRIPT_LIMIT))["chunk"]
    assert puppet not in {e["sender"] for e in latest}
    later = [await bob.send_text(room, f"!search {w}") for w in ("marmalade", "lunch")]
    await quiesce(env)
    for command in later:
        assert await replies(bob, room, command, env.bot_id) == []
    assert await bot_messages(bob, room, env.bot_id) == []

    # The command room is told the room is not indexed, and its content never comes back.
    _, reply = await ask(env.persona, env.command_room, f"!search marmalade in:{room}", env.bot_id)
    assert body_of(reply) == f"{room} is not a room Muninn indexes"
    assert reply["content"]["org.muninn.results"] == {"error": body_of(reply)}
    _, reply = await ask(
        env.persona, env.command_room, "!search marmalade cellar door code", env.bot_id
    )
    assert leaks(reply, relayed) == []
    assert room not in {h["room_id"] for h in reply["content"]["org.muninn.results"]["hits"]}


@pytest.mark.usefixtures("partial_state")
async def test_bot_remembers_a_puppet_room_across_a_restart(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """The refusal outlives the process: with the bot's memory gone (a restart) and the
    puppet's message beyond the scanned bound, the writer's record still refuses the room."""
    room, puppet, _ = await puppet_room(env, alice)
    await bob.join(room)
    for i in range(TRANSCRIPT_LIMIT + 10):
        await alice.send_text(room, f"filler chatter number {i} about lunch")
    latest = (await bob.messages(room, direction="b", limit=TRANSCRIPT_LIMIT))["chunk"]
    assert puppet not in {e["sender"] for e in latest}
    await quiesce(env)
    env.service.rooms._bridged.clear()  # what a restart forgets
    env.service.rooms.invalidate(room)
    asked = await bob.send_text(room, "!search lunch")
    await quiesce(env)
    assert await replies(bob, room, asked, env.bot_id) == []
    assert await bot_messages(bob, room, env.bot_id) == []
    info = await env.service.rooms.get(room)
    assert info.verdict.reason is Refusal.BRIDGED and puppet in info.verdict.detail


@pytest.mark.usefixtures("partial_state")
async def test_bot_command_room_refuses_in_a_room_a_puppet_spoke_in_and_left(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`!pins in:` and `!search in:` that room answer "not indexed", never the puppet's text,
    and the room stays silent for its own members."""
    monkeypatch.setattr(env.service.rooms, "remembered_puppet", None)  # the log check alone
    room, puppet, relayed = await puppet_room(env, alice, pin=True)
    _, reply = await ask(env.persona, env.command_room, f"!pins in:{room}", env.bot_id)
    assert body_of(reply) == f"{room} is not a room Muninn indexes"
    assert leaks(reply, relayed) == []
    _, reply = await ask(env.persona, env.command_room, f"!search cellar in:{room}", env.bot_id)
    assert body_of(reply) == f"{room} is not a room Muninn indexes"
    assert leaks(reply, relayed) == []
    info = await env.service.rooms.get(room)
    assert info.verdict.reason is Refusal.BRIDGED and puppet in info.verdict.detail
    ignored = await alice.send_text(room, "!pins")
    await quiesce(env)
    assert await replies(alice, room, ignored, env.bot_id) == []
    assert await bot_messages(alice, room, env.bot_id) == []
