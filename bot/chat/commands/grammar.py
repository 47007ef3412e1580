"""The grammar declared once (`COMMANDS`, one named declaration a command), and its entry
points: `parse_command` (with the declaration that read it, which the handler is bound to),
`parse`, `command_name`, `help_text`."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from bot.chat.commands.arguments import MAX_OFFSET, ArgumentError, echo
from bot.chat.commands.builders import build_pin, build_pins, build_search, build_unpin
from bot.chat.commands.dates import DATE_HELP
from bot.chat.commands.records import MAX_ROOMS, Command, HelpCommand, MoreCommand, UnknownCommand
from bot.chat.commands.spec import ArgSpec, CommandSpec, Context
from ingest.rules.events import is_command
from ingest.search.query import DEFAULT_LIMIT, MAX_LIMIT, MAX_TEXTS

__all__ = [
    "COMMANDS",
    "HELP",
    "MORE",
    "PIN",
    "PINS",
    "SEARCH",
    "UNPIN",
    "Parsed",
    "command_name",
    "did_you_mean",
    "help_text",
    "parse",
    "parse_command",
]


def _build_help(ctx: Context, args: str) -> HelpCommand:
    words = args.split()
    if not words:
        return HelpCommand(None)
    topic = words[0].removeprefix(ctx.prefix).casefold()
    spec = _LOOKUP.get(topic)
    if spec is None or len(words) > 1:
        raise ctx.error(f"no command {echo(words[0])}")
    return HelpCommand(spec.name)


def _build_more(ctx: Context, args: str) -> MoreCommand:
    if args.strip():
        raise ctx.error("more takes nothing: it shows the next page of your last search here")
    return MoreCommand()


SEARCH = CommandSpec(
    "search",
    "search this room's history (every indexed room, in the command room)",
    (
        ArgSpec("[from:@user]", "only messages from this user (@user means this server)"),
        ArgSpec("[before:DATE]", f"before DATE; DATE is {DATE_HELP}"),
        ArgSpec("[after:DATE]", "after DATE (after:2026-11-01 is from 11-02; 7d: last 7 days)"),
        ArgSpec("[during:DATE]", "within DATE (a day, a month, or the last 7d)"),
        ArgSpec(
            "[in:#room]",
            f"search that room; repeat for up to {MAX_ROOMS}",
            command_room_only=True,
        ),
        ArgSpec("[limit:N]", f"N messages a page (default {DEFAULT_LIMIT}, max {MAX_LIMIT})"),
        ArgSpec("[-word]", 'leave out messages with the word; -"two words", -from:@user'),
        ArgSpec("[has:link]", "only messages with a link"),
        ArgSpec(
            "[has:image]",
            "only images; has:file, has:video, has:audio alike (several: any of them)",
        ),
        ArgSpec("[is:thread]", "only messages in threads (-is:thread: outside them)"),
        ArgSpec("[mentions:@user]", "only messages that mention the user"),
        ArgSpec("[sort:recent]", "every message with the words, newest first"),
        ArgSpec("<text> [| <text> …]", f'up to {MAX_TEXTS} alternatives; "quote" exact words'),
        ArgSpec("[word*]", "words starting with it (at least 3 letters before the *)"),
        ArgSpec("or /regex/[i]", "a regular expression instead of text (i: ignore case)"),
    ),
    build_search,
    aliases=("s", "find"),
    examples=(
        "backup* -test",
        "deploy from:@alice after:7d sort:recent",
        "has:link mentions:@bob release",
        "budget has:file",
        "outage is:thread | incident",
    ),
    more=(
        "Each result is one message that matched: by its words, an operator or the regex, "
        "or, where no message has the words, the one nearest the question in meaning: "
        "one of theirs where the question names people, and the reply after a line that "
        "asked the same question.",
        "A reply with more results says so: !more within 10 minutes shows the next page, "
        "every matching message once, until no more results.",
        "Without words, from:, has:, mentions: or is:thread (in the command room with "
        "in:#room) list the room's latest such messages, newest first.",
    ),
)

MORE = CommandSpec(
    "more",
    "the next page of your last search here (for 10 minutes after it)",
    (),
    _build_more,
)

PIN = CommandSpec(
    "pin",
    "pin the message you reply to, or ^N (N messages up), or this one (with a #label or note)",
    (
        ArgSpec("[^N]", f"the N-th message above (1 to {MAX_OFFSET})"),
        ArgSpec("[#label]", "file it under a label"),
        ArgSpec("[note]", "free text shown on the board"),
    ),
    build_pin,
)

UNPIN = CommandSpec(
    "unpin",
    "unpin the message you reply to, or ^N; a target is required",
    (ArgSpec("[^N]", "the N-th message above"),),
    build_unpin,
)

PINS = CommandSpec(
    "pins",
    "show the pinboard",
    (
        ArgSpec("[#label]", "only pins with this label"),
        ArgSpec("[text]", "only pins whose note or message contains the text"),
        ArgSpec("[in:#room]", "another room's board", command_room_only=True),
    ),
    build_pins,
    aliases=("board",),
)

HELP = CommandSpec(
    "help", "list the commands", (ArgSpec("[command]", "details of one command"),), _build_help
)

COMMANDS: tuple[CommandSpec[Any], ...] = (SEARCH, MORE, PIN, UNPIN, PINS, HELP)

_LOOKUP: dict[str, CommandSpec[Any]] = {
    name: spec for spec in COMMANDS for name in (spec.name, *spec.aliases)
}


# ---------------------------------------------------------------- entry points


def did_you_mean(word: str) -> str | None:
    """The command `word` is most likely a typo of (`serach` → `search`), or None when it is
    like none of them (another bot's word). Aliases count, the canonical name is returned."""
    close = difflib.get_close_matches(word.casefold(), list(_LOOKUP), n=1, cutoff=0.75)
    return _LOOKUP[close[0]].name if close else None


_COMMAND_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _split_head(body: str, prefix: str) -> tuple[str, str] | None:
    """(command word, arguments) when the body is shaped like a command at all."""
    if not prefix:
        raise ValueError("the command prefix must not be empty")
    text = body.strip()
    if not is_command(text, prefix):
        return None
    match = _COMMAND_WORD.match(text, len(prefix))
    if match is None or (match.end() < len(text) and not text[match.end()].isspace()):
        return None
    return match.group(), text[match.end() :]


def command_name(body: str, prefix: str = "!") -> str | None:
    """The canonical name of the Muninn command in `body` (typed text), if any; never raises."""
    head = _split_head(body, prefix)
    spec = _LOOKUP.get(head[0].casefold()) if head else None
    return spec.name if spec else None


@dataclass(frozen=True)
class Parsed:
    """A command as read from a message, with the declaration that read it."""

    spec: CommandSpec[Any]
    command: Command


def parse(body: str, **options: Any) -> Command | None:
    """The command alone, as `parse_command` reads it (the same keyword arguments)."""
    parsed = parse_command(body, **options)
    return None if parsed is None else parsed.command


def parse_command(
    body: str,
    *,
    prefix: str = "!",
    now_ms: int,
    in_command_room: bool,
    server_name: str | None = None,
) -> Parsed | None:
    """Parse a message body into a command and the declaration that read it.

    Args:
        body: what the sender typed (`ingest.rules.events.typed_text`: a reply's fallback removed).
        prefix: the configured command prefix.
        now_ms: the clock relative dates count back from (the event's `origin_server_ts`).
        in_command_room: whether `in:` (cross-room) is allowed.
        server_name: the homeserver's name, completing `@user` and `#alias` without one.

    Returns:
        The command with its declaration, or None when the body is not shaped like a command
        at all.

    Raises:
        UnknownCommand: `!word` where `word` is no Muninn command.
        UsageError: a Muninn command with malformed arguments; the message includes usage.
    """
    head = _split_head(body, prefix)
    if head is None:
        return None
    word, args = head
    spec = _LOOKUP.get(word.casefold())
    if spec is None:
        raise UnknownCommand(word, prefix, did_you_mean(word))
    ctx = Context(prefix, now_ms, in_command_room, server_name, spec)
    try:
        return Parsed(spec, spec.build(ctx, args))
    except ArgumentError as e:
        raise ctx.error(e.problem) from None


def help_text(prefix: str = "!", in_command_room: bool = False) -> str:
    """`!help`: one usage line per command, generated from the declarations."""
    lines = [f"{spec.usage(prefix, in_command_room)} — {spec.summary}" for spec in COMMANDS]
    return "\n".join(lines)
