"""The conversation around a message, as a reply would quote it now: MCP's `context` tool, and
each hit's `context` (MCP `search`, `muninn search --context N`), one owner for both.

The homeserver's `/context` read is the input; what comes out holds only what every other answer
may show (docs/ARCHITECTURE.md §3 rule 29): messages the writer would index (no notice, command,
ciphertext or Muninn's own), by their current text and msgtype (the author's latest valid edit,
the homeserver's bundled one: `ingest.search.logs.roomlog.current_body`), scrubbed, never a
redacted one or one a purge covers, in a room scope admits now (rules 1–5; a puppet among the
events read refuses it). A message whose current text cannot be told is left out, never shown
with words an edit took back; around a message it may not show, nothing is quoted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import unquote

from bot.config import ServiceConfig
from bot.operations.pins import recorded_purges
from ingest.errors import MatrixError, QueryError
from ingest.index.records import Tombstone
from ingest.matrix import ClientEvent, MatrixReader, as_event, bundled_edit
from ingest.matrix.rooms import RoomCache
from ingest.rules.events import normalize
from ingest.rules.scope import puppet_in_events
from ingest.search.hits import Beside, CitedMessage, Hit, Quoted, SearchResult, purged
from ingest.search.logs.roomlog import current_body
from ingest.search.permalink import MATRIX_TO, permalink
from ingest.types import Edit, Message, RoomID, RoomState

__all__ = [
    "MAX_AROUND",
    "MAX_BESIDE",
    "Around",
    "EventRef",
    "Showing",
    "around",
    "event_ref",
    "read_around",
    "showing_for",
    "with_context",
]

MAX_AROUND = 25  # messages either side of the event a `context` call may ask for
MAX_BESIDE = 10  # messages either side of each hit's best message a search may ask for
# The homeserver's `/context` read: the events before (newest first), the event, those after.
Around = tuple[Sequence[ClientEvent], ClientEvent, Sequence[ClientEvent]]
_ID = re.compile(r"[!#$][^\s/?#]{1,254}", re.ASCII)


@dataclass(frozen=True)
class EventRef:
    """An event as an agent names it: an id (its room given apart) or a matrix.to permalink."""

    event_id: str
    room: str | None  # a room id or alias, when the permalink carried it


def event_ref(text: str, argument: str = "event") -> EventRef:
    """`$event` or `https://matrix.to/#/<room>/<event>?via=…`; else a QueryError naming
    `argument`."""
    text = text.strip()
    if text.startswith(MATRIX_TO):
        path = text[len(MATRIX_TO) :].split("?", 1)[0]
        parts = [unquote(p) for p in path.split("/")]
        if len(parts) == 2 and _ID.fullmatch(parts[0]) and parts[0][0] in "!#":
            room, event = parts
            if _ID.fullmatch(event) and event.startswith("$"):
                return EventRef(event, room)
        raise QueryError(
            argument, "a matrix.to permalink names a room and a message: …/#/!room/$event"
        )
    if _ID.fullmatch(text) and text.startswith("$"):
        return EventRef(text, None)
    raise QueryError(argument, "give an event id ($…) or a matrix.to permalink to a message")


@dataclass(frozen=True)
class Showing:
    """What may be shown of a fetched event, and how (pure): the reader's own id and the
    command prefix (rule 9), the purges (rule 12), the permalinks' server."""

    reader_id: str
    prefix: str
    stones: Sequence[Tombstone]
    server_name: str

    def message(self, room_id: str, e: ClientEvent) -> Quoted | None:
        """`e` as a message shows (`{event_id, sender, ts, body, msgtype, permalink}`), or None
        when it may not be shown."""
        found = self.item(room_id, e)
        return found[1] if found is not None else None

    def item(self, room_id: str, e: ClientEvent) -> tuple[Message, Quoted] | None:
        """`e` as the writer reads it and as it shows (`message`), or None."""
        own = frozenset({self.reader_id})
        item = normalize(e, own_user_ids=own, command_prefix=self.prefix)
        if not isinstance(item, Message) or purged(self.stones, room_id, item.ts):
            return None
        body = current_body(e, self.reader_id, self.prefix)
        if body is None or not body.strip():  # an edit into a notice or a command says nothing
            return None
        msgtype = item.msgtype
        bundled = as_event(bundled_edit(e))  # `current_body` took it: it is the author's, valid
        if bundled is not None:
            edit = normalize(bundled, own_user_ids=own, command_prefix=self.prefix)
            msgtype = edit.msgtype if isinstance(edit, Edit) else msgtype
        link = permalink(room_id, item.event_id, self.server_name)
        return item, Quoted(
            event_id=item.event_id,
            sender=item.sender,
            ts=item.ts,
            body=body,
            msgtype=msgtype,
            permalink=link,
        )


