"""The command policy's replies, in process (tests/bot/fastkit.py, no Synapse): their shape,
what they never carry (a pasted token, a ping, an invisible character), the reply budget, a
reply the homeserver refuses, and the pin commands' answers.

Moved here from the real-Synapse files where a test was only about the reply (its name and
assertions kept); the homeserver's refusal of an event over 64 KB is the recording sender's
(`RecordingSender.refuse`), as Synapse answers it.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from mautrix.types import JoinRule

from bot.chat.content import content_size
from bot.chat.replies import REPLY_BUDGET
from ingest.errors import MatrixError
from ingest.types import RoomID
from tests.bot.fastkit import SERVER, FastBot
from tests.ingest.rules.test_scrub import DISGUISED

ALICE = f"@alice:{SERVER}"
PERSONA = f"@persona-1:{SERVER}"
ASKERS = {"command_room_askers": [r"@persona-.*:muninn\.test"]}
MAX_EVENT = 65_536  # bytes: Synapse refuses a larger event with 413 M_TOO_LARGE

MakeBot = Callable[..., FastBot]


def body_of(reply: Mapping[str, Any]) -> str:
    return str(reply["body"])


def command_room(bot: FastBot) -> RoomID:
    room = bot.rooms.create_room(PERSONA, join_rule=JoinRule.INVITE, visibility="joined")
    bot.serve_command_room(room)
    return room


def aliased_room(bot: FastBot, local: str = "pins") -> tuple[RoomID, str]:
    alias = f"#{local}:{SERVER}"
    return bot.rooms.create_room(ALICE, alias=alias), alias


def too_large(content: Mapping[str, Any]) -> MatrixError | None:
    if len(json.dumps(content).encode()) <= MAX_EVENT:
        return None
    return MatrixError("PUT send -> 413 M_TOO_LARGE", status=413, errcode="M_TOO_LARGE")


async def board(bot: FastBot, commands: RoomID, alias: str) -> list[dict[str, Any]]:
    reply = await bot.reply(commands, PERSONA, f"!pins in:{alias}")
    return list(reply["org.muninn.results"]["pins"])


# ---------------------------------------------------------------- shape


async def test_bot_help_carries_no_invisible_characters(make_bot: MakeBot) -> None:
    """`!help search` shows `from:@user` as it is typed (regression: a U+2060 after the `@`,
    copied along, made the search silently empty), and still mentions nobody."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    content = await bot.reply(room, ALICE, "!help search")
    for text in (content["body"], content["formatted_body"]):
        assert "[from:@user]" in text
        assert not [c for c in text if unicodedata.category(c) == "Cf"], text
    assert content["m.mentions"] == {}


async def test_fast_help_search_is_a_list_with_its_syntax_as_code(make_bot: MakeBot) -> None:
    """Issue 36 item 10: `!help search` in HTML is a list of the operators, each written as
    code, not one paragraph; `!help` lists the commands."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    html = (await bot.reply(room, ALICE, "!help search"))["formatted_body"]
    assert html.startswith("<p><code>!search ")
    assert "<ul><li>" in html and "<li><code>[from:@user]</code>: " in html
    assert "e.g. <code>!search " in html and "<br>" not in html
    listing = (await bot.reply(room, ALICE, "!help"))["formatted_body"]
    assert listing.startswith("<ul><li><code>!search ") and listing.count("<li>") >= 5


async def test_fast_help_search_writes_its_sentences_as_prose_not_code(make_bot: MakeBot) -> None:
    """Issue 44, regression: `!help search`'s closing sentences are paragraphs of prose in
    HTML (`<code>Each result is one message that matched</code>` before), after a blank line
    in the text."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    content = await bot.reply(room, ALICE, "!help search")
    html = content["formatted_body"]
    assert "<p>Each result is one message that matched: by its words" in html
    assert "<code>Each result" not in html and "<code>A reply with more" not in html
    assert "\n\nEach result is one message that matched" in content["body"]
    assert "<li><code>[sort:recent]</code>: " in html


async def test_fast_every_reply_is_a_notice_replying_in_its_thread(make_bot: MakeBot) -> None:
    """A reply is an `m.notice` answering the command (`m.in_reply_to`); in a thread it stays
    in the thread, its reply marked as the fallback."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    root = bot.rooms.say(room, ALICE, "thread root: release checklist")
    for relation in ({}, {"thread": root}):
        await bot.reply(room, ALICE, "!help", **relation)
        command = bot.asked[-1]
        [sent] = bot.sent_to(command)
        content = sent.content
        assert content["msgtype"] == "m.notice" and content["format"] == "org.matrix.custom.html"
        rel = content["m.relates_to"]
        assert rel["m.in_reply_to"]["event_id"] == command
        if relation:
            assert rel["rel_type"] == "m.thread" and rel["event_id"] == root
            assert rel["is_falling_back"] is True


async def test_bot_html_and_room_mentions_arrive_escaped(make_bot: MakeBot) -> None:
    """Quoted HTML is escaped and `@room` / mxids in quoted text cannot ping."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    bot.rooms.say(
        room, ALICE, "<b>giraffe</b> <img src=x onerror=alert(1)> @room @bob:muninn.test"
    )
    content = await bot.reply(room, ALICE, "!search giraffe")
    html = content["formatted_body"]
    assert "<img" not in html and "<b>giraffe" not in html
    assert "&lt;img" in html and "&lt;b&gt;" in html
    assert "@room" not in content["body"] and "@room" not in html
    assert "@\u2060room" in content["body"]
    assert "@bob:muninn.test" not in content["body"]
    assert content["m.mentions"] == {}


