"""`muninn run` against the real Synapse: the command room, reply budgets, purges and secrets.

One service for the whole module (the `env` fixture of tests/bot/conftest.py: its store in a
module temp dir, the session's MiniLM).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.chat.command_room import CommandRoomVerdict
from bot.chat.replying import COMMAND_ROOM_CHANGED
from bot.demo.client import unique_localpart
from bot.demo.synapse import free_port
from ingest.config import IndexConfig, StoreConfig
from ingest.store import PointFilter, open_store
from ingest.types import RoomID
from tests.bot.botenv import (
    TRANSCRIPT_LIMIT,
    Env,
    body_of,
    join_at_recheck,
    link,
    pin_then_board,
    refuse_replies_while,
    seen_by,
)
from tests.botkit import ask, replies, wait_reply
from tests.homeserver import MatrixUser

# ---------------------------------------------------------------- the command room


async def test_bot_command_room_spans_rooms_with_json(env: Env, alice: MatrixUser) -> None:
    """In the command room !search spans every indexed room and carries org.muninn.results."""
    first, second = await env.room(alice), await env.room(alice)
    a = await alice.send_text(first, "quokka sighting near the harbour")
    b = await alice.send_text(second, "a quokka stole my sandwich")
    await env.settle(first, second)
    _, reply = await ask(env.persona, env.command_room, "!search quokka limit:10", env.bot_id)
    results = reply["content"]["org.muninn.results"]
    found = {(h["room_id"], h["best_event_id"]) for h in results["hits"]}
    assert {(first, a), (second, b)} <= found
    assert set(results) >= {"hits", "warnings", "retrievers", "dropped_stale"}
    assert "dense" in results["retrievers"]


async def test_bot_command_room_operators_and_more_across_rooms(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """The chat operators mean the same in the command room, across rooms and with `in:`;
    its results carry `next_offset` and `sort`, and `!more` pages them."""
    first, second = await env.room(alice), await env.room(alice)
    await bob.join(second)
    link = await alice.send_text(first, "the wombat cam is at https://example.org/wombat")
    sighting = await alice.send_text(first, "a wombat test sighting, no link")
    by_bob = await bob.send_text(second, "wombat burrow spotted at https://example.org/burrow")
    threaded = await alice.send_thread_reply(first, link, "wombatcam stream is back up")
    mention = {
        "msgtype": "m.text",
        "body": "Bob, wombats",
        "m.mentions": {"user_ids": [bob.user_id]},
    }
    mentioned = await alice.send(second, "m.room.message", mention)
    await env.settle(first, second)
    for operators, want in (
        ("wombatc* is:thread", threaded),
        (f"wombat* mentions:{bob.user_id}", mentioned),
    ):
        _, reply = await ask(env.persona, env.command_room, f"!search {operators}", env.bot_id)
        assert [h["best_event_id"] for h in reply["content"]["org.muninn.results"]["hits"]] == [
            want
        ]
    command = f"!search wombat has:link -from:{bob.user_id} limit:1"
    _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
    results = reply["content"]["org.muninn.results"]
    assert [h["best_event_id"] for h in results["hits"]] == [link]
    assert results["next_offset"] is None and results["sort"] == "relevance"
    command = "!search wombat has:link sort:recent limit:1"
    _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
    results = reply["content"]["org.muninn.results"]
    assert results["next_offset"] == 1 and "!more" in body_of(reply)
    _, more = await ask(env.persona, env.command_room, "!more", env.bot_id)
    paged = {h["best_event_id"] for h in more["content"]["org.muninn.results"]["hits"]}
    shown = {h["best_event_id"] for h in results["hits"]}
    assert paged and not paged & shown and paged | shown == {link, by_bob}
    command = f"!search wombat burrow -test -bob in:{first} in:{second}"
    _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
    found = {h["best_event_id"] for h in reply["content"]["org.muninn.results"]["hits"]}
    assert by_bob in found and not found & {mentioned, sighting}


async def test_bot_command_room_hides_a_room_bridged_since_indexing(
    env: Env, alice: MatrixUser
) -> None:
    """A room that gets a bridge after its last refresh shows nothing in the command room at
    once: its windows wait in the store for the next refresh to purge them, unseen."""
    room = await env.room(alice)
    await alice.send_text(room, "pangolin sighting behind the depot")
    await env.settle(room)
    _, before = await ask(env.persona, env.command_room, "!search pangolin", env.bot_id)
    assert "sighting behind the depot" in body_of(before)
    # The answer above came after the message's push (transactions are in order); the join
    # waits for the worker still dispatching it, so its wake is issued before this settle.
    await env.service.queue.join()
    await env.settle(room)  # the message's own (pushed) wake is spent: no refresh is due
    bridge = {"bridgebot": alice.user_id, "protocol": {"id": "irc"}, "channel": {"id": "#p"}}
    await alice.send_state(room, "m.bridge", bridge, "irc/#p")
    await ask(env.persona, env.command_room, "!help", env.bot_id)  # the state event is through
    _, after = await ask(env.persona, env.command_room, "!search pangolin", env.bot_id)
    assert "pangolin" not in body_of(after).split("\n", 1)[-1]
    results = after["content"]["org.muninn.results"]
    assert all(h["room_id"] != room for h in results["hits"])
    assert "sighting behind the depot" not in str(after["content"])
    col = await env.service.writer.open()  # hidden by revalidation, not yet purged
    assert await asyncio.to_thread(col.count, PointFilter(room_ids=(room,))) >= 1


@pytest.mark.parametrize(
    ("etype", "content", "state_key"),
    [
        (
            "m.bridge",
            {
                "bridgebot": "@ircbot:muninn.test",
                "protocol": {"id": "irc"},
                "channel": {"id": "#o"},
            },
            "irc/#o",
        ),
        ("m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}, ""),
    ],
    ids=["bridged", "encrypted"],
)
async def test_bot_stops_serving_a_command_room_that_gets_bridged_or_encrypted(
    env: Env,
    alice: MatrixUser,
    monkeypatch: pytest.MonkeyPatch,
    etype: str,
    content: dict[str, Any],
    state_key: str,
) -> None:
    """The command room's replies carry every room's text: once it is bridged (the bridge
    would relay them off the homeserver) or encrypted (the bot holds no keys and answers in
    plaintext), the bot answers nothing there — also when the room is excluded from the
    index, as operators often have it (the exclusion must not mask the refusal)."""
    indexed = await env.room(alice)
    await alice.send_text(indexed, "the capybara pond is behind the old mill")
    await env.settle(indexed)
    commands = await env.new_command_room(env.persona, monkeypatch)
    scope = env.service.rooms.scope
    excluded = replace(scope, exclude_room_ids=scope.exclude_room_ids | {commands})
    monkeypatch.setattr(env.service.rooms, "scope", excluded)
    _, before = await ask(env.persona, commands, "!search capybara", env.bot_id)
    assert "behind the old mill" in body_of(before)
    await env.persona.send_state(commands, etype, content, state_key)
    asked = await env.persona.send_text(commands, "!search capybara")
    await env.quiesce(alice, indexed)
    assert await replies(env.persona, commands, asked, env.bot_id) == []
    assert not (await _command_room_verdict(env, commands)).eligible


async def test_bot_search_hides_a_purged_message_from_the_transcript_too(
    env: Env, alice: MatrixUser
) -> None:
    """A purge recorded but not yet applied hides its messages from the index hits *and* from
    the live transcript the reply fuses in (rule 12)."""
    room = await env.room(alice)
    doomed = await alice.send_text(room, "the numbat enclosure code is 8841")
    await alice.send_text(room, "a numbat sleeps all afternoon")
    await env.settle(room)
    _, before = await ask(alice, room, "!search numbat", env.bot_id)
    assert "enclosure code" in body_of(before)
    ts = int((await alice.get_event(room, doomed))["origin_server_ts"])
    await env.service.writer.add_tombstone(RoomID(room), ts, ts)  # no refresh applies it yet
    _, after = await ask(alice, room, "!search numbat", env.bot_id)
    assert "sleeps all afternoon" in body_of(after)
    assert "enclosure code" not in str(after["content"])


async def test_bot_search_hides_a_message_redacted_after_an_earlier_search(
    env: Env, alice: MatrixUser
) -> None:
    """The room's log, and what was read from it, are kept between commands: a redaction
    after a `!search` that showed the message hides it from the next one (rule 7)."""
    room = await env.room(alice)
    doomed = await alice.send_text(room, "the wombat burrow key is under the blue mat")
    await alice.send_text(room, "a wombat dug all night")
    _, before = await ask(alice, room, "!search wombat", env.bot_id)
    assert "blue mat" in body_of(before)
    await alice.redact(room, doomed)
    _, after = await ask(alice, room, "!search wombat", env.bot_id)
    assert "dug all night" in body_of(after)
    assert "blue mat" not in str(after["content"]) and link(room, doomed) not in body_of(after)


async def test_bot_search_shows_an_edit_made_after_an_earlier_search(
    env: Env, alice: MatrixUser
) -> None:
    """An edit after a `!search` that showed the original: the next one shows the new text
    only, never the words the edit took back."""
    room = await env.room(alice)
    target = await alice.send_text(room, "the quokka ate the spare sandwich")
    _, before = await ask(alice, room, "!search quokka", env.bot_id)
    assert "spare sandwich" in body_of(before)
    await alice.send_edit(room, target, "the quokka took a long nap")
    _, after = await ask(alice, room, "!search quokka", env.bot_id)
    assert "long nap" in body_of(after)
    assert "sandwich" not in str(after["content"])


async def test_bot_search_with_the_store_down_still_hides_a_purged_message(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store down, the bot answers from the transcript, and a purge recorded before still
    hides its message there: the purges are read from beside the store (rule 12)."""
    room = await env.room(alice)
    doomed = await alice.send_text(room, "the numbat den code is 4410")
    await alice.send_text(room, "a numbat naps in the den")
    ts = int((await alice.get_event(room, doomed))["origin_server_ts"])
    await env.service.writer.add_tombstone(RoomID(room), ts, ts)
    # A real Qdrant server store that no server answers: every read raises StoreUnavailable.
    down = open_store(
        IndexConfig(store=StoreConfig(url=f"http://127.0.0.1:{free_port()}")), Path()
    )
    monkeypatch.setattr(env.service.searcher, "store", down)
    try:
        _, reply = await ask(alice, room, "!search numbat den", env.bot_id)
    finally:
        down.close()
    assert "naps in the **den**" in body_of(reply)
    assert "4410" not in str(reply["content"])


