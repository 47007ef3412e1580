"""The audience of a reply under member churn and races (rule 14), against the real Synapse:
member-event walks are memoised and bounded (issue 21 item 9), and a member or visibility event
that arrives while a reply is built is checked again before the reply is sent (item 3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.chat import replying, visibility
from bot.chat.replying import AUDIENCE_CHANGED
from tests.bot.botenv import (
    Env,
    body_of,
    join_at_recheck,
    link,
    refuse_replies_while,
    seen_by,
)
from tests.botkit import ask, wait_reply
from tests.homeserver import MatrixUser


class _Counting:
    """The bot's client, with each `GET /event` it makes appended to `fetched`."""

    def __init__(self, client: Any, fetched: list[str]) -> None:
        self._client, self._fetched = client, fetched

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def get_event(self, room_id: str, event_id: str) -> Any:
        self._fetched.append(event_id)
        return await self._client.get_event(room_id, event_id)


def count_event_fetches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `GET /event`s the audience reads make (not the scope's own rule-3 walk, which
    `ingest` memoises by its own rule), appended as they are made."""
    fetched: list[str] = []
    real = replying.room_audience

    async def counted(client: Any, room_id: str, *args: Any) -> Any:
        return await real(_Counting(client, fetched), room_id, *args)

    monkeypatch.setattr(replying, "room_audience", counted)
    return fetched


async def joined_room_with_members(env: Env, owner: MatrixUser, n: int) -> tuple[str, list[Any]]:
    room = await env.room(owner)
    await owner.set_history_visibility(room, "joined")
    members = [await env.hs.register(displayname=f"Churner {i}") for i in range(n)]
    for m in members:
        await m.join(room)
    return room, members


async def rename_all(room: str, members: list[Any], name: str) -> None:
    for m in members:
        content = {"membership": "join", "displayname": f"{name} {m.user_id}"}
        await m.send_state(room, "m.room.member", content, state_key=m.user_id)


async def test_bot_audience_member_churn_fetches_each_member_event_once(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 21 item 9): 15 members renaming in a `joined` room cost the next
    command one `GET /event` a member (17 in all); member events are remembered, so a second
    round of renames costs at most a few, and the cut is still right."""
    room, members = await joined_room_with_members(env, alice, 15)
    said = await alice.send_text(room, "the quokka census is on friday")
    await ask(alice, room, "!search quokka census", env.bot_id)  # the state is read once
    await rename_all(room, members, "Renamed")
    fetched = count_event_fetches(monkeypatch)
    _, reply = await ask(alice, room, "!search quokka census", env.bot_id)
    assert len(fetched) <= 4, fetched
    assert link(room, said) in body_of(reply)  # said after every join: still quoted


async def test_bot_audience_walks_past_the_fetch_bound_err_towards_less(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond `MAX_FETCHES` new fetches an audience read stops walking and takes each unwalked
    member's start at its newest event: a message from after every join but before the renames
    is then withheld, never quoted on a guess."""
    room, members = await joined_room_with_members(env, alice, 6)
    await asyncio.sleep(0.01)
    said = await alice.send_text(room, "the wombat burrow survey is done")
    await rename_all(room, members, "Again")
    env.service.handler._audiences.memo._events.clear()
    monkeypatch.setattr(visibility, "MAX_FETCHES", 2)
    fetched = count_event_fetches(monkeypatch)
    _, reply = await ask(alice, room, "!search wombat burrow survey", env.bot_id)
    assert len(fetched) <= 2, fetched
    assert link(room, said) not in body_of(reply)
    monkeypatch.setattr(visibility, "MAX_FETCHES", 64)  # walked whole: it is quoted
    env.service.handler.state_changed(room)
    _, reply = await ask(alice, room, "!search wombat burrow survey", env.bot_id)
    assert link(room, said) in body_of(reply)


@pytest.mark.parametrize("command", ["!search okapi gate code", "!pins"])
async def test_bot_audience_a_join_while_a_reply_is_built_withholds_it(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Regression (issue 21 item 3): in a `joined` room, bob joins after the audience was read
    and before the reply is sent; the reply is withheld with a notice, and bob's view never
    holds what was said before his join (it quoted it, 4 of 4 trials, before the re-check)."""
    room = await env.room(alice)
    await alice.set_history_visibility(room, "joined")
    said = await alice.send_text(room, "the okapi gate code is 4471, members only")
    await wait_reply(alice, room, await alice.send_reply(room, said, "!pin"), env.bot_id)
    ran = join_at_recheck(env, monkeypatch, lambda: bob.join(room))
    _, reply = await ask(alice, room, command, env.bot_id)
    assert ran, "the reply was sent without an audience re-check"
    assert body_of(reply) == AUDIENCE_CHANGED
    assert "4471" not in await seen_by(bob, room)
    _, reply = await ask(alice, room, command, env.bot_id)  # asked again: bob's cut applies
    assert "4471" not in body_of(reply) and "4471" not in await seen_by(bob, room)


@pytest.mark.parametrize("command", ["!search okapi gate code", "!pins"])
async def test_bot_audience_a_join_during_an_outage_withholds_the_held_reply(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Regression (issue 46, high): the homeserver refuses the service's sends while bob
    joins a `joined` room, then is back. The reply the outbox held is checked again before its
    repeat and replaced by the notice; bob never reads what was said before his join (the
    repeat posted it unchecked, with the check run once before the first try)."""
    room = await env.room(alice)
    await alice.set_history_visibility(room, "joined")
    said = await alice.send_text(room, "the okapi gate code is 4471, members only")
    await wait_reply(alice, room, await alice.send_reply(room, said, "!pin"), env.bot_id)
    joined = refuse_replies_while(env, monkeypatch, lambda: bob.join(room))
    _, reply = await ask(alice, room, command, env.bot_id)
    assert joined, "the outage ended before bob joined"
    assert body_of(reply) == AUDIENCE_CHANGED
    assert "4471" not in await seen_by(bob, room)


async def test_bot_audience_a_rename_while_a_reply_is_built_changes_nothing(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member event that moves no cut (a rename) found at the re-check: the reply is sent."""
    room = await env.room(alice)
    await alice.set_history_visibility(room, "joined")
    await bob.join(room)
    said = await alice.send_text(room, "the tapir pen is repainted on tuesday")
    content = {"membership": "join", "displayname": "Bob the Renamed"}
    rename = lambda: bob.send_state(room, "m.room.member", content, state_key=bob.user_id)  # noqa: E731
    ran = join_at_recheck(env, monkeypatch, rename)
    _, reply = await ask(alice, room, "!search tapir pen repainted", env.bot_id)
    assert ran and link(room, said) in body_of(reply)
