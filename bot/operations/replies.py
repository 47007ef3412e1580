"""`reply_to`: the messages answering one message (MCP `search`, `muninn search --reply-to`).

Its rich replies (`m.in_reply_to` naming it) and its thread (`m.thread` rooted at it), read from
the homeserver now, as `context` reads (`bot.operations.context.Showing`): in a room scope
admits now (a DM, bridged, encrypted or excluded room is refused, and so is one a puppet spoke
in among the events read), each as its author last edited it, scrubbed, none redacted, purged,
a notice, a command or Muninn's own; nothing is read around a message that may not be shown.
The thread is read whole (`/relations`); rich replies outside it are looked for in the
`MAX_SCAN` messages sent after the message, and a warning says when that bound was reached.
The search's other arguments narrow the list (senders, times, `has`, exclusions, mentions,
threads; texts: the replies holding their words, as `match: words`). Each reply is a hit of
one message, in the order sent (`sort: recent`: newest first), paged by `limit` and `offset`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from mautrix.types import EventType

from bot.operations.context import Showing
from ingest.errors import QueryError
from ingest.matrix import ClientEvent, MatrixReader, content_of
from ingest.matrix.rooms import RoomCache
from ingest.rules.events import reply_target, thread_root
from ingest.rules.scope import puppet_in_events
from ingest.search.filters import NO_FILTER, MessageFilter, Said, keep_messages
from ingest.search.hits import CitedMessage, Hit, Quoted, SearchResult
from ingest.search.matches import Terms
from ingest.search.query import MAX_LIMIT, MAX_OFFSET
from ingest.types import RoomID

__all__ = ["MAX_SCAN", "REPLY_SCORE", "Narrowing", "replies"]

MAX_SCAN = 1000  # messages after it read for the rich replies to it (its thread: all of it)
REPLY_SCORE = 1.0  # a reply is found by its relation, not scored: every one the same
_THREAD = "m.thread"
_MESSAGES = (EventType.ROOM_MESSAGE.t,)


@dataclass(frozen=True)
class Narrowing:
    """The search's arguments past `reply_to`, as the read path takes them."""

    texts: Sequence[str] = ()  # the replies holding the words of one of them
    senders: Sequence[str] = ()
    after: int | None = None
    before: int | None = None
    flt: MessageFilter = NO_FILTER
    limit: int = 5
    offset: int = 0
    sort: str = "relevance"

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_LIMIT:
            raise QueryError("limit", f"must be 1 to {MAX_LIMIT}, got {self.limit}")
        if not 0 <= self.offset <= MAX_OFFSET:
            raise QueryError("offset", f"must be 0 to {MAX_OFFSET}, got {self.offset}")


async def replies(
    reader: MatrixReader,
    rooms: RoomCache,
    room_id: RoomID,
    given: str,
    event_id: str,
    showing: Showing,
    asked: Narrowing,
) -> SearchResult:
    """The replies to `event_id` and its thread as a search document's page; a QueryError
    naming `room` when scope refuses the room, `reply_to` when there is no such message or it
    may not be shown."""
    info = await rooms.get(room_id)
    if not info.verdict.eligible or info.state is None:
        raise QueryError("room", f"{given} is refused ({info.verdict.reason})")
    read = await reader.following(room_id, event_id, types=_MESSAGES, limit=MAX_SCAN)
    if read is None:
        raise QueryError("reply_to", f"no message {event_id} in {given}")
    target, after = read
    thread = await reader.relations(room_id, event_id, _THREAD)
    if (puppet := puppet_in_events([target, *after, *thread], rooms.scope)) is not None:
        raise QueryError("room", f"{given} is refused (bridged: {puppet} is a puppet)")
    if showing.message(room_id, target) is None:
        raise QueryError("reply_to", f"{event_id} is no message that can be shown")
    answering = {
        str(e.get("event_id")): e
        for e in [*thread, *after]
        if thread_root(content_of(e)) == event_id or reply_target(content_of(e)) == event_id
    }
    kept = _narrowed(room_id, list(answering.values()), showing, asked)
    kept.sort(key=lambda h: (h.messages[0]["ts"], h.best_event_id), reverse=asked.sort == "recent")
    page = kept[asked.offset : asked.offset + asked.limit]
    more = len(kept) > asked.offset + len(page)
    warnings = []
    if len(after) >= MAX_SCAN:
        warnings.append(
            f"rich replies were looked for in the {MAX_SCAN} messages after it (its thread "
            "whole): a later reply outside the thread is not listed"
        )
    hits = [replace(h, room_alias=info.state.canonical_alias) for h in page]
    return SearchResult(
        hits=hits,
        warnings=warnings,
        next_offset=asked.offset + len(page) if more else None,
        sort=asked.sort,
        matched=[h.best_event_id for h in hits],
        indexing=[],  # read from the homeserver now: nothing for an index to catch up with
    )


def _narrowed(
    room_id: str, events: Sequence[ClientEvent], showing: Showing, asked: Narrowing
) -> list[Hit]:
    """The events that may be shown and that the narrowing keeps, each a hit of itself."""
    flt = asked.flt
    if asked.texts:
        flt = replace(flt, holding=tuple(Terms.of(t) for t in asked.texts))
    out = []
    for e in events:
        found = showing.item(room_id, e)
        if found is None:
            continue
        item, shown = found
        if asked.senders and item.sender not in asked.senders:
            continue
        if (asked.after is not None and item.ts < asked.after) or (
            asked.before is not None and item.ts > asked.before
        ):
            continue
        said = Said(body=shown["body"], sender=item.sender, msgtype=shown["msgtype"])
        if item.mentions is not None:
            said["mentions"] = list(item.mentions)
        if not keep_messages(flt, [said], item.thread_root):
            continue
        out.append(_hit(room_id, item.thread_root, shown))
    return out


def _hit(room_id: str, root: str | None, shown: Quoted) -> Hit:
    event_id = shown["event_id"]
    message = CitedMessage(
        event_id=event_id,
        sender=shown["sender"],
        ts=shown["ts"],
        body=shown["body"],
        msgtype=shown["msgtype"],
    )
    return Hit(
        point_id="",
        room_id=room_id,
        room_alias=None,
        thread_root=root,
        first_event_id=event_id,
        last_event_id=event_id,
        event_ids=(event_id,),
        messages=(message,),
        score=REPLY_SCORE,
        permalink=shown["permalink"],
        best_event_id=event_id,
        matched=(event_id,),
    )
