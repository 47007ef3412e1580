"""The typed commands `parse` returns, and its usage errors."""

from __future__ import annotations

from dataclasses import dataclass

from bot.chat.commands.arguments import echo
from bot.errors import CommandError
from ingest.search.filters import NO_FILTER, MessageFilter
from ingest.search.query import DEFAULT_LIMIT

__all__ = [
    "MAX_ROOMS",
    "Command",
    "HelpCommand",
    "MoreCommand",
    "PinCommand",
    "PinsCommand",
    "SearchCommand",
    "UnknownCommand",
    "UnpinCommand",
    "UsageError",
]

MAX_ROOMS = 8  # in: rooms per search; each is one more room log read


class UsageError(CommandError):
    """A malformed command: a short problem plus the command's generated usage line;
    `command` the name of the declaration that refused it (None: no Muninn command)."""

    def __init__(self, problem: str, usage: str | None = None, command: str | None = None) -> None:
        self.problem = problem
        self.usage = usage
        self.command = command
        super().__init__(problem if usage is None else f"{problem}\nUsage: {usage}")


class UnknownCommand(UsageError):
    """`!word` where `word` is no Muninn command; `suggestion` the command it is a typo of, if
    any. Outside the command room the handler answers only a typo (other bots in the room may
    use the same prefix for their own words)."""

    def __init__(self, word: str, prefix: str, suggestion: str | None = None) -> None:
        self.word = word
        self.suggestion = suggestion
        hint = f"did you mean {prefix}{suggestion}?" if suggestion else f"try {prefix}help"
        super().__init__(f"no command {prefix}{echo(word)}; {hint}")


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
    filter: MessageFilter = NO_FILTER  # -word, -from:, has:KIND, is:thread, mentions:
    sort: str = "relevance"  # or "recent" (`sort:recent`)


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
class MoreCommand:
    """`!more`: the next page of the asker's last search in this room (or thread)."""


@dataclass(frozen=True)
class HelpCommand:
    topic: str | None = None  # a command's canonical name


Command = SearchCommand | PinCommand | UnpinCommand | PinsCommand | HelpCommand | MoreCommand
