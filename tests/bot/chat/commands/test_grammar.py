"""The command grammar, docs/ARCHITECTURE.md §4.6: every form parses to a typed command, every
mistake to usage (a `/regex/`'s bounds: test_patterns.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from bot.chat.commands.grammar import COMMANDS, command_name, did_you_mean, help_text, parse
from bot.chat.commands.incoming import incoming
from bot.chat.commands.records import (
    HelpCommand,
    PinCommand,
    PinsCommand,
    SearchCommand,
    UnknownCommand,
    UnpinCommand,
    UsageError,
)
from bot.errors import CommandError
from tests.bot.chat.commands.parsing import NOW, run

HOUR, DAY = 3_600_000, 86_400_000


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


def search(**fields: object) -> SearchCommand:
    return SearchCommand(**fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------- what is a command at all


@pytest.mark.parametrize(
    "body",
    ["hello", "", "!", "! search x", "!!", "!search, x", "!1abc", "say !search x", "?search x"],
)
def test_parse_not_a_command_is_none(body: str) -> None:
    """Ordinary messages, and shapes that are not `!word`, are not commands."""
    assert run(body) is None


@pytest.mark.parametrize("body", ["!foo", "!FOO bar", "!frobnicate deploy"])
def test_parse_unknown_command_is_a_usage_error(body: str) -> None:
    """`!word` for an unknown word is a typed usage error pointing at help."""
    with pytest.raises(UnknownCommand, match=r"^no command !\w+; try !help$") as caught:
        run(body)
    assert isinstance(caught.value, CommandError)
    assert caught.value.suggestion is None


@pytest.mark.parametrize(
    ("body", "meant"),
    [("!serach backups", "search"), ("!searchx deploy", "search"), ("!unpinn", "unpin")],
)
def test_parse_a_typo_of_a_command_says_did_you_mean(body: str, meant: str) -> None:
    """A typo of a Muninn command names the command (regression: silence)."""
    with pytest.raises(UnknownCommand, match=f"did you mean !{meant}\\?$") as caught:
        run(body)
    assert caught.value.suggestion == meant


@pytest.mark.parametrize(
    ("word", "meant"),
    [("serach", "search"), ("hlep", "help"), ("unpni", "unpin"), ("boards", "pins")],
)
def test_did_you_mean_finds_the_command_a_typo_is_of(word: str, meant: str) -> None:
    assert did_you_mean(word) == meant


@pytest.mark.parametrize("word", ["frobnicate", "weather", "ban", "kick", "remind"])
def test_did_you_mean_is_none_for_another_bots_word(word: str) -> None:
    assert did_you_mean(word) is None


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("!SEARCH x", SearchCommand),
        ("!s x", SearchCommand),
        ("!find x", SearchCommand),
        ("!Pins", PinsCommand),
        ("!board", PinsCommand),
        ("  !help  ", HelpCommand),
    ],
)
def test_parse_names_aliases_and_case(body: str, kind: type) -> None:
    """Command names are case-insensitive and aliases work."""
    assert isinstance(run(body), kind)


def _event(body: str, reply_to: str | None) -> dict[str, object]:
    content: dict[str, object] = {"msgtype": "m.text", "body": body}
    if reply_to is not None:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return {
        "type": "m.room.message",
        "event_id": "$cmd",
        "sender": "@alice:example.org",
        "origin_server_ts": NOW,
        "room_id": "!r:example.org",
        "content": content,
    }


@pytest.mark.parametrize(
    ("body", "reply_to", "kind"),
    [
        # A reply whose client still writes the spec's fallback quote before the command.
        ("> <@bob:example.org> quoted text\n> more\n\n!pin keep this", "$p", PinCommand),
        ("> * <@bob:example.org> waves\n\n!pin", "$p", PinCommand),  # an emote's fallback
        ("> <@bob:example.org> no blank line\n!pin", "$p", PinCommand),
        ("!pin #deploy", "$p", PinCommand),  # a reply without a fallback (spec v1.13)
        # Not a reply: a leading quote is the sender's own, and the message is no command.
        ("> <@bob:example.org> quoted text\n\n!search x", None, None),
        ("> as the runbook says\n\n!search x", None, None),
    ],
)
def test_command_sent_as_a_reply(body: str, reply_to: str | None, kind: type | None) -> None:
    """The bot reads what the sender typed: a reply's fallback quote (whatever its shape) is
    skipped, and only in a reply; a plain message starting with `> ` is not a command."""
    msg = incoming(_event(body, reply_to), "@muninn:example.org", "!")
    if kind is None:
        assert msg is None
        return
    assert msg is not None
    assert isinstance(run(msg.body), kind)


def test_parse_custom_prefix() -> None:
    """The configured prefix replaces `!` in parsing and in usage text."""
    assert run("?search x", prefix="?") == search(texts=("x",))
    with pytest.raises(UsageError, match=r"Usage: \?search"):
        run("?search", prefix="?")


# ---------------------------------------------------------------- !search


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("!search deploy", search(texts=("deploy",))),
        ("!search deploy  the\tserver", search(texts=("deploy the server",))),
        ('!search "exact  words" here', search(texts=("exact  words here",))),
        ("!search “curly quoted”", search(texts=("curly quoted",))),
        ("!search a | b|c", search(texts=("a", "b", "c"))),
        ('!search "a | b"', search(texts=("a | b",))),
        ('!search "from:@x"', search(texts=("from:@x",))),
        ("!search https://example.org/x 10:30", search(texts=("https://example.org/x 10:30",))),
        ("!search from:@alice x", search(texts=("x",), sender="@alice:example.org")),
        ("!search from:@alice:other.org x", search(texts=("x",), sender="@alice:other.org")),
        # copied out of a reply: invisible word joiners and zero-width spaces are ignored
        ("!search from:@\u2060alice x", search(texts=("x",), sender="@alice:example.org")),
        ("!search from:@al\u200bice\ufeff x", search(texts=("x",), sender="@alice:example.org")),
        ("!search FROM:alice x", search(texts=("x",), sender="@alice:example.org")),
        ("!search from:@a:[::1]:8448 x", search(texts=("x",), sender="@a:[::1]:8448")),
        ("!search before:2026-11-01 x", search(texts=("x",), before_ms=ms(2026, 11, 1))),
        ("!search After:2026-11-01 x", search(texts=("x",), after_ms=ms(2026, 11, 2))),
        (
            "!search during:2026-11 x",
            search(texts=("x",), after_ms=ms(2026, 11, 1), before_ms=ms(2026, 12, 1)),
        ),
        (
            "!search during:2026-02 x",
            search(texts=("x",), after_ms=ms(2026, 2, 1), before_ms=ms(2026, 3, 1)),
        ),
        (
            "!search during:2026-11-03 x",
            search(texts=("x",), after_ms=ms(2026, 11, 3), before_ms=ms(2026, 11, 4)),
        ),
        (
            "!search after:2026-11-01T10:30 x",
            search(texts=("x",), after_ms=ms(2026, 11, 1, 10, 30)),
        ),
        (
            "!search during:2026-11-01t10:30 x",
            search(
                texts=("x",), after_ms=ms(2026, 11, 1, 10, 30), before_ms=ms(2026, 11, 1, 10, 31)
            ),
        ),
        ("!search after:7d x", search(texts=("x",), after_ms=NOW - 7 * DAY)),
        ("!search after:2W x", search(texts=("x",), after_ms=NOW - 14 * DAY)),
        ("!search before:12h x", search(texts=("x",), before_ms=NOW - 12 * HOUR)),
        (
            "!search during:7d x",
            search(texts=("x",), after_ms=NOW - 7 * DAY, before_ms=NOW + 1),
        ),
        (
            "!search during:today x",
            search(texts=("x",), after_ms=ms(2026, 11, 15), before_ms=ms(2026, 11, 16)),
        ),
        (
            "!search during:Yesterday x",
            search(texts=("x",), after_ms=ms(2026, 11, 14), before_ms=ms(2026, 11, 15)),
        ),
        (
            "!search after:2026-11-01 after:2026-11-05 before:2026-11-10 x",
            search(texts=("x",), after_ms=ms(2026, 11, 6), before_ms=ms(2026, 11, 10)),
        ),
        ("!search limit:20 x", search(texts=("x",), limit=20)),
        ("!search LIMIT:50 x", search(texts=("x",), limit=50)),
        ("!search limit:007 x", search(texts=("x",), limit=7)),
        ("!search /dep.oy/", search(regex="dep.oy")),
        ("!search /Dep/i", search(regex="(?i)Dep")),
        ("!search /a\\/b/", search(regex="a\\/b")),
        ("!search /two words/ from:@bob", search(regex="two words", sender="@bob:example.org")),
        ('!search "/usr/bin"', search(texts=("/usr/bin",))),
        # issue 44: operators alone list the latest messages they keep, newest first
        ("!search from:@alice", search(sender="@alice:example.org", sort="recent")),
        (
            "!search from:bob after:7d",
            search(sender="@bob:example.org", after_ms=NOW - 7 * DAY, sort="recent"),
        ),
    ],
)
def test_parse_search_forms(body: str, expected: SearchCommand) -> None:
    """Every documented `!search` form becomes the expected typed command."""
    assert run(body) == expected


@pytest.mark.parametrize(
    ("body", "rooms"),
    [
        ("!search in:#dev x", ("#dev:example.org",)),
        ("!search in:#dev:other.org x", ("#dev:other.org",)),
        ("!search in:!abc:example.org IN:!V12opaque x", ("!abc:example.org", "!V12opaque")),
        ("!search in:#dev in:#dev x", ("#dev:example.org",)),
    ],
)
def test_parse_search_in_room_in_the_command_room(body: str, rooms: tuple[str, ...]) -> None:
    """`in:` takes aliases (completed with the server name) and room ids, v12 included."""
    assert run(body, command_room=True) == search(texts=("x",), rooms=rooms)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("!search", "nothing to search for"),
        ("!search after:7d", "nothing to search for: give the words to find, or from:@user"),
        ("!search -is:thread", "nothing to search for"),
        ('!search ""', "nothing to search for"),
        ("!search a | | b", "empty text between"),
        ("!search a |", "empty text between"),
        ("!search | a", "empty text between"),
        ("!search " + " | ".join("abcdefghi"), "at most 8 texts"),
        ("!search " + "x" * 1001, "at most 1000 bytes"),
        ('!search "unterminated', "unterminated quote"),
        ("!search /usr/bin", "unknown /regex/ flag"),
        ("!search /unterminated", "unterminated /regex/"),
        ("!search /a/x", "unknown /regex/ flag"),
        ("!search /a/i/", "unexpected"),
        ("!search //", "empty /regex/"),
        ("!search /a{1000000}/", "repeat count is at most 1000, not 1000000"),
        ("!search /(?:x{1000}){1000}/", "at most 10000"),
        ("!search /((a{100}){10}){11}/i", "at most 10000"),
        ("!search /\\w{١٠٠٠٠٠}/", "repeat count is at most 1000"),
        ("!search /a/ /b/", "only one /regex/"),
        ("!search /a/ text", "either a /regex/ or text"),
        ("!search /a/ | b", "either a /regex/ or text"),
        ("!search from: x", "from: needs a value"),
        ("!search from:@a from:@b x", "only one from:"),
        ("!search from:@a@b x", "from: takes"),
        ("!search before:2026-13-01 x", "not a date"),
        ("!search before:2026-02-30 x", "not a date"),
        ("!search before:2026-1-1 x", "not a date"),
        ("!search before:soon x", "not a date"),
        ("!search during:2026-11-01T25:00 x", "not a date"),
        ("!search after:999999d x", "too far"),
        ("!search after:2026-11-10 before:2026-11-01 x", "no time"),
        # issue 36: "from the 1st to the 2nd" read as after/before leaves nothing: say during:
        ("!search after:2026-11-01 before:2026-11-02 x", "no time .*write during:DATE"),
        ("!search limit:0 x", "limit: takes a number from 1 to 50"),
        ("!search limit:51 x", "limit: takes a number"),
        ("!search limit:ten x", "limit: takes a number"),
        ("!search limit:² x", "limit: takes a number from 1 to 50"),  # isdigit, not int
        pytest.param("!search limit:" + "9" * 5000 + " x", "from 1 to 50", id="limit-5000-digits"),
        ("!search in:#dev x", "only available in the command room"),
    ],
)
def test_parse_search_malformed(body: str, problem: str) -> None:
    """Malformed searches are a UsageError naming the problem, with the usage line."""
    with pytest.raises(UsageError, match=problem) as caught:
        run(body)
    assert "Usage: !search" in str(caught.value)


def test_parse_search_in_room_malformed_in_the_command_room() -> None:
    """`in:` needs a room sigil even where it is allowed."""
    with pytest.raises(UsageError, match="in: takes #alias or !roomid"):
        run("!search in:dev x", command_room=True)


def test_parse_search_bounds_in_rooms() -> None:
    """Regression: any number of `in:` rooms each cost a room log read. At most 8 distinct
    rooms; a repeated one is read once."""
    nine = " ".join(f"in:#r{n}" for n in range(9))
    with pytest.raises(UsageError, match="at most 8 in: rooms"):
        run(f"!search {nine} x", command_room=True)
    eight = " ".join(f"in:#r{n % 8}" for n in range(40))
    command = run(f"!search {eight} x", command_room=True)
    assert isinstance(command, SearchCommand) and len(command.rooms) == 8


def test_parse_search_localpart_kept_without_server_name() -> None:
    """Without a known server name, `@alice` stays a localpart for the handler to complete."""
    parsed = parse("!search from:@alice x", now_ms=NOW, in_command_room=False)
    assert parsed == search(texts=("x",), sender="@alice")


def test_parse_error_echo_cannot_ping() -> None:
    """User text echoed in an error message is neutralised."""
    with pytest.raises(UsageError) as caught:
        run("!search limit:@room x")
    assert "@room" not in str(caught.value)


# ---------------------------------------------------------------- !pin / !unpin / !pins / !help


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("!pin", PinCommand(None, None, "")),
        ("!pin ^2", PinCommand(2, None, "")),
        ("!pin ^", PinCommand(1, None, "")),
        ("!pin #Docs", PinCommand(None, "docs", "")),
        ("!pin ^3 #docs remember this", PinCommand(3, "docs", "remember this")),
        ("!pin #docs ^3 remember  this", PinCommand(3, "docs", "remember  this")),
        ("!pin note with #hashtag", PinCommand(None, None, "note with #hashtag")),
        ("!pin #a #b note", PinCommand(None, "a", "#b note")),
        ("!pin multi\nline note", PinCommand(None, None, "multi\nline note")),
    ],
)
def test_parse_pin_forms(body: str, expected: PinCommand) -> None:
    """`!pin [^N] [#label] [note]` in either order of ^N and label; the note is verbatim."""
    assert run(body) == expected


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("!pin ^0", "N from 1 to 50"),
        ("!pin ^51", "N from 1 to 50"),
        ("!pin ^x", "N from 1 to 50"),
        ("!pin ^²", "N from 1 to 50"),  # regression: `str.isdigit` took it, `int` raised
        pytest.param("!pin ^" + "9" * 5000, "N from 1 to 50", id="offset-5000-digits"),
        ("!unpin ^³", "N from 1 to 50"),
        ("!pin ^1 ^2", "only one ^N"),
        ("!pin #bad:label", "a label is #word"),
        ("!pin #" + "x" * 33, "a label is #word"),
    ],
)
def test_parse_pin_malformed(body: str, problem: str) -> None:
    """Bad offsets and labels are usage errors naming the bound."""
    with pytest.raises(UsageError, match=re.escape(problem)):
        run(body)


@pytest.mark.parametrize(("body", "offset"), [("!unpin", None), ("!unpin ^2", 2), ("!UNPIN ^", 1)])
def test_parse_unpin_forms(body: str, offset: int | None) -> None:
    """`!unpin` records the ^N it was given; no target is left for the handler to refuse."""
    assert run(body) == UnpinCommand(offset)


@pytest.mark.parametrize("body", ["!unpin ^2 extra", "!unpin note", "!unpin ^0"])
def test_parse_unpin_malformed(body: str) -> None:
    """`!unpin` takes nothing but ^N."""
    with pytest.raises(UsageError, match="Usage: !unpin"):
        run(body)


@pytest.mark.parametrize(
    ("body", "command_room", "expected"),
    [
        ("!pins", False, PinsCommand()),
        ("!pins #Docs", False, PinsCommand(label="docs")),
        ("!pins backup  keys", False, PinsCommand(text="backup keys")),
        ('!pins #docs "in:progress"', False, PinsCommand(label="docs", text="in:progress")),
        ("!pins #a #b", False, PinsCommand(label="a", text="#b")),
        ("!pins in:#dev", True, PinsCommand(room="#dev:example.org")),
        ("!pins in:!v12 #ops", True, PinsCommand(label="ops", room="!v12")),
    ],
)
def test_parse_pins_forms(body: str, command_room: bool, expected: PinsCommand) -> None:
    """`!pins [#label] [text]`, and `in:#room` in the command room."""
    assert run(body, command_room=command_room) == expected


@pytest.mark.parametrize(
    ("body", "command_room", "problem"),
    [
        ("!pins in:#dev", False, "only available in the command room"),
        ("!pins in:#a in:#b", True, "only one in:"),
        ("!pins #bad!label", False, "a label is #word"),
        ('!pins "open', False, "unterminated quote"),
    ],
)
def test_parse_pins_malformed(body: str, command_room: bool, problem: str) -> None:
    """Another room's board is only for the command room; bad labels are refused."""
    with pytest.raises(UsageError, match=problem):
        run(body, command_room=command_room)


