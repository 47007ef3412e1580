"""`muninn run` against the real Synapse: the bot's own membership (issue 46). An invite the
roster lists is kept for `muninn roster apply` and never undone, one it does not list is
declined; a room the bot joins is read at once, not at the next full pass.

The module's own service (tests/bot/conftest.py's `env`): `roster apply` here leaves every
room its roster does not list, which no other module's rooms may meet.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from bot.cli.roster.cli import roster_apply
from bot.demo.client import unique_localpart
from ingest.index.records import CURSOR_PREFIX
from ingest.store import PointFilter
from ingest.types import RoomID
from tests.bot.botenv import Env
from tests.bot.cli.roster.rosterkit import write_roster
from tests.botkit import wait_membership
from tests.homeserver import MatrixUser


async def bot_membership(env: Env, owner: MatrixUser, room: str) -> str | None:
    """The bot's membership in `room`, as its owner reads the room's state."""
    for event in await owner.state(room):
        if event["type"] == "m.room.member" and event["state_key"] == env.bot_id:
            return str(event["content"].get("membership"))
    return None


async def handled(env: Env, owner: MatrixUser) -> None:
    """Everything pushed so far is handled (the invites included): transactions come in
    order, so once a command sent now is answered, the events before it were dispatched."""
    await env.quiesce(owner, await env.room(owner))


def roster_of(env: Env, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The service reads `path` as its roster (`bot.roster`)."""
    assert env.service.invites is not None
    monkeypatch.setattr(env.service.invites, "roster", path)


async def test_bot_keeps_an_invite_the_roster_lists_and_roster_apply_joins_it(
    env: Env,
    alice: MatrixUser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression (issue 46): the deploy guide's "invite the reader, then `roster apply`" for
    an invite-only room ended "1 FAILED": the running service declined the invite at once,
    and the apply's join was then forbidden. An invite to a room the roster lists is kept,
    and the apply joins it."""
    local = unique_localpart("invited")
    room = await alice.create_room(preset="private_chat", alias_localpart=local)
    roster = write_roster(tmp_path, f"#{local}:{env.synapse.server_name}")
    roster_of(env, monkeypatch, roster)
    await alice.invite(room, env.bot_id)
    await handled(env, alice)
    assert await bot_membership(env, alice, room) == "invite"
    assert await roster_apply(env.service.cfg, roster, as_json=True) == 0
    actions = {a["room_id"]: a for a in json.loads(capsys.readouterr().out)["actions"]}
    assert actions[room]["action"] == "join"
    await handled(env, alice)
    assert await bot_membership(env, alice, room) == "join"


async def test_bot_an_invite_then_a_join_at_once_stays_joined_and_the_unlisted_is_declined(
    env: Env, alice: MatrixUser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 46): an invite followed at once by the roster's join left 10 of 10
    rooms (the decline raced the join). Rooms the roster lists stay joined; an invite to a
    room it does not list is still declined (rule 16), and one with no roster configured is
    kept, since nothing tells whether the roster lists it."""
    listed = [await alice.create_room(preset="private_chat") for _ in range(6)]
    roster_of(env, monkeypatch, write_roster(tmp_path, *listed))
    bot = env.hs.bot()

    async def invite_then_join(room: str) -> None:
        await alice.invite(room, env.bot_id)
        await bot.join(room)  # as `muninn roster apply` joins it

    await asyncio.gather(*(invite_then_join(room) for room in listed))
    unlisted = await alice.create_room(preset="private_chat", invite=[env.bot_id])
    await wait_membership(alice, unlisted, env.bot_id, "leave")
    await handled(env, alice)
    assert [await bot_membership(env, alice, room) for room in listed] == ["join"] * 6
    monkeypatch.setattr(env.service.invites, "roster", None)
    kept = await alice.create_room(preset="private_chat", invite=[env.bot_id])
    await handled(env, alice)
    assert await bot_membership(env, alice, kept) == "invite"


async def test_bot_reads_a_room_it_joins_at_once(env: Env, alice: MatrixUser) -> None:
    """Regression (issue 46): a room the roster joined waited up to `refresh.interval_seconds`
    (an hour here) for the next full pass. The service's own join wakes the writer for it:
    what was said there before the join is indexed within seconds."""
    room = await env.hs.fresh_room(alice)
    await alice.send_text(room, "the quokka census counted forty one quokkas this spring")
    col = await env.service.writer.opened()
    await env.hs.bot().join(room)  # as `muninn roster apply` joins it; nothing said since
    deadline = time.monotonic() + 15
    while not await col.count(PointFilter(room_ids=(RoomID(room),))):
        assert time.monotonic() < deadline, "the joined room was not read"
        await asyncio.sleep(0.2)
    assert await col.get_meta(CURSOR_PREFIX + room) is not None
