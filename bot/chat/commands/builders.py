"""Each command's builder: its tokens (or words) into the typed command, or a usage error."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.chat.commands import arguments
from bot.chat.commands.dates import period
from bot.chat.commands.records import (
    MAX_ROOMS,
    PinCommand,
    PinsCommand,
    SearchCommand,
    UnpinCommand,
)
from bot.chat.commands.spec import Context
from bot.chat.commands.tokens import Kind, key_value, tokenize
from ingest.errors import QueryError
from ingest.search.filters import HAS_KINDS, MessageFilter
from ingest.search.query import DEFAULT_LIMIT, MAX_TEXT_BYTES, MAX_TEXTS, SORTS, prefix_problem

__all__ = ["build_pin", "build_pins", "build_search", "build_unpin"]


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
    excluded: list[str] = field(default_factory=list)  # -word, -"two words"
    excluded_senders: list[str] = field(default_factory=list)  # -from:
    has: set[str] = field(default_factory=set)  # has:link, has:image, …
    in_thread: bool | None = None
    mentions: list[str] = field(default_factory=list)
    sort: str = "relevance"

    def lists_latest(self) -> bool:
        """Operators that name what to list without words: `from:`, `in:`, `has:`,
        `mentions:`, `is:thread` (a `-word`, `-from:` or a date alone only narrows)."""
        return bool(self.sender or self.rooms or self.has or self.mentions or self.in_thread)

    def message_filter(self, ctx: Context) -> MessageFilter:
        try:
            return MessageFilter.build(
                exclude_words=self.excluded,
                exclude_senders=self.excluded_senders,
                has=self.has,
                in_thread=self.in_thread,
                mentions=self.mentions,
            )
        except QueryError as e:
            raise ctx.error(str(e).partition(": ")[2]) from None


_SEARCH_KEYS = frozenset(
    {"from", "before", "after", "during", "in", "limit", "has", "is", "mentions", "sort"}
)
_NEGATED_KEYS = frozenset({"from", "is"})
# Words of prose before they are operators: "the answer is: 42" stays text.
_TEXT_IF_EMPTY = frozenset({"has", "is", "mentions", "sort"})


def _excluded(draft: _SearchDraft, text: str, ctx: Context) -> bool:
    """`-word`, `-from:@user`, `-is:thread`: a leading `-` before a letter, digit or key."""
    if len(text) < 2 or text[0] != "-" or not (text[1].isalnum() or text[1] == "@"):
        return False
    key, sep, value = text[1:].partition(":")
    if sep and key.casefold() in _NEGATED_KEYS:
        if not value:
            raise ctx.error(f"-{key}: needs a value")
        if key.casefold() == "from":
            draft.excluded_senders.append(arguments.user(value, ctx.server_name))
        elif value.casefold() == "thread":
            draft.in_thread = False
        else:
            raise ctx.error(f"-is: takes thread, not {arguments.echo(value)}")
    elif sep and key.casefold() in _SEARCH_KEYS:
        raise ctx.error(f"-{key}: cannot be negated (only -from: and -is:thread can)")
    else:
        draft.excluded.append(text[1:])
    return True


def _search_flag(draft: _SearchDraft, key: str, value: str, ctx: Context) -> None:
    """has:link (or has:file, has:image, has:video, has:audio), is:thread, mentions:@user,
    sort:recent."""
    word = value.casefold()
    if key == "has":
        if word not in HAS_KINDS:
            kinds = f"{', '.join(HAS_KINDS[:-1])} or {HAS_KINDS[-1]}"
            raise ctx.error(f"has: takes {kinds}, not {arguments.echo(value)}")
        draft.has.add(word)
    elif key == "is":
        if word != "thread":
            raise ctx.error(f"is: takes thread, not {arguments.echo(value)}")
        draft.in_thread = True
    elif key == "mentions":
        draft.mentions.append(arguments.user(value, ctx.server_name, key="mentions"))
    elif word not in SORTS:
        raise ctx.error(f"sort: takes {' or '.join(SORTS)}, not {arguments.echo(value)}")
    else:
        draft.sort = word


def _search_filter(draft: _SearchDraft, key: str, value: str, ctx: Context) -> None:
    if not value:
        raise ctx.error(f"{key}: needs a value")
    if key in ("has", "is", "mentions", "sort"):
        _search_flag(draft, key, value, ctx)
    elif key == "from":
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


def _search_texts(draft: _SearchDraft, ctx: Context) -> tuple[str, ...]:
    texts = [" ".join(parts).strip() for parts in draft.groups]
    if draft.regex is not None:
        if len(texts) > 1 or texts[0]:
            raise ctx.error("give either a /regex/ or text, not both")
        return ()
    if len(texts) == 1 and not texts[0]:
        if draft.lists_latest():  # `!search from:@bob`: bob's latest messages (rule 22a)
            return ()
        if draft.excluded or draft.excluded_senders:
            raise ctx.error(
                "nothing to search for: a -word or -from: only leaves messages out; "
                "add the words to find"
            )
        room = "in:#room, " if ctx.in_command_room else ""
        raise ctx.error(
            f"nothing to search for: give the words to find, or from:@user, {room}has:link, "
            "mentions:@user or is:thread alone for the latest such messages"
        )
    if not all(texts):
        raise ctx.error("empty text between |")
    if len(texts) > MAX_TEXTS:
        raise ctx.error(f"at most {MAX_TEXTS} texts separated by |")
    if any(len(t.encode()) > MAX_TEXT_BYTES for t in texts):
        raise ctx.error(f"each text is at most {MAX_TEXT_BYTES} bytes")
    for text in texts:
        if problem := prefix_problem(text):
            raise ctx.error(problem)
    return tuple(texts)


def build_search(ctx: Context, args: str) -> SearchCommand:
    draft = _SearchDraft()
    for token in tokenize(args, ctx, regexes=True):
        if token.kind is Kind.PIPE:
            draft.groups.append([])
        elif token.kind is Kind.REGEX:
            if draft.regex is not None:
                raise ctx.error("only one /regex/ per search")
            draft.regex = arguments.pattern(token.text, token.flags)
        elif token.kind is Kind.PHRASE and token.flags == "-":
            if token.text.strip():
                draft.excluded.append(token.text)
        elif (kv := key_value(token, _SEARCH_KEYS)) and (kv[1] or kv[0] not in _TEXT_IF_EMPTY):
            _search_filter(draft, kv[0], kv[1], ctx)
        elif token.kind is Kind.WORD and _excluded(draft, token.text, ctx):
            pass
        elif token.text:
            draft.groups[-1].append(token.text)
    texts = _search_texts(draft, ctx)
    after = max(draft.afters, default=None)
    before = min(draft.befores, default=None)
    if after is not None and before is not None and after >= before:
        raise ctx.error(
            "the time filters leave no time to search: after:DATE starts when that day or "
            "month ends, and before:DATE stops when it begins; for one day or month, "
            "write during:DATE"
        )
    return SearchCommand(
        texts,
        draft.regex,
        draft.sender,
        before,
        after,
        tuple(draft.rooms),
        draft.limit,
        draft.message_filter(ctx),
        draft.sort if texts or draft.regex is not None else "recent",  # the latest, newest first
    )


_WORD_SPLIT = re.compile(r"\s+")


def build_pin(ctx: Context, args: str) -> PinCommand:
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


def build_unpin(ctx: Context, args: str) -> UnpinCommand:
    words = args.split()
    if not words:
        return UnpinCommand(None)
    if len(words) > 1 or not words[0].startswith("^"):
        raise ctx.error("unpin takes only ^N, or reply to the pinned message")
    return UnpinCommand(arguments.offset(words[0]))


def build_pins(ctx: Context, args: str) -> PinsCommand:
    label: str | None = None
    room: str | None = None
    words: list[str] = []
    for token in tokenize(args, ctx, regexes=False):
        if kv := key_value(token, frozenset({"in"})):
            if not ctx.in_command_room:
                raise ctx.error("in: (another room's board) is only available in the command room")
            if room is not None:
                raise ctx.error("only one in: room")
            room = arguments.room(kv[1], ctx.server_name, in_command_room=ctx.in_command_room)
        elif token.kind is Kind.WORD and token.text.startswith("#") and label is None:
            label = arguments.label(token.text)
        elif token.kind is not Kind.PIPE and token.text:
            words.append(token.text)
    return PinsCommand(label, " ".join(words) or None, room)
