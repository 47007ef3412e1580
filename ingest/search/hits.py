"""`ingest.search.hits`: what a search answers (`Hit`, `SearchResult`) and the pure rules over
stored windows it cites by: the excerpt, purges, the events a window cites.

A stored window is read as a `WindowPayload` (`window_of`): the §4 payload the writer builds
(`ingest.index.points.build_payload`), its messages as `StoredMessage`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, Required, TypedDict, cast

from ingest.index.records import Tombstone
from ingest.rules import lexical
from ingest.search.filters import Said, msgtype_of
from ingest.search.ranking import rank
from ingest.types import StoredPoint


class StoredMessage(TypedDict):
    """A message as a window's payload keeps it (`ingest.index.chunker.window_payload`)."""

    event_id: str
    sender: str
    ts: int
    body: str  # scrubbed, with the latest valid edit applied
    msgtype: NotRequired[str]  # absent in a payload written before CHUNKER_VERSION 6: m.text
    mentions: NotRequired[list[str]]  # `m.mentions.user_ids`; absent: the event had none
    edit_event_id: NotRequired[str]  # the edit applied to it, if any
    edit_ts: NotRequired[int]


class WindowPayload(TypedDict, total=False):
    """The payload of a stored window (docs/ARCHITECTURE.md §4): what a hit is built from
    and revalidated by. Only `room_id` is read unconditionally."""

    corpus: str
    room_id: Required[str]
    room_alias: str | None
    thread_root: str | None
    event_ids: list[str]  # its messages' ids, then the ids of the edits applied to them
    first_event_id: str
    last_event_id: str
    first_ts: int
    last_ts: int
    senders: list[str]
    messages: list[StoredMessage]
    text: str
    content_hash: str
    versions: dict[str, object]
    lines: dict[str, str]  # event id -> its line vector (`ingest.embed.linecodec`)


def window_of(point: StoredPoint) -> WindowPayload:
    """A stored point's payload as the window record the writer stored it as (the store
    keeps JSON and returns it untyped)."""
    return cast(WindowPayload, point.payload)


class Quoted(TypedDict):
    """A message read from the homeserver now, as MCP's `context` tool shows it (issue 49:
    `bot.operations.context.Showing`)."""

    event_id: str
    sender: str
    ts: int
    body: str
    msgtype: str
    permalink: str


class Beside(TypedDict):
    """The messages before and after one, each side oldest first."""

    before: list[Quoted]
    after: list[Quoted]


class CitedMessage(TypedDict):
    """One message a hit cites, as replies and the JSON answer show it."""

    event_id: str
    sender: str
    ts: int
    body: str  # a file, image, video or audio clip: its filename and caption
    msgtype: NotRequired[str]  # `m.text`, `m.emote`, `m.file`, `m.image`, …; absent: m.text
    # A hit's best message asked with `context` (MCP, `muninn search --context N`).
    context: NotRequired[Beside]


class Behind(TypedDict):
    """A searched room the index has not caught up with (`bot.operations.freshness`)."""

    room_id: str
    room_alias: str | None
    reason: str  # `not_read`: no cursor; `behind`: its homeserver holds events after it
    indexed_ts: int | None  # the cursor's `updated_ms`
    lag_seconds: float | None


@dataclass(frozen=True)
class Hit:
    """A window cited exactly: room, events, senders, times, and a permalink."""

    point_id: str
    room_id: str
    room_alias: str | None
    thread_root: str | None
    first_event_id: str
    last_event_id: str
    event_ids: tuple[str, ...]
    messages: tuple[CitedMessage, ...]
    score: float
    permalink: str
    best_event_id: str  # the message that matched best: replies show it as the excerpt
    # Whether the second stage judged it a close match, listed before any weaker candidate
    # (`Judgment.leading`; False: among the nearest).
    close: bool = True
    # the messages that matched, best first (`ingest.search.matches`); empty: not chosen yet
    matched: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "room_alias": self.room_alias,
            "thread_root": self.thread_root,
            "first_event_id": self.first_event_id,
            "last_event_id": self.last_event_id,
            "event_ids": list(self.event_ids),
            "messages": [{**m, "msgtype": msgtype_of(m)} for m in self.messages],
            "score": self.score,
            "permalink": self.permalink,
            "best_event_id": self.best_event_id,
            "close": self.close,
            "matched_event_ids": list(self.matched or (self.best_event_id,)),
        }


