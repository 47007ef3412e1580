"""Each room's latest raw events, kept between commands: the cache a `RoomLog` is read from.

Derived state, never the record (`RecentEvents`); every read is bounded by events and by
`SCAN_TEXT` characters of message text, each event's text fields together kept to their first
`EVENT_SHARE` characters (`within_text`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import NamedTuple, Protocol, cast

from mautrix.types import EventType

from ingest.errors import failure_retrieved
from ingest.matrix import ClientEvent, Unsigned, content_of
from ingest.types import RoomID

__all__ = [
    "EVENT_OVERHEAD",
    "EVENT_SHARE",
    "SCAN_TEXT",
    "Latest",
    "RecentEvents",
    "RoomLogSource",
    "emptied",
    "text_size",
    "trimmed",
    "within_text",
]


SCAN_TEXT = 1_000_000  # characters of message text (bodies, HTML, edits) one read keeps
# Characters of one event's text (its body and HTML, an edit's new ones and fallback together)
# a read keeps: an event's share of `SCAN_TEXT` is bounded, so 17 messages of 62 KB no longer
# fill the read and empty the pinboard, nor do 126 big edits, whose four fields were each kept
# to this share (issue 46): `SCAN_TEXT` holds 500 events of this share, whatever they are.
EVENT_SHARE = 2_000
EVENT_OVERHEAD = 256  # characters counted per event besides its text, for the memory bound
_TEXT_FIELDS = ("body", "formatted_body")


def text_size(event: ClientEvent) -> int:
    """The text the folds work through in an event: its body and HTML, and an edit's."""
    content = content_of(event)
    new = content.get("m.new_content")
    parts = [content.get("body"), content.get("formatted_body")]
    if isinstance(new, dict):
        parts += [new.get("body"), new.get("formatted_body")]
    return sum(len(p) for p in parts if isinstance(p, str))


def within_text(
    events: Sequence[ClientEvent], limit: int = SCAN_TEXT
) -> tuple[list[ClientEvent], bool]:
    """The newest events, each cut to `EVENT_SHARE` (`trimmed`), whose text adds
    up to at most `limit` characters, and whether that left any out: 2,048 events of 16 KB
    cost seconds of scrubbing per command otherwise."""
    kept, cut, _, _ = _within(events, limit)
    return kept, cut


def _cut(text: str, share: int) -> str:
    """At most `share` characters of `text`, ending at a word's end: a token, a key or a
    password is kept whole or not at all, so the scrub sees every secret it keeps whole."""
    if len(text) <= share:
        return text
    head = text[: share + 1]
    end = max(head.rfind(c) for c in " \t\n\r")
    return head[:end] if end > 0 else ""


def trimmed(event: ClientEvent) -> ClientEvent:
    """`event` with its text fields cut (`_cut`) to `EVENT_SHARE` characters together, in the
    order the folds read them: an edit's new body and HTML, then the body (an edit's `* …`
    fallback, which no fold reads) and the HTML. What a read folds of a message is its start;
    the event itself if it is within its share."""
    if text_size(event) <= EVENT_SHARE:
        return event
    content = dict(content_of(event))
    new = content.get("m.new_content")
    holders = [content]
    if isinstance(new, dict):
        holders.insert(0, dict(new))
        content["m.new_content"] = holders[0]
    left = EVENT_SHARE
    for holder in holders:
        for key in _TEXT_FIELDS:
            if isinstance(value := holder.get(key), str):
                kept = holder[key] = _cut(value, left)
                left -= len(kept)
    return cast(ClientEvent, {**event, "content": content})


def _within(
    events: Sequence[ClientEvent], limit: int, known: Mapping[int, int] | None = None
) -> tuple[list[ClientEvent], bool, int, list[int]]:
    """`within_text`, the text the kept events hold (the copy's size, without a second
    pass over them) and each kept event's. `known`: the text of events kept before, by `id`
    (a copy's own events, alive while it is read: already trimmed, their size is known)."""
    total = 0
    kept: list[ClientEvent] = []
    sizes: list[int] = []
    for event in events:
        size = known.get(id(event)) if known else None
        if size is None:
            event = trimmed(event)
            size = text_size(event)
        if total + size > limit:
            return kept, True, total, sizes
        kept.append(event)
        sizes.append(size)
        total += size
    return kept, False, total, sizes


