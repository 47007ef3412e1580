"""The room log: one bounded read of a room's latest raw events, and what is read from it.

`ingest.search.logs.recent.RecentEvents` keeps each room's latest raw events between commands
(derived state, never the record); `RoomLog` is one read of them (`reader.latest`), bounded by
events and by `SCAN_TEXT`. The transcript fold, the pinboard fold and the "did the bot already
answer?" check are all computed from a `RoomLog`, through `without_purged` once the purges are
known.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mautrix.types import EventType, RelationType

from ingest.index.records import Tombstone
from ingest.matrix import (
    ClientEvent,
    EventContent,
    as_event,
    bundled_edit,
    content_of,
    relation_of,
)
from ingest.rules.events import normalize, thread_root, typed_text
from ingest.rules.scrub import scrub
from ingest.rules.stamps import event_ts
from ingest.search.hits import purged
from ingest.search.logs.memo import TextMemo
from ingest.search.logs.recent import EVENT_OVERHEAD, SCAN_TEXT, emptied, text_size
from ingest.types import Edit, Message, Normalized, RoomID

__all__ = [
    "RoomLog",
    "ScanInfo",
    "TextMemo",
    "TimelineItem",
    "current_body",
]


@dataclass(frozen=True)
class TimelineItem:
    """An `m.room.message` as the pinboard reads it; a redacted one keeps its place, body ''.

    `body` is what the sender typed (`typed_text`: a reply's fallback quote removed), the text
    the command grammar and `^N` read, as `ingest.types.Message.body` is."""

    event_id: str
    sender: str
    ts: int
    body: str
    thread_root: str | None
    content: EventContent
    redacted: bool
    # When the redaction was sent (its `origin_server_ts`), if the homeserver said: a message
    # redacted before a `!pin ^N` is not one of the N it counts.
    redacted_ts: int | None = None


def _item(event: ClientEvent) -> TimelineItem | None:
    if event.get("type") != EventType.ROOM_MESSAGE.t or "state_key" in event:
        return None
    content = content_of(event)
    if relation_of(content).get("rel_type") == RelationType.REPLACE.value:
        return None  # an edit is not a message of its own
    unsigned = event.get("unsigned")
    because = unsigned.get("redacted_because") if isinstance(unsigned, dict) else None
    redacted = not content or because is not None
    body = content.get("body")
    ts = event.get("origin_server_ts")
    return TimelineItem(
        str(event.get("event_id", "")),
        str(event.get("sender", "")),
        ts if isinstance(ts, int) else 0,
        "" if redacted or not isinstance(body, str) else typed_text(body, content),
        thread_root(content),
        content,
        bool(redacted),
        event_ts(because.get("origin_server_ts")) if isinstance(because, dict) else None,
    )


# Every `!search` folds the same recent events again, and the scrub is most of that fold.
_scrubbed = TextMemo(scrub, 16_000_000)


class _NormalizedMemo:
    """`normalize` remembered per event *object*, bounded like the copies (text plus
    `EVENT_OVERHEAD` an event), the oldest entries going first.

    A room's copy (`RecentEvents`) hands the same event objects to command after command, and
    nothing changes an event in place: a redaction or a purge replaces it with a new, emptied
    object (`emptied`), which misses here and is read afresh. The entry holds the event
    itself, so its `id` cannot be reused while remembered, and a hit is checked by identity.
    """

    def __init__(self, max_size: int) -> None:
        self._max = max_size
        self.size = 0
        self._done: dict[tuple[int, frozenset[str], str], tuple[ClientEvent, Normalized]] = {}
        self._lock = threading.Lock()

    def __call__(self, event: ClientEvent, own: frozenset[str], prefix: str) -> Normalized:
        key = (id(event), own, prefix)
        hit = self._done.get(key)
        if hit is not None and hit[0] is event:
            return hit[1]
        item = normalize(event, own_user_ids=own, command_prefix=prefix)
        if not content_of(event):
            return item  # redacted or purged: read at once, and a fresh object every command
        with self._lock:
            gone = self._done.pop(key, None)
            if gone is not None:
                self.size -= text_size(gone[0]) + EVENT_OVERHEAD
            self._done[key] = (event, item)
            self.size += text_size(event) + EVENT_OVERHEAD
            while self.size > self._max:
                old = self._done.pop(next(iter(self._done)))[0]
                self.size -= text_size(old) + EVENT_OVERHEAD
        return item


# Each command in a room normalizes its latest events again: as many as a copy holds.
_normalized = _NormalizedMemo(4 * SCAN_TEXT)


@dataclass(frozen=True)
class ScanInfo:
    """How far the transcript fold looked."""

    scanned: int
    bound: int
    oldest_ts: int | None
    cut: bool = False  # stopped by the text bound before `bound` events


@dataclass(frozen=True)
class RoomLog:
    """The latest `bound` raw events of a room, newest first (as `reader.latest` returns them)."""

    room_id: RoomID
    raw: Sequence[ClientEvent]
    bound: int
    cut: bool = False  # the read stopped at `SCAN_TEXT`, short of `bound` and of the room

    def scan(self) -> ScanInfo:
        # A malformed stamp (negative: "back to 1969") dates nothing the scan read.
        stamps = [ts for e in self.raw if (ts := event_ts(e.get("origin_server_ts"))) is not None]
        return ScanInfo(len(self.raw), self.bound, min(stamps, default=None), self.cut)

    def answered(self, event_id: str, bot_user_id: str) -> bool:
        """Whether the bot's own notice already replies to `event_id` within this read."""
        for event in self.raw:
            if event.get("sender") == bot_user_id:
                rel = relation_of(content_of(event)).get("m.in_reply_to")
                if isinstance(rel, dict) and rel.get("event_id") == event_id:
                    return True
        return False

    def messages(self, bot_user_id: str, prefix: str) -> list[Message]:
        """Searchable messages, newest first, with valid edits applied (same sender)."""
        own = frozenset({bot_user_id})
        items = [_normalized(e, own, prefix) for e in self.raw]
        authors = {i.event_id: i.sender for i in items if isinstance(i, Message)}
        latest_edit: dict[str, Edit] = {}
        for item in items:  # newest first: the first valid edit seen per target is the latest
            if not isinstance(item, Edit):
                continue
            # Another sender's edit is void; an edit of an edit has no Message as its target.
            if item.sender == authors.get(item.target):
                latest_edit.setdefault(item.target, item)
        out: list[Message] = []
        for item in items:
            if isinstance(item, Message):
                edit = latest_edit.get(item.event_id)
                if edit is not None:  # as the writer applies it (`WindowSet.apply_edit`)
                    item = replace(item, body=edit.new_body, msgtype=edit.msgtype)
                # The transcript sees messages the writer has not scrubbed yet: a secret must
                # never reach a reply either (rule 8).
                clean = _scrubbed(item.body)
                out.append(item if clean == item.body else replace(item, body=clean))
        return out

    def without_purged(self, stones: Sequence[Tombstone]) -> RoomLog:
        """This read with every message a purge covers emptied, as a redaction empties it.

        The one place the room log meets the purges (`purged`, rule 12): the
        transcript, the pinboard and `!pin` read the log only through it, so a purge hides a
        message (and a `!pin` marker, with its note) before any refresh applied it. Edits keep
        their text: the writer applies an edit whatever its time, and emptying it would bring
        back the words it replaced.
        """
        if not any(s.room_id == self.room_id for s in stones):
            return self
        raw = [
            emptied(e)
            if isinstance(ts := e.get("origin_server_ts"), int)
            and e.get("type") == EventType.ROOM_MESSAGE.t
            and relation_of(content_of(e)).get("rel_type") != RelationType.REPLACE.value
            and purged(stones, self.room_id, ts)
            else e
            for e in self.raw
        ]
        return replace(self, raw=raw)

    def timeline(self) -> list[TimelineItem]:
        """Every message of the read, oldest first (redacted ones as placeholders)."""
        return [i for e in reversed(self.raw) if (i := _item(e)) is not None]


def current_body(event: ClientEvent, bot_user_id: str, prefix: str) -> str | None:
    """A fetched event's text as it reads now (scrubbed), or None when it cannot be told.

    Beyond the scanned bound the bot has no log to fold edits from, but the homeserver bundles
    the latest edit in `unsigned.m.relations.m.replace` (spec v1.7; Synapse picks it by
    sender, type and room, and leaves out redacted ones). It counts only by the writer's
    rules: the author's own edit of this event, with a usable `m.new_content`. A latest edit
    that fails them hides an unknown number of earlier, valid ones, so the text is not told
    (None) rather than the original shown with words an edit took back. An edit event itself
    is not a message: its `* fallback` body is never shown.
    """
    content = content_of(event)
    body = content.get("body")
    if (
        not isinstance(body, str)
        or relation_of(content).get("rel_type") == RelationType.REPLACE.value
    ):
        return None
    own = frozenset({bot_user_id})
    bundled = bundled_edit(event)
    if bundled is None:
        # A message's text as the writer reads it (a file's: its filename and caption), else
        # (a notice, a command) what was typed.
        item = normalize(event, own_user_ids=own, command_prefix=prefix)
        return _scrubbed(item.body if isinstance(item, Message) else typed_text(body, content))
    edit_event = as_event(bundled)
    edit = (
        normalize(edit_event, own_user_ids=own, command_prefix=prefix)
        if edit_event is not None
        else None
    )
    if (
        isinstance(edit, Edit)
        and edit.target == event.get("event_id")
        and edit.sender == event.get("sender")
        and edit.room_id == event.get("room_id", edit.room_id)
    ):
        return _scrubbed(edit.new_body)
    return None
