"""The state read just before a reply is sent (`bot.chat.replying.FreshStates`, rule 14):
shared by the replies asking at once, never one begun before a reply asked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.chat.replying import FreshStates
from bot.chat.visibility import audience_basis
from ingest.errors import MatrixUnavailable


def member(user: str, event_id: str) -> dict[str, Any]:
    return {
        "type": "m.room.member",
        "state_key": user,
        "event_id": event_id,
        "content": {"membership": "join"},
    }


async def settle() -> None:
    """Let every task run until it waits on the homeserver."""
    for _ in range(10):
        await asyncio.sleep(0)


class Homeserver:
    """A room's state as `/state` serves it: read when the request arrives, answered later."""

    def __init__(self) -> None:
        self.state = [member("@alice:hs", "$alice")]
        self.reads = 0
        self.answer = asyncio.Event()
        self.failing = False

    async def state_events(self, room_id: str) -> list[dict[str, Any]]:
        self.reads += 1
        snapshot = list(self.state)
        await self.answer.wait()
        if self.failing:
            raise MatrixUnavailable("down")
        return snapshot

    async def get_event(self, room_id: str, event_id: str) -> None:
        return None


async def test_a_join_while_a_read_is_under_way_is_seen_by_every_later_reply() -> None:
    """Reply A's read is under way when bob joins and replies B and C ask: they never take
    A's read (it began before they asked, without bob: B and C would quote to bob what he may
    not read); they share the next one, which sees him. Three replies, two `/state`s."""
    hs = Homeserver()
    fresh = FreshStates(hs)  # type: ignore[arg-type]
    a = asyncio.ensure_future(fresh.state_events("!r"))
    await settle()
    assert hs.reads == 1
    hs.state.append(member("@bob:hs", "$bob"))  # bob joins while A's read is answered
    b = asyncio.ensure_future(fresh.state_events("!r"))
    c = asyncio.ensure_future(fresh.state_events("!r"))
    await settle()
    assert hs.reads == 1  # B and C wait for a read begun after they asked
    hs.answer.set()
    states = await asyncio.gather(a, b, c)
    assert audience_basis(states[0]) == {"$alice"}
    assert audience_basis(states[1]) == audience_basis(states[2]) == {"$alice", "$bob"}
    assert hs.reads == 2
    await fresh.state_events("!r")  # a later reply reads again
    assert hs.reads == 3


async def test_a_reply_cut_off_leaves_the_shared_read_and_a_failure_reaches_every_asker() -> None:
    """A reply cut off by its deadline does not cancel the read another reply waits for; a
    read that fails fails for each of its askers (each is held, never sent unchecked), and the
    next reply reads again."""
    hs = Homeserver()
    fresh = FreshStates(hs)  # type: ignore[arg-type]
    cut_off = asyncio.ensure_future(fresh.state_events("!r"))
    other = asyncio.ensure_future(fresh.state_events("!r"))
    await settle()
    cut_off.cancel()
    hs.answer.set()
    assert audience_basis(await other) == {"$alice"}
    hs.failing = True
    askers = [asyncio.ensure_future(fresh.state_events("!r")) for _ in range(2)]
    for asker in askers:
        with pytest.raises(MatrixUnavailable):
            await asker
    hs.failing = False
    assert audience_basis(await fresh.state_events("!r")) == {"$alice"}
    assert hs.reads == 3