async def test_bot_never_echoes_a_pasted_token(make_bot: MakeBot) -> None:
    """A token pasted into a command — as the query, or as a bad argument a usage error
    quotes — is scrubbed from the reply, in a room and in the command room's results."""
    secret = "syt_bXVuaW5u_AbCdEfGhIjKlMnOpQrSt_0a1b2c"
    bot = make_bot(**ASKERS)
    room, commands = bot.rooms.create_room(ALICE), command_room(bot)
    for user, where in ((ALICE, room), (PERSONA, commands)):
        for command in (f"!search {secret}", f"!search lunch in:{secret}", f"!pin {secret}"):
            reply = await bot.reply(where, user, command)
            assert secret not in str(reply), (where, command)


async def test_bot_never_quotes_a_disguised_secret(make_bot: MakeBot) -> None:
    """Regression (issue 37 item 2): a secret carried past the scrub by an invisible,
    full-width or look-alike character was quoted from the room's log; none is now, in a
    room's reply or in the command room's results."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    for text, _, _ in DISGUISED:
        bot.rooms.say(room, ALICE, f"vaultnote {text}")
    replies = [
        await bot.reply(room, ALICE, "!search vaultnote limit:50"),
        await bot.reply(commands, PERSONA, f"!search vaultnote in:{alias} limit:50"),
    ]
    for reply in replies:
        assert "[redacted:" in str(reply)
        for text, pieces, _ in DISGUISED:
            assert not any(piece in str(reply) for piece in pieces), text


async def test_bot_names_the_user_id_beside_a_name_that_could_pass_for_another(
    make_bot: MakeBot,
) -> None:
    """Regression (issue 37 item 8): a member renamed "Alice" was quoted as Alice, also for
    what it said before the rename, and a nick shaped like `@ops:server` read as that user.
    `!search` and `!pins` show the user id beside such a name; the real Alice too."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    bot.rooms.join(room, ALICE, "Alice")
    mallory, ops = f"@mallory:{SERVER}", f"@eve:{SERVER}"
    bot.rooms.join(room, mallory, "Mallory")
    bot.rooms.join(room, ops, f"@ops:{SERVER}")
    bot.rooms.say(room, mallory, "send the okapi invoice to my new account")
    bot.rooms.say(room, ops, "okapi maintenance is announced for tonight")
    bot.rooms.join(room, mallory, "Alice")  # the rename, after the message
    await bot.reply(room, ALICE, "!pin okapi budget is approved")
    reply = body_of(await bot.reply(room, ALICE, "!search okapi limit:10"))
    assert f"Alice ({mallory}): send the" in reply.replace("\u2060", "")
    assert f"@ops:{SERVER} ({ops}): **okapi** maintenance" in reply.replace("\u2060", "")
    board = body_of(await bot.reply(room, ALICE, "!pins"))
    assert f"Alice ({ALICE}):" in board.replace("\u2060", "")


async def test_bot_command_room_reads_a_room_named_twice_once(make_bot: MakeBot) -> None:
    """Regression: `in:` a room's alias and `in:` its id read (and scanned) it twice. One read,
    one scan in the reply, one hit."""
    bot = make_bot(**ASKERS)
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    found = bot.rooms.say(room, ALICE, "an echidna dug under the fence")
    reply = await bot.reply(commands, PERSONA, f"!search echidna in:{alias} in:{room}")
    assert body_of(reply).count("scanned") == 1
    hits = reply["org.muninn.results"]["hits"]
    assert [h["best_event_id"] for h in hits] == [found]
    assert bot.rooms.reads.count(room) == 1


# ---------------------------------------------------------------- the budget, and refusals


async def test_bot_large_replies_arrive_cut_to_fit(make_bot: MakeBot) -> None:
    """Regression: a command-room search over large messages carried every body in its JSON
    and two 15 KB pin notes made `!pins` 120 KB: Synapse refused both (413) and the asker
    heard nothing. Both replies arrive, under the budget, saying what was cut."""
    bot = make_bot(**ASKERS)
    bot.sender.refuse = too_large
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    for i in range(40):  # a read keeps each message's first 2,000 characters: 80 KB in all
        bot.rooms.say(room, ALICE, f"kiwi report {i}: " + "the orchard is fine. " * 400)
    reply = await bot.reply(commands, PERSONA, f"!search kiwi in:{alias} limit:50")
    assert content_size(reply) <= REPLY_BUDGET
    results = reply["org.muninn.results"]
    assert len(results["hits"]) >= 12 and results["truncated"]["texts_shortened"] >= 12
    for note in ("first", "second"):
        await bot.reply(room, ALICE, f"!pin #big {note} " + "note text " * 1500)
    shown = await bot.reply(room, ALICE, "!pins")
    assert content_size(shown) <= REPLY_BUDGET
    assert "first note text" in body_of(shown) and "second note text" in body_of(shown)
    assert "…" in body_of(shown)


async def test_bot_a_refused_reply_is_followed_by_a_short_error(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply the homeserver still refuses (here: the budget lifted, so Synapse answers
    413 M_TOO_LARGE) is followed by a short notice naming why, never by silence."""
    monkeypatch.setattr("bot.chat.replies.budget.REPLY_BUDGET", 10_000_000)
    bot = make_bot(**ASKERS)
    bot.sender.refuse = too_large
    commands = command_room(bot)
    room, alias = aliased_room(bot)
    for i in range(50):  # the command room's JSON carries each body whole: 100 KB
        bot.rooms.say(room, ALICE, f"kiwi report {i}: " + "the orchard is fine. " * 400)
    reply = await bot.reply(commands, PERSONA, f"!search kiwi in:{alias} limit:50")
    assert "refused this answer (M_TOO_LARGE)" in body_of(reply)
    assert reply["org.muninn.results"] == {"error": body_of(reply)}
