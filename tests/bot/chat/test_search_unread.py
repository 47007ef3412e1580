"""`!search` in a room the index has not read yet says so in its footer (issue 49), against
`muninn run` on the real Synapse (the `env` fixture of tests/bot/conftest.py)."""

from __future__ import annotations

import pytest

from tests.bot.botenv import Env, body_of, link
from tests.botkit import ask
from tests.homeserver import MatrixUser

UNREAD = "the index has not read this room yet"


async def test_bot_search_says_when_its_room_is_not_read_yet(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the writer has not read a room (its wake-ups held back here), a `!search` there
    finds what its log holds and says in the footer that the index has not read the room; once
    read, the footer says nothing of it."""
    read = await env.room(alice)
    await alice.send_text(read, "the walrus choir rehearses on thursday")
    await env.settle(read)  # the index holds a room: its marks are known
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)
    room = await env.room(alice)
    said = await alice.send_text(room, "the narwhal choir rehearses on friday")
    _, reply = await ask(alice, room, "!search narwhal choir", env.bot_id)
    assert link(room, said) in body_of(reply) and UNREAD in body_of(reply)
    assert UNREAD in reply["content"]["formatted_body"]
    monkeypatch.undo()
    await env.settle(room)
    _, again = await ask(alice, room, "!search narwhal choir", env.bot_id)
    assert link(room, said) in body_of(again) and UNREAD not in body_of(again)
    _, other = await ask(alice, read, "!search walrus choir", env.bot_id)
    assert UNREAD not in body_of(other)
