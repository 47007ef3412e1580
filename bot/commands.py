"""The in-room command grammar (docs/ARCHITECTURE.md §4.6), declared once; usage and help are
generated from it.

`parse` is pure: a message body in, a typed command (or None, or a typed `UsageError`) out. What a
command may *do* (visibility, allow-lists, the reply relation of `!pin`) is the handler's policy.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bot import arguments
from bot.arguments import MAX_OFFSET, ArgumentError, echo
from bot.dates import DATE_HELP, period
from ingest.errors import CommandError
from ingest.search import DEFAULT_LIMIT, MAX_LIMIT, MAX_TEXT_BYTES, MAX_TEXTS

__all__ = [
    "COMMANDS",
    "MAX_ROOMS",
    "ArgSpec",
    "Command",
    "CommandSpec",
    "HelpCommand",
    "PinCommand",
    "PinsCommand",
    "SearchCommand",
    "UnknownCommand",
    "UnpinCommand",
    "UsageError",
    "command_name",
    "help_text",
    "parse",
]

MAX_ROOMS = 8  # in: rooms per search; each is one more room log read


# ---------------------------------------------------------------- errors


class UsageError(CommandError):
    """A malformed command: a short problem plus the command's generated usage line."""

    def __init__(self, problem: str, usage: str | None = None) -> None:
        self.problem = problem
        self.usage = usage
        super().__init__(problem if usage is None else f"{problem}\nUsage: {usage}")


class UnknownCommand(UsageError):
    """`!word` where `word` is no Muninn command. Outside the command room the handler may stay
    silent instead, since other bots in the room use the same prefix."""

    def __init__(self, word: str, prefix: str) -> None:
        self.word = word
        super().__init__(f"unknown command {prefix}{echo(word)}; try {prefix}help")


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class SearchCommand:
    """`!search`. Keep events with `after_ms <= ts < before_ms` (either bound may be absent)."""

    texts: tuple[str, ...] = ()  # 1–8 texts, or () when `regex` is given
    regex: str | None = None  # within the size bounds, not compiled; `i` is a leading `(?i)`
    sender: str | None = None  # a full mxid, or `@localpart` when no server name was known
    before_ms: int | None = None
    after_ms: int | None = None
    rooms: tuple[str, ...] = ()  # aliases or room ids; only ever non-empty in the command room
    limit: int = DEFAULT_LIMIT


@dataclass(frozen=True)
class PinCommand:
    """`!pin`: target is the replied-to event, else `^offset`, else the command itself."""

    offset: int | None = None
    label: str | None = None  # without `#`, case-folded
    note: str = ""


@dataclass(frozen=True)
class UnpinCommand:
    """`!unpin`: a target is required; the handler checks for a reply when `offset` is None."""

    offset: int | None = None


@dataclass(frozen=True)
class PinsCommand:
    """`!pins`: show the board, filtered by label and/or text."""

    label: str | None = None
    text: str | None = None
    room: str | None = None  # `in:` — the command room only


@dataclass(frozen=True)
class HelpCommand:
    topic: str | None = None  # a command's canonical name


Command = SearchCommand | PinCommand | UnpinCommand | PinsCommand | HelpCommand


# ---------------------------------------------------------------- declarations


@dataclass(frozen=True)
class ArgSpec:
    syntax: str
    help: str
    command_room_only: bool = False


@dataclass(frozen=True)
class _Context:
    prefix: str
    now_ms: int
    in_command_room: bool
    server_name: str | None
    spec: CommandSpec

    def error(self, problem: str) -> UsageError:
        return UsageError(problem, self.spec.usage(self.prefix, self.in_command_room))


@dataclass(frozen=True)
class CommandSpec:
    """One command, declared once: name, aliases, arguments, help, and how to build it."""

    name: str
    summary: str
    args: tuple[ArgSpec, ...]
    build: Callable[[_Context, str], Command] = field(repr=False)
    aliases: tuple[str, ...] = ()

    def usage(self, prefix: str = "!", in_command_room: bool = True) -> str:
        shown = [a.syntax for a in self.args if in_command_room or not a.command_room_only]
        return " ".join([prefix + self.name, *shown])

    def help(self, prefix: str = "!", in_command_room: bool = True) -> str:
        lines = [f"{self.usage(prefix, in_command_room)} — {self.summary}"]
        if self.aliases:
            lines.append("  also: " + ", ".join(prefix + a for a in self.aliases))
        for arg in self.args:
            if in_command_room or not arg.command_room_only:
                room_only = " (command room only)" if arg.command_room_only else ""
                lines.append(f"  {arg.syntax}: {arg.help}{room_only}")
        return "\n".join(lines)