@pytest.mark.parametrize("beyond_the_scan", [False, True])
async def test_bot_pins_hide_a_purged_message(
    env: Env, alice: MatrixUser, beyond_the_scan: bool
) -> None:
    """A pinned message a purge covers is quoted neither by `!pins` (in the scanned log, or
    fetched beyond it) nor by a `!pin` confirmation, before any refresh applied the purge."""
    room = await env.room(alice)
    doomed = await alice.send_text(room, "the okapi vault code is 6613")
    filler = TRANSCRIPT_LIMIT + 5 if beyond_the_scan else 0
    board = await pin_then_board(env, alice, room, doomed, "!pin #vault", filler)
    assert "6613" in body_of(board)
    ts = int((await alice.get_event(room, doomed))["origin_server_ts"])
    await env.service.writer.add_tombstone(RoomID(room), ts, ts)
    _, board = await ask(alice, room, "!pins", env.bot_id)
    assert "6613" not in str(board["content"])
    confirmation = await wait_reply(
        alice, room, await alice.send_reply(room, doomed, "!pin"), env.bot_id
    )
    assert "📌" in body_of(confirmation) and "6613" not in str(confirmation["content"])


@pytest.mark.parametrize("beyond_the_scan", [False, True])
async def test_bot_pins_never_quote_a_pinned_replys_fallback(
    env: Env, alice: MatrixUser, bob: MatrixUser, beyond_the_scan: bool
) -> None:
    """A pinned reply shows its own text, never its reply fallback (`> <@bob> …`), which
    copies the parent's text, here redacted since (rule 7): in the scanned log or fetched."""
    room = await env.room(alice)
    await bob.join(room)
    parent = await bob.send_text(room, "the wombat burrow is under 12 elm row")
    child = await alice.send_reply(room, parent, "thanks, noted for the survey")
    await bob.redact(room, parent)
    filler = TRANSCRIPT_LIMIT + 5 if beyond_the_scan else 0
    board = await pin_then_board(env, alice, room, child, filler=filler)
    assert "noted for the survey" in body_of(board)
    assert "elm row" not in str(board["content"])