class RoomLogSource(Protocol):
    """A room's timeline, newest first (as `/messages?dir=b` serves it)."""

    async def latest(self, room_id: RoomID, limit: int) -> Sequence[ClientEvent]: ...

    async def newer_than(
        self, room_id: RoomID, known: Set[str], limit: int
    ) -> tuple[list[ClientEvent], bool]: ...


class Latest(NamedTuple):
    """One read of a room's latest events (`RecentEvents.read`): values only."""

    events: list[ClientEvent]  # newest first, within `SCAN_TEXT`
    cut: bool  # the text bound left older events out
    # A read since the last one taken may have passed a change of the room's state: a state
    # event or a redaction among the new events, or a copy read whole (what came between is
    # unknown). What the caller keeps from the room's state (its audience) is stale then.
    state_passed: bool = False


@dataclass
class _Copy:
    kept: int  # the event bound the copy was read with
    events: list[ClientEvent]  # newest first, at most `kept`, within `SCAN_TEXT`
    cut: bool  # `SCAN_TEXT` left older events out
    size: int  # text plus `EVENT_OVERHEAD` per event, for the cache's memory bound
    sizes: list[int]  # each event's text, as `events`: a burst's reads size only what is new
    read_at: float  # `time.monotonic()` of the copy's last whole read
    asked_at: float  # `time.monotonic()` when the copy's last read (whole or not) began


class RecentEvents:
    """Each room's latest raw events, kept between commands and extended from the newest end.

    Derived state, never the record: a command reads only what is newer than the copy (one
    short `/messages` page in a quiet room instead of 2,048 events), and a redaction among the
    new events empties its target here as the homeserver does. A copy that cannot be extended
    (more than `bound` new events) is replaced by a fresh read. Each copy keeps `SCAN_TEXT` of
    text at most, and all copies together about `max_size` characters (least recently used
    rooms go first). Commands answered at once in one room take turns per room, so each extends
    the copy the one before it left instead of all reading the whole bound afresh; and a
    command whose turn comes after a read that began once it asked takes that read as its own:
    it holds all the room had when the command asked (the command itself included), as the
    command's own read would, so commands waiting at once share one read. A read outlives a
    command cut off by its deadline, so its copy still serves the next command instead of
    every one starting over.

    `read` says whether a read may have passed a change of the room's state
    (`Latest.state_passed`): a state event or a redaction among the new events, or a read
    that could not extend the copy (read whole: what came between is unknown), a read a
    command cut off by its deadline left included. It sees every event of the timeline,
    unlike client mode's limited `/sync`, so the caller drops what it keeps per room from the
    state (the room's audience) by it: a value handed back, no call into the caller.
    """

    MAX_ROOMS = 256
    MAX_SIZE = 64_000_000
    # A homeserver can delete history without a redaction event (an admin's purge, a retention
    # policy), which extending from the newest end never sees: a copy is read whole again once
    # this old, so such a deletion leaves replies within a minute. A burst still folds once.
    MAX_AGE_SECONDS = 60.0

    def __init__(self, max_size: int = MAX_SIZE) -> None:
        self._passed: set[str] = set()  # rooms whose state a read may have passed, not told yet
        self._rooms: dict[str, _Copy] = {}
        self._turns: dict[str, asyncio.Lock] = {}
        self._max_size = max_size
        self.size = 0
        self._reads: dict[str, asyncio.Future[tuple[list[ClientEvent], bool]]] = {}  # per room

    async def latest(
        self, client: RoomLogSource, room_id: RoomID, bound: int
    ) -> tuple[list[ClientEvent], bool]:
        """The room's latest `bound` events, newest first, as `client.latest` would return
        them but within `SCAN_TEXT`; and whether that text bound left older events out."""
        events, cut, _ = await self.read(client, room_id, bound)
        return events, cut

    async def read(self, client: RoomLogSource, room_id: RoomID, bound: int) -> Latest:
        """`latest`, and whether a read of the room since the last one `read` took may have
        passed a change of its state (told once)."""
        events, cut = await self._turn(client, room_id, bound)
        passed = room_id in self._passed
        self._passed.discard(room_id)
        return Latest(events, cut, passed)

    async def _turn(
        self, client: RoomLogSource, room_id: RoomID, bound: int
    ) -> tuple[list[ClientEvent], bool]:
        asked = time.monotonic()
        turn = self._turns.setdefault(room_id, asyncio.Lock())
        async with turn:
            earlier = self._reads.get(room_id)
            if earlier is not None and not earlier.done():
                await asyncio.wait([earlier])  # a cut-off command's read: let it fill the copy
            shared = self._rooms.pop(room_id, None)
            if shared is not None:
                self._rooms[room_id] = shared  # the most recently used last
                if shared.asked_at >= asked and shared.kept >= bound:
                    return _served(shared, bound)
            read = asyncio.ensure_future(self._latest(client, room_id, bound))
            read.add_done_callback(failure_retrieved)
            self._reads[room_id] = read
            return await asyncio.shield(read)

    async def _latest(
        self, client: RoomLogSource, room_id: RoomID, bound: int
    ) -> tuple[list[ClientEvent], bool]:
        cached = self._rooms.pop(room_id, None)
        if cached is not None:
            self.size -= cached.size
        older = False  # events beyond the copy's tail that the text bound left out
        sized: dict[int, int] = {}  # the copy's events' text, by id: `cached` holds them alive
        read_at = asked_at = time.monotonic()
        if (
            cached is None
            or cached.kept < bound
            or read_at - cached.read_at > self.MAX_AGE_SECONDS
        ):
            kept, events = bound, list(await client.latest(room_id, bound))
            self._passed.add(room_id)
        else:
            read_at = cached.read_at  # extended, not read whole: the copy's age stands
            # Keep the larger bound a copy was read with: `!help` reading 64 events must not
            # shrink the copy `!search` extends.
            kept, old = cached.kept, cached.events
            sized = {id(e): n for e, n in zip(old, cached.sizes, strict=True)}
            known = {str(e.get("event_id")) for e in old}
            new, met = await client.newer_than(room_id, known, kept)
            # Not met: more than `kept` new events arrived, and they are the latest `kept`.
            events = _merge(new, old)[:kept] if met else list(new)
            if not met:
                read_at = time.monotonic()  # the latest `kept`, read whole
            if not met or any(_changes_state(e) for e in new):
                self._passed.add(room_id)
            older = met and cached.cut
        events, cut, text, sizes = _within(events, SCAN_TEXT, sized)
        size = text + EVENT_OVERHEAD * len(events)
        copy = _Copy(kept, events, cut or older, size, sizes, read_at, asked_at)
        raced = self._rooms.pop(room_id, None)  # another command's read of this room meanwhile
        if raced is not None:
            self.size -= raced.size
        self._rooms[room_id] = copy
        self.size += copy.size
        while len(self._rooms) > self.MAX_ROOMS or (
            self.size > self._max_size and len(self._rooms) > 1
        ):
            gone = next(iter(self._rooms))  # the least recently used room
            self.size -= self._rooms.pop(gone).size
            self._passed.discard(gone)  # its next read is whole, and says so again
            if gone in self._turns and not self._turns[gone].locked():
                del self._turns[gone]
                self._reads.pop(gone, None)
        return _served(copy, bound)


