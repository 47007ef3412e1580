"""The pin commands' policy, in process (tests/bot/fastkit.py, no Synapse): what `!pin`,
`!unpin` and `!pins` pin, refuse and answer, and the board they fold from the room's log.

Moved here from tests/bot/service/test_run.py (names and assertions kept): the board is the
fold of the log the handler reads, so a log of typed events in memory is all it needs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from mautrix.types import EventType, JoinRule

from ingest.rules.stamps import utc_minute
from ingest.types import RoomID
from tests.bot.fastkit import SERVER, FastBot

ALICE = f"@alice:{SERVER}"
PERSONA = f"@persona-1:{SERVER}"
BOB = f"@bob:{SERVER}"
ASKERS = {"command_room_askers": [r"@persona-.*:muninn\.test"]}

MakeBot = Callable[..., FastBot]


def body_of(reply: Any) -> str:
    return str(reply["body"])


def command_room(bot: FastBot) -> RoomID:
    room = bot.rooms.create_room(PERSONA, join_rule=JoinRule.INVITE, visibility="joined")
    bot.serve_command_room(room)
    return room


def aliased_room(bot: FastBot, local: str = "pins") -> tuple[RoomID, str]:
    alias = f"#{local}:{SERVER}"
    return bot.rooms.create_room(ALICE, alias=alias), alias


async def board(bot: FastBot, commands: RoomID, alias: str) -> list[dict[str, Any]]:
    reply = await bot.reply(commands, PERSONA, f"!pins in:{alias}")
    return list(reply["org.muninn.results"]["pins"])


async def test_bot_pins_by_reply_offset_and_itself(make_bot: MakeBot) -> None:
    """!pin as a reply, with ^N, and bare (the command itself), with labels and notes."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    first = bot.rooms.say(room, ALICE, "alpha: the deploy runbook lives in the wiki")
    second = bot.rooms.say(room, ALICE, "beta: the on-call rota is in the calendar")
    await bot.reply(room, ALICE, "!pin #docs read this first", reply_to=first)
    reply = await bot.reply(room, ALICE, "!pin ^1 #rota")
    by_offset = bot.asked[-1]
    assert "Pinned under #rota" in body_of(reply) and "beta" in body_of(reply)
    await bot.reply(room, ALICE, "!pin #note remember the milk")
    itself = bot.asked[-1]
    pins = await board(bot, commands, alias)
    assert [p["target"] for p in pins] == [itself, second, first]
    assert pins[2]["label"] == "docs" and pins[2]["note"] == "read this first"
    assert pins[1]["marker_id"] == by_offset
    assert pins[0]["note"] == "remember the milk"
    # re-pinning updates the pin and moves it to the top, never duplicates it
    again = await bot.reply(room, ALICE, "!pin #updated", reply_to=first)
    assert "Re-pinned" in body_of(again)
    pins = await board(bot, commands, alias)
    assert [p["target"] for p in pins] == [first, itself, second]
    assert pins[0]["label"] == "updated"
    # !pins in the room itself shows the board as text
    reply = await bot.reply(room, ALICE, "!pins #rota")
    assert "beta" in body_of(reply) and "alpha" not in body_of(reply)


async def test_bot_board_holds_twelve(make_bot: MakeBot) -> None:
    """The 13th pin drops the least recently pinned."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    for n in range(1, 14):
        await bot.ask(room, ALICE, f"!pin pin number {n}")
    pins = await board(bot, commands, alias)
    assert [p["note"] for p in pins] == [f"pin number {n}" for n in range(13, 1, -1)]


async def test_bot_redacted_pin_no_longer_pins(make_bot: MakeBot) -> None:
    """Redacting the !pin event takes the pin off the board."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    await bot.reply(room, ALICE, "!pin #kept")
    kept = bot.asked[-1]
    await bot.reply(room, ALICE, "!pin #gone")
    gone = bot.asked[-1]
    bot.rooms.redact(room, gone, ALICE)
    assert [p["target"] for p in await board(bot, commands, alias)] == [kept]