async def test_bot_search_scrubs_a_secret_in_a_fresh_message(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret in a message the writer has not indexed (its refresh never runs) reaches no
    reply through the transcript: not the room's, not the command room's JSON (rule 8)."""
    secret = "ghp_" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)
    local = unique_localpart("fresh")
    room = await env.room(alice, alias_localpart=local)
    fresh = await alice.send_text(room, f"the wombat deploy token is {secret}")
    _, reply = await ask(alice, room, "!search wombat deploy", env.bot_id)
    assert link(room, fresh) in body_of(reply) and "[redacted:" in body_of(reply)
    assert secret not in str(reply["content"])
    alias = f"#{local}:{env.synapse.server_name}"
    _, reply = await ask(env.persona, env.command_room, f"!search wombat in:{alias}", env.bot_id)
    [hit] = reply["content"]["org.muninn.results"]["hits"]
    assert hit["best_event_id"] == fresh and "[redacted:" in str(hit)
    assert secret not in str(reply["content"])
    col = await env.service.writer.open()  # the transcript answered, not the index
    assert await asyncio.to_thread(col.count, PointFilter(room_ids=(room,))) == 0


async def test_bot_command_room_withholds_a_reply_an_outsider_joined_to_read(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 37 item 1): the allowed asker invites an outsider while `!search`
    runs, and the outsider joins before the reply is sent. The command room is read again
    just before the send: the reply is withheld, and the outsider reads nothing of the
    private `joined` room it would have quoted (it did, before the re-check)."""
    private = await env.room(alice)
    await alice.set_history_visibility(private, "joined")
    await alice.send_text(private, "the okapi vault code is 4471, staff only")
    await env.settle(private)
    commands = await env.new_command_room(env.persona, monkeypatch)

    async def outsider_joins() -> None:
        await env.persona.invite(commands, bob.user_id)
        await bob.join(commands)

    ran = join_at_recheck(env, monkeypatch, outsider_joins)
    _, reply = await ask(env.persona, commands, "!search okapi vault code", env.bot_id)
    assert ran, "the reply was sent without a re-check"
    assert body_of(reply) == COMMAND_ROOM_CHANGED
    assert "4471" not in str(reply["content"]) and "4471" not in await seen_by(bob, commands)


async def test_bot_command_room_withholds_a_held_reply_an_outsider_joined_to_read(
    env: Env, alice: MatrixUser, bob: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 46, high): the homeserver refuses the service's sends while an
    outsider is invited to the command room and joins. The held reply is checked again before
    its repeat: withheld, and the outsider reads nothing of the private room it quoted."""
    private = await env.room(alice)
    await alice.set_history_visibility(private, "joined")
    await alice.send_text(private, "the okapi strongroom code is 5582, staff only")
    await env.settle(private)
    commands = await env.new_command_room(env.persona, monkeypatch)

    async def outsider_joins() -> None:
        await env.persona.invite(commands, bob.user_id)
        await bob.join(commands)

    joined = refuse_replies_while(env, monkeypatch, outsider_joins)
    _, reply = await ask(env.persona, commands, "!search okapi strongroom code", env.bot_id)
    assert joined, "the outage ended before the outsider joined"
    assert body_of(reply) == COMMAND_ROOM_CHANGED
    assert "5582" not in str(reply["content"]) and "5582" not in await seen_by(bob, commands)


async def _command_room_verdict(env: Env, room_id: str) -> CommandRoomVerdict:
    """Whether the service serves `room_id` as the command room now (`bot.chat.command_room`)."""
    return env.service.handler.command_policy.serves_room(await env.service.rooms.get(room_id))


async def _command_room_refused(
    env: Env,
    commands: str,
    asker: MatrixUser,
    caplog: pytest.LogCaptureFixture,
    quiet: tuple[MatrixUser, str],
) -> CommandRoomVerdict:
    """Ask in `commands` twice: the first command is answered with the cause and the fix, the
    second with nothing (once a cause, issue 44); the refusal the log named, whose notice the
    asker was told. `quiet`: a member and an ordinary room to quiesce in (the configured
    command room, no longer the one served, is not indexed, so not answered in)."""
    _, told = await ask(asker, commands, "!search capybara", env.bot_id)
    asked = await asker.send_text(commands, "!search capybara")
    await env.quiesce(*quiet)
    assert await replies(env.persona, commands, asked, env.bot_id) == []
    verdict = await _command_room_verdict(env, commands)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(commands in m and verdict.detail in m for m in errors), errors
    assert "behind the old mill" not in str(told["content"])  # no result, only why
    assert told["content"]["org.muninn.results"] == {"error": verdict.notice}
    return verdict


@pytest.mark.parametrize(
    ("change", "reason", "named", "said"),
    [
        ("public", "public", "join rule public", 'join rule is "public"'),
        (
            "world_readable",
            "world_readable",
            "world_readable",
            'history visibility is "world_readable"',
        ),
        ("shared", "shared_history", "history visibility shared", 'visibility is "shared"'),
        ("invite_outsider", "outsider", "invited user {alice}", "{alice} is invited to"),
        ("outsider_joins", "outsider", "member {alice}", "{alice} is a member of"),
    ],
)
async def test_bot_refuses_a_command_room_others_can_read(
    env: Env,
    alice: MatrixUser,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    change: str,
    reason: str,
    named: str,
    said: str,
) -> None:
    """Regression: whoever can read the command room reads every room's results. Once it is
    public, world-readable, `shared` (a member added later reads the earlier replies), or has a
    member (even one only invited) who is neither an allowed asker nor the bot, the bot answers
    nothing there but, once, the cause and the fix to the allowed asker (issue 44), and logs
    the cause at error level."""
    indexed = await env.room(alice)
    await alice.send_text(indexed, "the capybara pond is behind the old mill")
    await env.settle(indexed)
    commands = await env.new_command_room(env.persona, monkeypatch)
    _, before = await ask(env.persona, commands, "!search capybara", env.bot_id)
    assert "behind the old mill" in body_of(before)
    if change == "public":
        await env.persona.send_state(commands, "m.room.join_rules", {"join_rule": "public"})
    elif change in ("world_readable", "shared"):
        await env.persona.set_history_visibility(commands, change)
    else:
        await env.persona.invite(commands, alice.user_id)
        if change == "outsider_joins":
            await alice.join(commands)
    with caplog.at_level(logging.ERROR, logger="muninn.chat"):
        verdict = await _command_room_refused(env, commands, env.persona, caplog, (alice, indexed))
    assert str(verdict.reason) == reason
    assert named.format(alice=alice.user_id) in verdict.detail
    assert said.format(alice=alice.user_id) in verdict.notice
