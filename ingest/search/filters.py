"""`ingest.search.filters`: what a search keeps beyond its words — exclusions, links, media,
threads, mentions.

One record (`MessageFilter`) and one predicate (`keep_messages`) for every path: the index's
windows (`ingest.search`, through `Candidates.first`) and the transcript finds of the room
logs (`ingest.search.logs.roomlogs`) are both judged here, so `-word`, `has:link`, `is:thread` and
`mentions:` mean the same in a room, the command room, `muninn search` and
`POST /_muninn/search`. A filter only ever removes: whatever it keeps is still revalidated and
cut to the room's audience as every hit is (docs/ARCHITECTURE.md §3 rules 14, 15).

| operator | keeps |
|---|---|
| `-word`, `-"two words"` | hits none of whose messages hold the word or phrase (caseless) |
| `-from:@user` | the messages of every other sender |
| `has:link` | messages whose text carries a URL (`http(s)://`, `www.`) |
| `has:file`, `has:image`, | files, images, videos, audio clips (their msgtype); several |
| `has:video`, `has:audio` | `has:` keep a message that has any of them |
| `is:thread` / `-is:thread` | messages inside (outside) a thread |
| `mentions:@user` | messages mentioning the user: `m.mentions` where the sender's client |
| | set it, else the mxid or a display name of the user in the text |
| `match: words` (MCP, CLI) | messages holding every word of one of the texts (`holding`) |
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NotRequired, Protocol, TypedDict, TypeVar

import regex
from mautrix.types import MessageType

from ingest.errors import QueryError
from ingest.rules.lexical import caseless, tokens
from ingest.rules.media import MEDIA_KINDS

__all__ = [
    "HAS_KINDS",
    "MAX_EXCLUSIONS",
    "NO_FILTER",
    "Held",
    "MessageFilter",
    "Said",
    "has_link",
    "keep_messages",
    "mentioned",
    "msgtype_of",
]

MAX_EXCLUSIONS = 8  # -word, -"phrase" and -from: together, per search


class Said(TypedDict):
    """What a filter reads of a message: a window's `StoredMessage` or a log message's."""

    body: str
    sender: str
    msgtype: NotRequired[str]  # absent: m.text (a payload written before CHUNKER_VERSION 6)
    mentions: NotRequired[list[str]]  # `m.mentions.user_ids`; absent: the event had none


M = TypeVar("M", bound=Said)
MAX_MENTIONS = 4
# What `has:` takes: a link in the text, or the media kinds (`ingest.rules.media.MEDIA_KINDS`).
HAS_KINDS = ("link", *MEDIA_KINDS)

_URL = regex.compile(r"(?i)\b(?:https?://|www\.)[^\s<>\"']+")


class Held(Protocol):
    """What a message must say to match a text by its words (`ingest.search.matches.Terms`,
    the rule's one owner): `held_by` a message's lexical tokens."""

    def held_by(self, said: Sequence[str]) -> bool: ...


def _fold(text: str) -> str:
    return " ".join(caseless(text).split())


def has_link(body: str) -> bool:
    """Whether a message's text carries a URL (a media message's: its filename or caption)."""
    return _URL.search(body) is not None


def msgtype_of(message: Mapping[str, object]) -> str:
    """A message's msgtype as a payload or a hit holds it: `m.text` where it is absent."""
    return str(message.get("msgtype") or MessageType.TEXT.value)


def _has(kind: str, message: Said) -> bool:
    if kind == "link":
        return has_link(str(message.get("body", "")))
    return msgtype_of(message) == MEDIA_KINDS[kind]


def mentioned(
    user: str,
    body: str,
    explicit: Sequence[str] | None,
    names: Sequence[str] = (),
) -> bool:
    """Whether a message mentions `user`: its `m.mentions` user ids when the sender's client set
    them (`explicit`; an empty list mentions nobody), else the mxid or one of `names` (the
    user's display names) as whole words in the text."""
    if explicit is not None:
        return user in explicit
    folded = _fold(body)
    for word in (user, *names):
        needle = _fold(word)
        if needle and _whole(needle).search(folded):
            return True
    return False


