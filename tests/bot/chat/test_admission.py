"""The command policy's admission and parsing, in process (tests/bot/fastkit.py, no Synapse):
who may command, in which rooms, how often; what a malformed command is answered with.

The real handler, room verdicts (`RoomCache` over `RoomScope`), searcher and transcript fold;
the rooms are typed events in memory. Moved here from the real-Synapse files where a test was
only about the policy (its name and assertions kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from mautrix.types import EventType, JoinRule

from bot.chat.commands.incoming import MAX_COMMAND_AGE_MS
from bot.chat.replying import COMMAND_ROOM_CHANGED
from ingest.types import RoomID
from tests.bot.fastkit import BOT, SERVER, FastBot

ALICE = f"@alice:{SERVER}"
BOB = f"@bob:{SERVER}"
PERSONA = f"@persona-1:{SERVER}"
ASKERS = {"command_room_askers": [r"@persona-.*:muninn\.test"]}

MakeBot = Callable[..., FastBot]


def body_of(reply: Mapping[str, Any]) -> str:
    return str(reply["body"])


def command_room(bot: FastBot, *members: str) -> RoomID:
    """An invite-only room of the persona's (`joined` history), made the command room."""
    room = bot.rooms.create_room(
        PERSONA, members=members, join_rule=JoinRule.INVITE, visibility="joined"
    )
    bot.serve_command_room(room)
    return room


# ---------------------------------------------------------------- who, and where


async def test_bot_never_answers_in_a_dm(make_bot: MakeBot) -> None:
    """A room in the bot's m.direct is a DM: commands there get no answer."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    bot.rooms.direct.add(room)
    assert await bot.ask(room, ALICE, "!help") == []
    other = bot.rooms.create_room(ALICE)
    assert len(await bot.ask(other, ALICE, "!help")) == 1


async def test_fast_silent_where_the_room_is_refused(make_bot: MakeBot) -> None:
    """A room the bot is not in, an excluded alias and an encrypted room are never answered
    and never read (the refusal comes from the state alone); an ordinary room is answered."""
    bot = make_bot(scope={"exclude_aliases": ["#members"]})
    outside = bot.rooms.create_room(ALICE, bot_joined=False)
    excluded = bot.rooms.create_room(ALICE, alias="#members")
    encrypted = bot.rooms.create_room(ALICE)
    bot.rooms.add(encrypted, EventType.ROOM_ENCRYPTION, ALICE, {"algorithm": "m.megolm"}, "")
    for room in (outside, excluded, encrypted):
        assert await bot.ask(room, ALICE, "!search anything") == []
        assert room not in bot.rooms.reads
    ordinary = bot.rooms.create_room(ALICE)
    assert len(await bot.ask(ordinary, ALICE, "!search anything")) == 1
    assert ordinary in bot.rooms.reads


async def test_bot_command_room_ignores_unlisted_askers(make_bot: MakeBot) -> None:
    """An asker not matching command_room_askers gets nothing, not even an error (and, being
    a member, leaves the room unserved for everyone: test_command_room.py::
    test_bot_refuses_a_command_room_others_can_read)."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot, BOB)
    assert await bot.ask(commands, BOB, "!search quokka") == []
    assert not bot.handler.asker_allowed(BOB)


async def test_fast_command_room_answers_only_while_no_outsider_is_in_it(
    make_bot: MakeBot, caplog: pytest.LogCaptureFixture
) -> None:
    """The command room answers its allowed asker; once someone else joins, nobody, and the
    cause is logged at error level; the allowed asker is told why and the fix, once (issue
    44), and nothing more."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    assert len(await bot.ask(commands, PERSONA, "!help")) == 1
    bot.rooms.join(commands, ALICE)
    bot.verdicts.invalidate(commands)  # as the dispatcher does on a state event
    with caplog.at_level(logging.ERROR, logger="muninn.chat"):
        told = await bot.ask(commands, PERSONA, "!help")
        assert await bot.ask(commands, PERSONA, "!help") == []
    assert any(commands in r.getMessage() and ALICE in r.getMessage() for r in caplog.records)
    assert len(told) == 1 and body_of(told[0]).startswith("Muninn does not answer here: ")
    assert ALICE.removeprefix("@") in body_of(told[0])
    assert "bot.command_room_askers" in body_of(told[0])


async def test_fast_command_room_reply_is_withheld_when_an_outsider_joins_meanwhile(
    make_bot: MakeBot, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (issue 37 item 1): the command room is read again just before a reply is
    sent; someone who joined while the command ran gets no results, only the withheld
    notice, and the cause is logged at error level."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room = bot.rooms.create_room(ALICE, alias="#ops")
    bot.rooms.say(room, ALICE, "the okapi vault code is 4471")

    async def outsider_joins() -> None:
        bot.rooms.join(commands, ALICE)  # the cached verdict still says "served"

    bot.before_recheck(outsider_joins)
    with caplog.at_level(logging.ERROR, logger="muninn.chat"):
        reply = await bot.reply(commands, PERSONA, "!search okapi vault in:#ops")
    assert body_of(reply) == COMMAND_ROOM_CHANGED and "4471" not in str(reply)
    assert any(commands in r.getMessage() and ALICE in r.getMessage() for r in caplog.records)


async def test_fast_a_command_older_than_the_command_age_is_ignored(make_bot: MakeBot) -> None:
    """A command older than `MAX_COMMAND_AGE_MS` (15 minutes) is history, not a question: no
    reply; one just inside the age is answered."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    for age, answered in ((MAX_COMMAND_AGE_MS + 1000, False), (MAX_COMMAND_AGE_MS - 60_000, True)):
        command = bot.rooms.say(room, ALICE, "!help")
        event = bot.rooms.event(room, command)
        event["origin_server_ts"] -= age
        await bot.handle_event(event)
        assert len(bot.replies(command)) == int(answered), age


