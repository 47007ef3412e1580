"""`!search` finds files, images, video and audio by filename and caption (issue 49; docs/
ARCHITECTURE.md §3 rule 5), through `muninn run` and the real Synapse: a media result reads
`📎 filename — caption`, `has:image` keeps images, a secret in a caption or a filename reaches
no reply and no payload, a redacted image leaves, an edited caption replaces the old one.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.demo.client import unique_localpart
from ingest.store import PointFilter
from tests.bot.botenv import Env, body_of, link
from tests.botkit import ask
from tests.homeserver import MatrixUser

HINGE = "the broken hinge on the storage cupboard door"
TOKEN = "ghp_" + "Mq8Nw7Bv6Cx5Zl4Kj3Hg2Fd1Sa0PoIuYtReWq"
PASSWORD = "Quokka-Lantern-5512"


async def _asked(env: Env, user: MatrixUser, room: str, command: str) -> dict[str, Any]:
    _, reply = await ask(user, room, command, env.bot_id)
    return reply


async def _stored(env: Env, room: str) -> str:
    """Every payload the index holds for the room, as one text."""
    col = await env.service.writer.open()
    points = await asyncio.to_thread(lambda: list(col.scroll(PointFilter(room_ids=(room,)))))
    return json.dumps([p.payload for p in points], ensure_ascii=False)


def _plain(reply: dict[str, Any]) -> str:
    """A reply's text without the marks on the words that matched."""
    return body_of(reply).replace("**", "")


def _result_line(shown: str, permalink: str) -> str:
    """The line of the result whose permalink follows it."""
    lines = shown.split("\n")
    return lines[[line.strip() for line in lines].index(permalink) - 1]


async def test_bot_search_finds_media_by_caption_and_filename(
    env: Env, alice: MatrixUser, seeder: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image with a caption and a file without one are found by the words of their caption
    and filename, shown as `📎 filename — caption` in the room; `has:image` keeps the image
    only; the command room's JSON says each message's msgtype."""
    local = unique_localpart("media")
    room = await env.room(alice, alias_localpart=local)
    await seeder.join(room)
    image = await seeder.send_media(room, "m.image", "IMG_2041.jpg", HINGE)
    budget = await seeder.send_media(room, "m.file", "quarterly-budget-2026.xlsx")
    text = await alice.send_text(room, "who can fix the storage cupboard hinge?")
    await env.settle(room)
    stored = await _stored(env, room)
    assert '"msgtype": "m.image"' in stored and "mxc://" not in stored

    _, reply = await ask(alice, room, "!search broken hinge", env.bot_id)
    assert f"📎 IMG_2041.jpg — {HINGE}" in _plain(reply)
    _, reply = await ask(alice, room, "!search cupboard hinge", env.bot_id)
    assert _result_line(_plain(reply), link(room, image)).endswith(f"📎 IMG_2041.jpg — {HINGE}")
    assert "📎" not in _result_line(_plain(reply), link(room, text))  # a text has no clip
    _, reply = await ask(alice, room, "!search quarterly budget", env.bot_id)
    line = _result_line(_plain(reply), link(room, budget))
    assert line.endswith("📎 quarterly-budget-2026.xlsx")
    _, reply = await ask(alice, room, "!search hinge cupboard has:image", env.bot_id)
    assert link(room, image) in body_of(reply) and link(room, text) not in body_of(reply)
    _, reply = await ask(alice, room, "!search budget has:video", env.bot_id)
    assert link(room, budget) not in body_of(reply)

    alias = f"#{local}:{env.synapse.server_name}"
    command = f"!search hinge cupboard in:{alias} limit:10"
    _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
    hits = reply["content"]["org.muninn.results"]["hits"]
    kinds = {m["event_id"]: m["msgtype"] for h in hits for m in h["messages"]}
    assert kinds[image] == "m.image" and kinds[text] == "m.text"


async def test_bot_search_never_quotes_a_secret_in_a_caption_or_filename(
    env: Env, alice: MatrixUser
) -> None:
    """Privacy canary: a token in a filename and a password in a caption reach no reply, fresh
    (the room's log) or indexed, and no stored payload."""
    room = await env.room(alice)
    caption = f"the wombat router, admin password: {PASSWORD}"
    router = await alice.send_media(room, "m.image", "wombat-router.png", caption)
    token = await alice.send_media(room, "m.file", f"wombat deploy key {TOKEN}.txt")
    for indexed in (False, True):
        if indexed:
            await env.settle(room)
        for command in ("!search wombat", "!search router admin password"):
            _, reply = await ask(alice, room, command, env.bot_id)
            assert link(room, router) in body_of(reply) and "[redacted:" in body_of(reply)
            assert PASSWORD not in str(reply["content"]) and TOKEN not in str(reply["content"])
        assert link(room, token) in body_of(await _asked(env, alice, room, "!search wombat"))
    stored = await _stored(env, room)
    assert "wombat-router.png" in stored
    assert PASSWORD not in stored and TOKEN not in stored


async def test_bot_search_forgets_a_redacted_image_and_an_edited_caption(
    env: Env, alice: MatrixUser
) -> None:
    """A redacted image is no longer shown; an edited caption is found by its new words, and
    its old words by nothing, in the room's log and in the index alike."""
    room = await env.room(alice)
    doomed = await alice.send_media(room, "m.image", "otter.jpg", "the otter slide at dawn")
    edited = await alice.send_media(room, "m.audio", "memo.ogg", "the otter walrus memo")
    await env.settle(room)
    _, before = await ask(alice, room, "!search otter", env.bot_id)
    assert link(room, doomed) in body_of(before) and "walrus" in body_of(before)
    await alice.redact(room, doomed)
    await alice.edit_caption(room, edited, "the otter pelican memo")
    for _ in range(2):  # the room's log at once, then the index after its refresh too
        _, after = await ask(alice, room, "!search otter memo", env.bot_id)
        assert link(room, doomed) not in body_of(after) and "slide at dawn" not in body_of(after)
        assert "walrus" not in str(after["content"])
        assert "📎 memo.ogg — the otter pelican memo" in _plain(after)
        await env.settle(room)
    stored = await _stored(env, room)
    assert "walrus" not in stored and "otter slide" not in stored