async def showing_for(cfg: ServiceConfig, reader: MatrixReader) -> Showing:
    """What may be shown of an event `reader` reads now (the recorded purges: the purge file's,
    and the store's while no service holds it)."""
    stones = await recorded_purges(cfg)
    return Showing(reader.user_id, cfg.bot.prefix, stones, cfg.homeserver.server_name)


def beside(
    room_id: str, event_id: str, read: Around, showing: Showing, *, before: int, after: int
) -> tuple[list[Quoted], list[Quoted]] | None:
    """The shown messages before `event_id` (at most `before`) and after it (at most `after`),
    each oldest first; None when the event itself may not be shown (nothing is quoted then)."""
    newest_first, event, oldest_first = read
    centre = showing.message(room_id, event)
    if centre is None or centre["event_id"] != event_id:
        return None
    older = [m for e in newest_first if (m := showing.message(room_id, e)) is not None][:before]
    newer = [m for e in oldest_first if (m := showing.message(room_id, e)) is not None][:after]
    return list(reversed(older)), newer


def around(
    room_id: RoomID,
    event_id: str,
    read: Around,
    *,
    before: int,
    after: int,
    reader_id: str,
    prefix: str,
    stones: Sequence[Tombstone],
    server_name: str,
) -> list[Quoted]:
    """The shown messages around `event_id`, oldest first: at most `before` older ones, the
    event's own, at most `after` newer ones. A QueryError naming `event` when the event itself
    may not be shown (redacted, purged, not a message): nothing is quoted around it then."""
    showing = Showing(reader_id, prefix, stones, server_name)
    sides = beside(room_id, event_id, read, showing, before=before, after=after)
    centre = showing.message(room_id, read[1])
    if sides is None or centre is None:
        raise QueryError("event", f"{event_id} is no message that can be shown")
    older, newer = sides
    return [*older, centre, *newer]


async def read_around(
    reader: MatrixReader,
    rooms: RoomCache,
    room_id: RoomID,
    given: str,
    event_id: str,
    either_side: int,
) -> tuple[RoomState, Around]:
    """The room's state and the homeserver's `/context` read around `event_id`, enough for
    `either_side` shown messages each side; a QueryError naming `room` when scope refuses the
    room now (a puppet among the events read included), `event` when there is no such event."""
    info = await rooms.get(room_id)
    if not info.verdict.eligible or info.state is None:
        raise QueryError("room", f"{given} is refused ({info.verdict.reason})")
    # The homeserver splits the limit either side; other events than messages count.
    read = await reader.context(room_id, event_id, 4 * max(either_side, 1))
    if read is None:
        raise QueryError("event", f"no event {event_id} in {given}")
    if (puppet := puppet_in_events([*read[0], read[1], *read[2]], rooms.scope)) is not None:
        raise QueryError("room", f"{given} is refused (bridged: {puppet} is a puppet)")
    return info.state, read


async def with_context(
    reader: MatrixReader, rooms: RoomCache, result: SearchResult, n: int, showing: Showing
) -> SearchResult:
    """`result` with each hit's best message carrying `context: {before, after}`, up to `n`
    shown messages each side read now from the homeserver (the hits' reads at once). A hit
    whose room scope refuses now, or whose message may no longer be shown, gets empty sides."""
    if n <= 0 or not result.hits:
        return result

    async def sides(hit: Hit) -> Hit:
        try:
            _, read = await read_around(
                reader, rooms, RoomID(hit.room_id), hit.room_id, hit.best_event_id, n
            )
            found = beside(hit.room_id, hit.best_event_id, read, showing, before=n, after=n)
        except (QueryError, MatrixError):  # refused now, or not read: nothing beside it
            found = None
        older, newer = found or ([], [])
        sides = Beside(before=older, after=newer)
        messages = tuple(
            CitedMessage(**m, context=sides) if m["event_id"] == hit.best_event_id else m
            for m in hit.messages
        )
        return replace(hit, messages=messages)

    hits = await asyncio.gather(*(sides(h) for h in result.hits))
    return replace(result, hits=list(hits))