@dataclass(frozen=True)
class MessageFilter:
    """The filters of a search past its texts; the empty filter keeps everything."""

    exclude_words: tuple[str, ...] = ()  # words or phrases, as given
    exclude_senders: tuple[str, ...] = ()  # full mxids
    has_link: bool = False  # `has:link`; `build` keeps it and "link" in `has` the same
    in_thread: bool | None = None  # True: only in threads; False: only outside; None: both
    mentions: tuple[str, ...] = ()  # full mxids; a message must mention each
    # user id → display names the caller knows (the bot: the room's members), for `mentions:`
    # in text whose client set no `m.mentions`.
    mention_names: Mapping[str, tuple[str, ...]] | None = None
    # `has:KIND` (`HAS_KINDS`): a message is kept when it has any of them; empty: no such filter.
    has: frozenset[str] = frozenset()
    # `match: words`: a message is kept when it holds the words of one of these (one a text);
    # set by the read path from the query (`Searcher`), never by a request's fields.
    holding: tuple[Held, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        exclude_words: Sequence[str] = (),
        exclude_senders: Sequence[str] = (),
        has_link: bool = False,
        in_thread: bool | None = None,
        mentions: Sequence[str] = (),
        has: Collection[str] = (),
    ) -> MessageFilter:
        """Validated, naming the bad field as `SearchQuery.build` does. `has_link=True` is
        `has=["link"]`: either way both fields say it."""
        for field, values in (("exclude", exclude_words), ("exclude_senders", exclude_senders)):
            if isinstance(values, str):
                raise QueryError(field, "must be a list of strings, not one string")
            if any(not isinstance(v, str) or not v.strip() for v in values):
                raise QueryError(field, "has an empty entry")
        if len(exclude_words) + len(exclude_senders) > MAX_EXCLUSIONS:
            raise QueryError("exclude", f"at most {MAX_EXCLUSIONS} exclusions per search")
        if len(mentions) > MAX_MENTIONS:
            raise QueryError("mentions", f"at most {MAX_MENTIONS} users per search")
        kinds = _kinds(has) | ({"link"} if has_link else set())
        return cls(
            tuple(exclude_words),
            tuple(exclude_senders),
            "link" in kinds,
            in_thread,
            tuple(mentions),
            has=frozenset(kinds),
        )

    @property
    def kinds(self) -> frozenset[str]:
        """What `has:` asks for, `has_link` included."""
        return (self.has | {"link"}) if self.has_link else self.has

    def __bool__(self) -> bool:
        return bool(
            self.exclude_words
            or self.exclude_senders
            or self.kinds
            or self.in_thread is not None
            or self.mentions
            or self.holding
        )

    def with_names(self, names: Mapping[str, tuple[str, ...]]) -> MessageFilter:
        return replace(self, mention_names=names)

    def _keeps(self, message: Said, thread_root: str | None) -> bool:
        body, sender = str(message.get("body", "")), str(message.get("sender", ""))
        if sender in self.exclude_senders:
            return False
        if (kinds := self.kinds) and not any(_has(k, message) for k in kinds):
            return False
        if self.holding and not any(t.held_by(tokens(body)) for t in self.holding):
            return False
        if self.in_thread is not None and (thread_root is not None) != self.in_thread:
            return False
        explicit = message.get("mentions")
        ids = [str(u) for u in explicit] if isinstance(explicit, list | tuple) else None
        names = self.mention_names or {}
        return all(mentioned(u, body, ids, names.get(u, ())) for u in self.mentions)


NO_FILTER = MessageFilter()  # keeps everything: the records' default


def _kinds(has: Collection[str]) -> set[str]:
    if isinstance(has, str):
        raise QueryError("has", "must be a list of strings, not one string")
    kinds = set()
    for kind in has:
        word = kind.casefold() if isinstance(kind, str) else kind
        if word not in HAS_KINDS:
            raise QueryError("has", f"takes {', '.join(HAS_KINDS)}, not {kind!r}")
        kinds.add(str(word))
    return kinds


def _holds_excluded(flt: MessageFilter, body: str) -> bool:
    folded = _fold(body)
    return any(_whole(_fold(w)).search(folded) for w in flt.exclude_words)


def _whole(needle: str) -> regex.Pattern[str]:
    """`needle` as whole words: `-test` leaves "latest" alone."""
    return regex.compile(rf"(?<!\w){regex.escape(needle)}(?!\w)")


def keep_messages(
    flt: MessageFilter, messages: Sequence[M], thread_root: str | None
) -> tuple[M, ...]:
    """The messages of one hit (a window, or a transcript find) the filter keeps; () drops it.

    An excluded word in any message drops the whole hit: a window is shown as one passage, and
    showing its other lines would still put the excluded words one click away. The other
    filters keep the messages that pass, as `from:` does."""
    if not flt:
        return tuple(messages)
    if flt.exclude_words and any(_holds_excluded(flt, str(m.get("body", ""))) for m in messages):
        return ()
    return tuple(m for m in messages if flt._keeps(m, thread_root))