@dataclass
class SearchResult:
    hits: list[Hit] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    retrievers: list[str] = field(default_factory=list)
    dropped_stale: int = 0
    below_floor: int = 0  # weaker candidates left out (a nonsense query's; or not close)
    # Hits there are, but the second stage judged none of the query's candidates close: the
    # reply says they are only the nearest.
    nothing_close: bool = False
    # A person's page of weaker matches: the close ones were on earlier pages (rule 22c).
    weaker: bool = False
    next_offset: int | None = None  # the `offset` of the next page; None on the last
    sort: str = "relevance"
    remaining: int = 0  # candidates past this page, not yet revalidated (not in the JSON)
    weaker_next: bool = False  # the next page is of weaker matches (not in the JSON)
    matched: list[str] = field(default_factory=list)  # the page's messages, in reading order
    # The searched rooms the index has not caught up with (`muninn search --json` and MCP
    # only: `bot.operations.freshness`); None: not asked (the listener's, chat's), no key.
    indexing: list[Behind] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "hits": [h.as_json() for h in self.hits],
            "warnings": list(self.warnings),
            "retrievers": list(self.retrievers),
            "dropped_stale": self.dropped_stale,
            "below_floor": self.below_floor,
            "nothing_close": self.nothing_close,
            "weaker": self.weaker,
            "next_offset": self.next_offset,
            "sort": self.sort,
            "matched_event_ids": list(self.matched),
            **({"indexing": list(self.indexing)} if self.indexing is not None else {}),
        }


def cited_events(payload: WindowPayload) -> list[str]:
    """The events a window cites. `event_ids` holds the applied edits too: a redacted edit's
    text is as gone as a redacted message's, though the message it edited still stands."""
    return [str(e) for e in payload.get("event_ids") or ()] or [
        str(m["event_id"]) for m in payload.get("messages", [])
    ]


def window_purged(payload: WindowPayload, stones: Iterable[Tombstone]) -> bool:
    """Whether a purge covers any message of a window (the whole window is then withheld)."""
    room_id = str(payload.get("room_id"))
    return any(purged(stones, room_id, int(m["ts"])) for m in payload.get("messages", []))


def purged(stones: Iterable[Tombstone], room_id: str, ts: int) -> bool:
    """Whether a purge of `room_id` covers a message sent at `ts` (rule 12)."""
    return any(s.room_id == room_id and s.covers(ts) for s in stones)


def window_span(payload: WindowPayload, shown: Sequence[StoredMessage]) -> rank.Span:
    """A window's timeline (room and thread) and the first and last time of its shown messages."""
    line = f"{payload.get('room_id')}\x1f{payload.get('thread_root') or ''}"
    stamps = [int(m["ts"]) for m in shown]
    return line, min(stamps), max(stamps)


def has_text(message: Said) -> bool:
    """Whether a stored message has text to show (an edit into a notice, media or a command
    leaves an empty body: nothing to cite)."""
    return bool(str(message.get("body", "")).strip())


def best_message(messages: Sequence[CitedMessage], texts: Sequence[str]) -> str:
    """The message sharing the most query terms (earliest on ties): the hit's excerpt."""
    terms = {t for text in texts for t in lexical.tokens(text)}
    best_id, best_score = str(messages[0]["event_id"]), -1
    for m in messages:
        score = len(terms.intersection(lexical.tokens(str(m["body"]))))
        if score > best_score:
            best_id, best_score = str(m["event_id"]), score
    return best_id