# ---------------------------------------------------------------- tokens


class _Kind(enum.Enum):
    WORD = "word"
    PHRASE = "phrase"
    PIPE = "pipe"
    REGEX = "regex"


@dataclass(frozen=True)
class _Token:
    kind: _Kind
    text: str
    flags: str = ""


_OPEN_QUOTES = '"“„'  # phone keyboards type curly quotes
_CLOSE_QUOTES = '"”“'


def _scan_regex(args: str, i: int, ctx: _Context) -> tuple[_Token, int]:
    """`/pattern/flags` starting at args[i] == "/"; `\\/` is a slash inside the pattern."""
    j = i + 1
    while j < len(args) and args[j] != "/":
        j += 2 if args[j] == "\\" else 1
    if j >= len(args):
        raise ctx.error(
            'unterminated /regex/ (to search for text starting with /, quote it: "/…")'
        )
    k = j + 1
    while k < len(args) and args[k].isalpha():
        k += 1
    if k < len(args) and not (args[k].isspace() or args[k] == "|"):
        raise ctx.error(f"unexpected {echo(args[j + 1 : k + 1])} after /regex/")
    return _Token(_Kind.REGEX, args[i + 1 : j], args[j + 1 : k]), k


def _tokenize(args: str, ctx: _Context, *, regexes: bool) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(args):
        ch = args[i]
        if ch.isspace():
            i += 1
        elif ch == "|":
            tokens.append(_Token(_Kind.PIPE, "|"))
            i += 1
        elif ch in _OPEN_QUOTES:
            end = next((j for j in range(i + 1, len(args)) if args[j] in _CLOSE_QUOTES), -1)
            if end < 0:
                raise ctx.error("unterminated quote")
            tokens.append(_Token(_Kind.PHRASE, args[i + 1 : end]))
            i = end + 1
        elif ch == "/" and regexes:
            token, i = _scan_regex(args, i, ctx)
            tokens.append(token)
        else:
            j = i
            while j < len(args) and not args[j].isspace() and args[j] != "|":
                j += 1
            tokens.append(_Token(_Kind.WORD, args[i:j]))
            i = j
    return tokens


def _key_value(token: _Token, keys: frozenset[str]) -> tuple[str, str] | None:
    """`key:value` for a known key (case-insensitive); anything else is text (URLs, 10:30…)."""
    if token.kind is not _Kind.WORD:
        return None
    key, sep, value = token.text.partition(":")
    key = key.casefold()
    return (key, value) if sep and key in keys else None


# ---------------------------------------------------------------- builders


@dataclass
class _SearchDraft:
    """Mutable while the tokens are read; frozen into a SearchCommand at the end."""

    groups: list[list[str]] = field(default_factory=lambda: [[]])
    regex: str | None = None
    sender: str | None = None
    afters: list[int] = field(default_factory=list)
    befores: list[int] = field(default_factory=list)
    rooms: list[str] = field(default_factory=list)
    limit: int = DEFAULT_LIMIT


_SEARCH_KEYS = frozenset({"from", "before", "after", "during", "in", "limit"})


def _search_filter(draft: _SearchDraft, key: str, value: str, ctx: _Context) -> None:
    if not value:
        raise ctx.error(f"{key}: needs a value")
    if key == "from":
        if draft.sender is not None:
            raise ctx.error("only one from: per search")
        draft.sender = arguments.user(value, ctx.server_name)
    elif key == "in":
        room = arguments.room(value, ctx.server_name, in_command_room=ctx.in_command_room)
        if room not in draft.rooms:
            if len(draft.rooms) == MAX_ROOMS:
                raise ctx.error(f"at most {MAX_ROOMS} in: rooms per search")
            draft.rooms.append(room)
    elif key == "limit":
        draft.limit = arguments.limit(value)
    else:
        span = period(value, ctx.now_ms)
        if key in ("after", "during"):
            draft.afters.append(span.start if key == "during" or span.instant else span.end)
        if key in ("before", "during"):
            draft.befores.append(span.end if key == "during" else span.start)