async def test_fast_own_events_are_no_commands_and_a_duplicate_is_answered_once(
    make_bot: MakeBot,
) -> None:
    """The bot's own events are never commands; a command delivered twice (a retried
    transaction) is answered once."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    assert await bot.ask(room, BOT, "!help") == []
    fresh = bot.rooms.say(room, ALICE, "!help")
    for _ in range(2):
        await bot.handle(room, fresh)
    assert len(bot.replies(fresh)) == 1


async def test_fast_a_command_answered_in_the_log_is_not_answered_again(
    make_bot: MakeBot,
) -> None:
    """ "Already answered" is read from the room log: a handler without the memory of the
    first (as after a restart) sees its reply there and stays silent."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    [_] = await bot.ask(room, ALICE, "!search lunch")
    command = bot.asked[-1]
    restarted = make_bot()
    restarted.rooms.logs, restarted.rooms.aliases = bot.rooms.logs, bot.rooms.aliases
    await restarted.handle(room, command)
    assert restarted.sender.sent == []


# ---------------------------------------------------------------- how often


async def test_fast_rate_limit_sends_one_notice_then_silence(make_bot: MakeBot) -> None:
    """At most `rate_per_minute` commands an asker a minute: the next gets one polite notice,
    later ones nothing; another asker is not held back."""
    bot = make_bot(rate_per_minute=2)
    room = bot.rooms.create_room(ALICE, members=[BOB])
    for _ in range(2):
        [reply] = await bot.ask(room, ALICE, "!help")
        assert "faster than" not in body_of(reply)
    [notice] = await bot.ask(room, ALICE, "!help")
    assert "faster than 2 a minute" in body_of(notice)
    assert await bot.ask(room, ALICE, "!help") == []
    assert await bot.ask(room, ALICE, "!search lunch") == []
    assert len(await bot.ask(room, BOB, "!help")) == 1


# ---------------------------------------------------------------- parsing


async def test_bot_command_room_answers_unknown_commands(make_bot: MakeBot) -> None:
    """An unknown !word gets a usage reply in the command room (and silence elsewhere)."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    reply = await bot.reply(commands, PERSONA, "!frobnicate")
    assert "no command !frobnicate; try !help" in body_of(reply)
    assert "no command" in reply["org.muninn.results"]["error"]


async def test_bot_stays_silent_on_unknown_commands_in_rooms(make_bot: MakeBot) -> None:
    """Other bots use `!` too: an unknown !word in an ordinary room gets no reply, but a typo
    of Muninn's own command is answered (regression: `!serach backups` got silence)."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    assert await bot.ask(room, ALICE, "!weather Oslo") == []
    typo = await bot.reply(room, ALICE, "!serach backups")
    assert "no command !serach; did you mean !search?" in body_of(typo)


async def test_bot_refuses_a_poison_regex_with_its_limit(make_bot: MakeBot) -> None:
    """Regression: `!search /a{1000000}/` (20 bytes) compiled a million-element pattern (~250
    MB kept), and every later `!pins` re-parsed it. It gets a usage reply naming the limit,
    and the room's board still answers with the poison message in its log."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    reply = await bot.reply(room, ALICE, "!search /a{1000000}/")
    assert "repeat count is at most 1000" in body_of(reply)
    assert "Usage: !search" in body_of(reply)
    reply = await bot.reply(room, ALICE, "!search /(?:x{1000}){1000}/")
    assert "at most 10000" in body_of(reply)
    board = await bot.reply(room, ALICE, "!pins")
    assert "nothing pinned" in body_of(board)


async def test_bot_command_room_regex_needs_a_room(make_bot: MakeBot) -> None:
    """Regression: a /regex/ reads rooms' latest messages, never the index, so in the command
    room without `in:` it always answered "no results" for text that is there. It now says
    to name the room, and with `in:` it finds the message."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room = bot.rooms.create_room(ALICE, alias="#regex")
    found = bot.rooms.say(room, ALICE, "the capybara escaped again")
    reply = await bot.reply(commands, PERSONA, "!search /capy.ara/")
    assert "in:#room" in body_of(reply) and "no results" not in body_of(reply).lower()
    alias = (await bot.verdicts.get(room)).state
    assert alias is not None and alias.canonical_alias is not None
    command = f"!search /capy.ara/ in:{alias.canonical_alias}"
    reply = await bot.reply(commands, PERSONA, command)
    assert found in str(reply["org.muninn.results"])