async def test_bot_thread_pin_shows_on_the_room_board(make_bot: MakeBot) -> None:
    """A !pin ^1 in a thread pins the thread root, replies in the thread, counts on the board."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    root = bot.rooms.say(room, ALICE, "thread root: release checklist")
    reply = await bot.reply(room, ALICE, "!pin ^1 #release", thread=root)
    rel = reply["m.relates_to"]
    assert rel["rel_type"] == "m.thread" and rel["event_id"] == root
    assert rel["is_falling_back"] is True
    pins = await board(bot, commands, alias)
    assert [(p["target"], p["label"]) for p in pins] == [(root, "release")]


async def test_bot_pin_refuses_junk_and_pins_what_its_reply_cites(make_bot: MakeBot) -> None:
    """A bare `!pin`, and a `!pin` in reply to Muninn's reply citing no single message, pin
    nothing and say how to pin (regression: they pinned "!pin" and the bot's flattened text);
    a `!pin` in reply to a reply citing one message pins that message."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    bare = await bot.reply(room, ALICE, "!pin")
    assert "Nothing pinned: reply to the message itself with !pin" in body_of(bare)
    await bot.reply(room, ALICE, "!help")
    [help_reply] = bot.sent_to(bot.asked[-1])
    refused = await bot.reply(room, ALICE, "!pin", reply_to=help_reply.event_id)
    assert "Nothing pinned: that is Muninn's own reply" in body_of(refused)
    assert await board(bot, commands, alias) == []

    target = bot.rooms.say(room, ALICE, "the spare keys are in the blue box")
    await bot.reply(room, ALICE, "!pin #keys", reply_to=target)
    await bot.reply(room, ALICE, "!pins")  # cites the one pinned message
    [shown] = bot.sent_to(bot.asked[-1])
    again = await bot.reply(room, ALICE, "!pin #spare", reply_to=shown.event_id)
    assert "Re-pinned under #spare" in body_of(again)
    pins = await board(bot, commands, alias)
    assert [(p["target"], p["label"]) for p in pins] == [(target, "spare")]


async def test_bot_unpin_needs_a_target(make_bot: MakeBot) -> None:
    """!unpin without a reply or ^N does nothing and says why; with a reply it unpins."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    target = bot.rooms.say(room, ALICE, "keep this one")
    await bot.reply(room, ALICE, "!pin", reply_to=target)
    reply = await bot.reply(room, ALICE, "!unpin")
    assert "Nothing unpinned" in body_of(reply) and "needs a target" in body_of(reply)
    assert [p["target"] for p in await board(bot, commands, alias)] == [target]
    unpin = await bot.reply(room, ALICE, "!unpin", reply_to=target)
    assert "Unpinned" in body_of(unpin)
    assert await board(bot, commands, alias) == []


WRITTEN = 1_764_502_620_000  # 2025-11-30 11:37 UTC


async def test_fast_pins_show_when_the_message_was_written_not_when_it_was_pinned(
    make_bot: MakeBot,
) -> None:
    """Issue 36 item 7: a board line carries the pinned message's own time, in the text and
    the HTML alike, not the moment someone pinned it."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    old = bot.rooms.say(room, ALICE, "the restore drill checklist is in the wiki")
    log = bot.rooms.logs[room]
    log[-1] = dataclasses.replace(log[-1], ts=WRITTEN)  # said a while ago
    await bot.reply(room, ALICE, "!pin #docs", reply_to=old)
    reply = await bot.reply(room, ALICE, "!pins")
    for text in (reply["body"], reply["formatted_body"]):
        assert "2025-11-30 11:37 UTC" in text, text
        assert utc_minute(int(time.time() * 1000))[:10] not in text, text


async def test_fast_pins_text_finds_a_pin_by_its_label(make_bot: MakeBot) -> None:
    """Issue 36 item 10: `!pins outage` finds the pin labelled #outage, whatever its text."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    said = bot.rooms.say(room, ALICE, "the database failover runbook: step one, breathe")
    await bot.reply(room, ALICE, "!pin #outage", reply_to=said)
    reply = await bot.reply(room, ALICE, "!pins outage")
    assert "failover runbook" in reply["body"] and "nothing pinned" not in reply["body"]


async def test_bot_board_survives_a_flood_of_huge_messages(make_bot: MakeBot) -> None:
    """Regression (issue 37 item 9): 17 messages of 62 KB filled the read's 1,000,000
    characters, so the board (and `!search`) saw only them: every pin gone. A message's share
    of the read is bounded; the pins and the older message are still found."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    first = bot.rooms.say(room, ALICE, "the numbat feeding schedule is on the wiki")
    await bot.reply(room, ALICE, "!pin #docs", reply_to=first)
    for n in range(17):
        bot.rooms.say(room, BOB, f"flood {n} " + "lorem ipsum dolor " * 3_500)
    board = body_of(await bot.reply(room, ALICE, "!pins"))
    assert "numbat feeding schedule" in board
    found = body_of(await bot.reply(room, ALICE, "!search numbat"))
    assert "feeding schedule" in found and "scanned the whole room" in found


async def test_bot_pin_offset_skips_a_message_redacted_before_it(make_bot: MakeBot) -> None:
    """Regression (issue 37 item 10): `!pin ^1` pinned a message redacted before the command
    (the board showed nothing). It counts only what was there to see; a message redacted
    after the pin keeps its place, so the pin never moves to another message."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    plan = bot.rooms.say(room, ALICE, "the release plan is in the wiki")
    spam = bot.rooms.say(room, BOB, "buy cheap watches")
    bot.rooms.redact(room, spam, BOB)
    reply = await bot.reply(room, ALICE, "!pin ^1")
    assert "release plan" in body_of(reply)
    assert [p["target"] for p in await board(bot, commands, alias)] == [plan]
    later = bot.rooms.say(room, ALICE, "the demo is on friday")
    await bot.reply(room, ALICE, "!pin ^1")
    bot.rooms.redact(room, later, ALICE)  # after its pin: the pin stays on it, hidden
    assert plan in [p["target"] for p in await board(bot, commands, alias)]
    assert all(p["target"] in (plan, later) for p in await board(bot, commands, alias))


async def test_bot_unpin_of_another_members_pin_needs_the_rooms_pinning_level(
    make_bot: MakeBot,
) -> None:
    """Regression (issue 37 item 10): any member could `!unpin` anyone's pin. Another's pin
    is unpinned only by a user the room's power levels let send `m.room.pinned_events` (the
    spec's own pinning; by default a moderator, 50); the pinner always may."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    moderator = f"@mod:{SERVER}"
    levels = {"users": {ALICE: 100, moderator: 50}, "users_default": 0}
    bot.rooms.add(room, EventType.ROOM_POWER_LEVELS, ALICE, levels, "")
    first = bot.rooms.say(room, ALICE, "the numbat feeding schedule is on the wiki")
    second = bot.rooms.say(room, ALICE, "the numbat vet visits on tuesdays")
    for target in (first, second):
        await bot.reply(room, ALICE, "!pin", reply_to=target)
    refused = await bot.reply(room, BOB, "!unpin", reply_to=first)
    assert "Nothing unpinned" in body_of(refused) and "moderator" in body_of(refused)
    assert {p["target"] for p in await board(bot, commands, alias)} == {first, second}
    assert "Unpinned" in body_of(await bot.reply(room, moderator, "!unpin", reply_to=first))
    assert [p["target"] for p in await board(bot, commands, alias)] == [second]
    await bot.reply(room, BOB, "!pin", reply_to=first)  # Bob's own pin: Bob may unpin it
    assert "Unpinned" in body_of(await bot.reply(room, BOB, "!unpin", reply_to=first))
    assert [p["target"] for p in await board(bot, commands, alias)] == [second]
