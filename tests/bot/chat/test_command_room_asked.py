"""The command room is where people ask (issue 44), against the real Synapse: it is not
indexed nor searched, and when it is refused its allowed asker is told why, once a cause.

One service for the module (the `env` fixture of tests/bot/conftest.py).
"""

from __future__ import annotations

import asyncio

import pytest

from ingest.store import PointFilter
from tests.bot.botenv import Env, body_of
from tests.botkit import ask, replies
from tests.homeserver import MatrixUser


async def test_bot_tells_an_allowed_asker_once_why_the_command_room_is_not_served(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a command room whose history is `shared` answered with silence (only the
    service log said why). The first command of an allowed asker is answered, in that room,
    with the cause and the fix in plain words, once a cause (a second command: nothing);
    a non-asker still gets silence and does not use the notice up; another cause is told in
    its turn; the room fixed, the asker gets results."""
    indexed = await env.room(alice)
    await alice.send_text(indexed, "the capybara pond is behind the old mill")
    await env.settle(indexed)
    commands = await env.new_command_room(env.persona, monkeypatch)
    await env.persona.set_history_visibility(commands, "shared")
    await env.persona.invite(commands, alice.user_id)
    await alice.join(commands)  # an outsider too, but history is the first cause named

    ignored = await alice.send_text(commands, "!search capybara")
    await env.quiesce(alice, indexed)
    assert await replies(env.persona, commands, ignored, env.bot_id) == []
    _, told = await ask(env.persona, commands, "!search capybara", env.bot_id)
    assert body_of(told).startswith("Muninn does not answer here: this room's history")
    assert 'visibility is "shared"' in body_of(told)
    assert 'Set it to "joined" or "invited"' in body_of(told)
    assert "old mill" not in str(told["content"])
    again = await env.persona.send_text(commands, "!pins")
    await env.quiesce(alice, indexed)
    assert await replies(env.persona, commands, again, env.bot_id) == []

    await env.persona.set_history_visibility(commands, "joined")
    _, told = await ask(env.persona, commands, "!search capybara", env.bot_id)
    assert f"{alice.localpart}:" in body_of(told) and "is a member of this room" in body_of(told)
    assert "bot.command_room_askers" in body_of(told)
    await alice.leave(commands)
    _, answered = await ask(env.persona, commands, "!search capybara", env.bot_id)
    assert "behind the old mill" in body_of(answered)


async def test_bot_command_room_is_neither_indexed_nor_searched(
    env: Env, alice: MatrixUser
) -> None:
    """Issue 44: the command room is where people ask, not where answers live. An asker's
    note there is not indexed (the writer refuses the room, `command_room`), so it never
    comes back as a hit of cross-room search, and `in:` the command room is refused in plain
    words: its log is not searched either."""
    answers = await env.room(alice)
    await alice.send_text(answers, "the wombat gate code is taped under the mailbox")
    await env.persona.send_text(env.command_room, "note: where is the wombat gate code? ask ada")
    await env.settle(answers, env.command_room)
    col = await env.service.writer.open()
    assert await asyncio.to_thread(col.count, PointFilter(room_ids=(env.command_room,))) == 0
    _, reply = await ask(env.persona, env.command_room, "!search wombat gate code", env.bot_id)
    hits = reply["content"]["org.muninn.results"]["hits"]
    assert hits[0]["room_id"] == answers
    assert env.command_room not in {h["room_id"] for h in hits}
    assert "ask ada" not in body_of(reply)
    alias = env.service.cfg.bot.command_room
    _, refused = await ask(env.persona, env.command_room, f"!search in:{alias} wombat", env.bot_id)
    assert (
        body_of(refused)
        == f"{alias} is the command room: questions are asked there, not searched."
    )