def _search_texts(draft: _SearchDraft, ctx: _Context) -> tuple[str, ...]:
    texts = [" ".join(parts).strip() for parts in draft.groups]
    if draft.regex is not None:
        if len(texts) > 1 or texts[0]:
            raise ctx.error("give either a /regex/ or text, not both")
        return ()
    if len(texts) == 1 and not texts[0]:
        raise ctx.error("nothing to search for")
    if not all(texts):
        raise ctx.error("empty text between |")
    if len(texts) > MAX_TEXTS:
        raise ctx.error(f"at most {MAX_TEXTS} texts separated by |")
    if any(len(t.encode()) > MAX_TEXT_BYTES for t in texts):
        raise ctx.error(f"each text is at most {MAX_TEXT_BYTES} bytes")
    return tuple(texts)


def _build_search(ctx: _Context, args: str) -> Command:
    draft = _SearchDraft()
    for token in _tokenize(args, ctx, regexes=True):
        if token.kind is _Kind.PIPE:
            draft.groups.append([])
        elif token.kind is _Kind.REGEX:
            if draft.regex is not None:
                raise ctx.error("only one /regex/ per search")
            draft.regex = arguments.pattern(token.text, token.flags)
        elif kv := _key_value(token, _SEARCH_KEYS):
            _search_filter(draft, kv[0], kv[1], ctx)
        elif token.text:
            draft.groups[-1].append(token.text)
    texts = _search_texts(draft, ctx)
    after = max(draft.afters, default=None)
    before = min(draft.befores, default=None)
    if after is not None and before is not None and after >= before:
        raise ctx.error("the time filters leave no time to search")
    return SearchCommand(
        texts, draft.regex, draft.sender, before, after, tuple(draft.rooms), draft.limit
    )


_WORD_SPLIT = re.compile(r"\s+")


def _build_pin(ctx: _Context, args: str) -> Command:
    offset: int | None = None
    label: str | None = None
    rest = args.strip()
    # Leading ^N and #label, in either order; everything after them is the note, verbatim.
    while rest and rest[0] in "^#":
        head, *tail = _WORD_SPLIT.split(rest, maxsplit=1)
        if head[0] == "^":
            if offset is not None:
                raise ctx.error("only one ^N")
            offset = arguments.offset(head)
        else:
            if label is not None:
                break  # a second #word starts the note (hashtags in free text)
            label = arguments.label(head)
        rest = tail[0] if tail else ""
    return PinCommand(offset, label, rest.strip())


def _build_unpin(ctx: _Context, args: str) -> Command:
    words = args.split()
    if not words:
        return UnpinCommand(None)
    if len(words) > 1 or not words[0].startswith("^"):
        raise ctx.error("unpin takes only ^N, or reply to the pinned message")
    return UnpinCommand(arguments.offset(words[0]))


def _build_pins(ctx: _Context, args: str) -> Command:
    label: str | None = None
    room: str | None = None
    words: list[str] = []
    for token in _tokenize(args, ctx, regexes=False):
        if kv := _key_value(token, frozenset({"in"})):
            if not ctx.in_command_room:
                raise ctx.error("in: (another room's board) is only available in the command room")
            if room is not None:
                raise ctx.error("only one in: room")
            room = arguments.room(kv[1], ctx.server_name, in_command_room=ctx.in_command_room)
        elif token.kind is _Kind.WORD and token.text.startswith("#") and label is None:
            label = arguments.label(token.text)
        elif token.kind is not _Kind.PIPE and token.text:
            words.append(token.text)
    return PinsCommand(label, " ".join(words) or None, room)