@pytest.mark.parametrize(
    ("body", "topic"), [("!help", None), ("!help search", "search"), ("!help !s", "search")]
)
def test_parse_help_forms(body: str, topic: str | None) -> None:
    """`!help [command]` names a command by name or alias."""
    assert run(body) == HelpCommand(topic)


def test_parse_help_unknown_topic() -> None:
    """Help for a command that does not exist is a usage error."""
    with pytest.raises(UsageError, match="no command nope"):
        run("!help nope")


# ---------------------------------------------------------------- declarations


def test_help_text_is_generated_from_the_declarations() -> None:
    """Every declared command appears in help; room-only arguments only in the command room."""
    ordinary, command_room = help_text(), help_text(in_command_room=True)
    for spec in COMMANDS:
        assert spec.usage("!", in_command_room=False) in ordinary
        assert spec.usage("!", in_command_room=True) in command_room
    assert "in:#room" not in ordinary
    assert "in:#room" in command_room


def test_command_help_lists_arguments_and_aliases() -> None:
    """A command's detailed help shows each argument's help and its aliases."""
    details = COMMANDS[0].help()
    assert "also: !s, !find" in details
    assert "(command room only)" in details
    assert all(arg.syntax in details for arg in COMMANDS[0].args)


@pytest.mark.parametrize(
    ("body", "name"), [("!s x", "search"), ("!PIN", "pin"), ("!nope", None), ("hi", None)]
)
def test_command_name_finds_muninn_commands_only(body: str, name: str | None) -> None:
    """`command_name` recognises Muninn's commands and never raises."""
    assert command_name(body) == name