def _served(copy: _Copy, bound: int) -> tuple[list[ClientEvent], bool]:
    """The copy's latest `bound` events, and whether the text bound cut them (else `bound`)."""
    return copy.events[:bound], copy.cut and len(copy.events) <= bound


def _changes_state(event: ClientEvent) -> bool:
    """A state event, or a redaction (of a state event, perhaps: its content goes too)."""
    return "state_key" in event or event.get("type") == EventType.ROOM_REDACTION.t


def _merge(new: Sequence[ClientEvent], cached: Sequence[ClientEvent]) -> list[ClientEvent]:
    redacted = {
        str(content_of(e).get("redacts") or e.get("redacts")): e
        for e in new
        if e.get("type") == EventType.ROOM_REDACTION.t
    }
    out = list(new)
    for event in cached:
        by = redacted.get(str(event.get("event_id")))
        out.append(emptied(event, by.get("origin_server_ts")) if by is not None else event)
    return out


def emptied(event: ClientEvent, redacted_at: object = None) -> ClientEvent:
    """The event as the homeserver serves it once redacted: no content, `redacted_because`
    (with the redaction's time, when it is known)."""
    because: dict[str, object] = {"redacted": True}
    if redacted_at is not None:
        because["origin_server_ts"] = redacted_at
    trace = {"redacted_because": because}
    unsigned = cast(Unsigned, {**(event.get("unsigned") or {}), **trace})
    return {**event, "content": {}, "unsigned": unsigned}