def _build_help(ctx: _Context, args: str) -> Command:
    words = args.split()
    if not words:
        return HelpCommand(None)
    topic = words[0].removeprefix(ctx.prefix).casefold()
    spec = _LOOKUP.get(topic)
    if spec is None or len(words) > 1:
        raise ctx.error(f"no command {echo(words[0])}")
    return HelpCommand(spec.name)


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        "search",
        "search this room's history (every indexed room, in the command room)",
        (
            ArgSpec("[from:@user]", "only messages from this user (@user means this server)"),
            ArgSpec("[before:DATE]", f"before DATE; DATE is {DATE_HELP}"),
            ArgSpec(
                "[after:DATE]", "after DATE (after:2026-11-01 is from 11-02; 7d: last 7 days)"
            ),
            ArgSpec("[during:DATE]", "within DATE (a day, a month, or the last 7d)"),
            ArgSpec(
                "[in:#room]",
                f"search that room; repeat for up to {MAX_ROOMS}",
                command_room_only=True,
            ),
            ArgSpec("[limit:N]", f"at most N results (default {DEFAULT_LIMIT}, max {MAX_LIMIT})"),
            ArgSpec("<text> [| <text> …]", f'up to {MAX_TEXTS} alternatives; "quote" exact words'),
            ArgSpec("or /regex/[i]", "a regular expression instead of text (i: ignore case)"),
        ),
        _build_search,
        aliases=("s", "find"),
    ),
    CommandSpec(
        "pin",
        "pin the message you reply to, or ^N (N messages up), or this one",
        (
            ArgSpec("[^N]", f"the N-th message above (1 to {MAX_OFFSET})"),
            ArgSpec("[#label]", "file it under a label"),
            ArgSpec("[note]", "free text shown on the board"),
        ),
        _build_pin,
    ),
    CommandSpec(
        "unpin",
        "unpin the message you reply to, or ^N; a target is required",
        (ArgSpec("[^N]", "the N-th message above"),),
        _build_unpin,
    ),
    CommandSpec(
        "pins",
        "show the pinboard",
        (
            ArgSpec("[#label]", "only pins with this label"),
            ArgSpec("[text]", "only pins whose note or message contains the text"),
            ArgSpec("[in:#room]", "another room's board", command_room_only=True),
        ),
        _build_pins,
        aliases=("board",),
    ),
    CommandSpec(
        "help", "list the commands", (ArgSpec("[command]", "details of one command"),), _build_help
    ),
)

_LOOKUP: dict[str, CommandSpec] = {
    name: spec for spec in COMMANDS for name in (spec.name, *spec.aliases)
}


# ---------------------------------------------------------------- entry points


_COMMAND_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _strip_reply_fallback(body: str) -> str:
    """Drop a `> <@user:server> …` reply fallback: `!pin` is sent as a reply, and clients that
    still write fallbacks put the quote before the command."""
    if not body.startswith("> <"):
        return body
    lines = body.split("\n")
    i = next((n for n, line in enumerate(lines) if not line.startswith(">")), len(lines))
    return "\n".join(lines[i + 1 :]) if i < len(lines) and lines[i] == "" else body


def _split_head(body: str, prefix: str) -> tuple[str, str] | None:
    """(command word, arguments) when the body is shaped like a command at all."""
    if not prefix:
        raise ValueError("the command prefix must not be empty")
    text = _strip_reply_fallback(body).strip()
    if not text.startswith(prefix):
        return None
    match = _COMMAND_WORD.match(text, len(prefix))
    if match is None or (match.end() < len(text) and not text[match.end()].isspace()):
        return None
    return match.group(), text[match.end() :]


def command_name(body: str, prefix: str = "!") -> str | None:
    """The canonical name of the Muninn command in `body`, if any; never raises."""
    head = _split_head(body, prefix)
    spec = _LOOKUP.get(head[0].casefold()) if head else None
    return spec.name if spec else None


def parse(
    body: str,
    *,
    prefix: str = "!",
    now_ms: int,
    in_command_room: bool,
    server_name: str | None = None,
) -> Command | None:
    """Parse a message body into a command.

    Args:
        body: the event's plain `body` (a reply fallback is stripped here).
        prefix: the configured command prefix.
        now_ms: the clock relative dates count back from (the event's `origin_server_ts`).
        in_command_room: whether `in:` (cross-room) is allowed.
        server_name: the homeserver's name, completing `@user` and `#alias` without one.

    Returns:
        The command, or None when the body is not shaped like a command at all.

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
        raise UnknownCommand(word, prefix)
    ctx = _Context(prefix, now_ms, in_command_room, server_name, spec)
    try:
        return spec.build(ctx, args)
    except ArgumentError as e:
        raise ctx.error(e.problem) from None


def help_text(prefix: str = "!", in_command_room: bool = False) -> str:
    """`!help`: one usage line per command, generated from the declarations."""
    lines = [f"{spec.usage(prefix, in_command_room)} — {spec.summary}" for spec in COMMANDS]
    return "\n".join(lines)
