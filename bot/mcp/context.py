"""`context`: the conversation around one message, as a reply would quote it now (pure).

The homeserver's `/context` read is the input; what comes out holds only what every other answer
may show (docs/ARCHITECTURE.md §3 rule 29): messages the writer would index (no notice, command,
ciphertext, media or Muninn's own), by their current text (the author's latest valid edit, the
homeserver's bundled one: `ingest.search.logs.roomlog.current_body`), scrubbed, never a redacted
one or one a purge covers. A message whose current text cannot be told is left out, never shown
with words an edit took back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ingest.errors import QueryError
from ingest.index.records import Tombstone
from ingest.matrix import ClientEvent
from ingest.rules.events import normalize
from ingest.search.hits import purged
from ingest.search.logs.roomlog import current_body
from ingest.search.permalink import MATRIX_TO, permalink
from ingest.types import Message, RoomID

__all__ = ["MAX_AROUND", "Around", "EventRef", "around", "event_ref"]

MAX_AROUND = 25  # messages either side of the event a `context` call may ask for
# The homeserver's `/context` read: the events before (newest first), the event, those after.
Around = tuple[Sequence[ClientEvent], ClientEvent, Sequence[ClientEvent]]
_ID = re.compile(r"[!#$][^\s/?#]{1,254}", re.ASCII)


@dataclass(frozen=True)
class EventRef:
    """An event as an agent names it: an id (its room given apart) or a matrix.to permalink."""

    event_id: str
    room: str | None  # a room id or alias, when the permalink carried it


def event_ref(text: str) -> EventRef:
    """`$event` or `https://matrix.to/#/<room>/<event>?via=…`; else a QueryError naming
    `event`."""
    text = text.strip()
    if text.startswith(MATRIX_TO):
        path = text[len(MATRIX_TO) :].split("?", 1)[0]
        parts = [unquote(p) for p in path.split("/")]
        if len(parts) == 2 and _ID.fullmatch(parts[0]) and parts[0][0] in "!#":
            room, event = parts
            if _ID.fullmatch(event) and event.startswith("$"):
                return EventRef(event, room)
        raise QueryError(
            "event", "a matrix.to permalink names a room and a message: …/#/!room/$event"
        )
    if _ID.fullmatch(text) and text.startswith("$"):
        return EventRef(text, None)
    raise QueryError("event", "give an event id ($…) or a matrix.to permalink to a message")


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
) -> list[dict[str, Any]]:
    """The shown messages around `event_id`, oldest first: at most `before` older ones, the
    event's own, at most `after` newer ones. A QueryError naming `event` when the event itself
    may not be shown (redacted, purged, not a message): nothing is quoted around it then."""
    newest_first, event, oldest_first = read

    def shown(e: ClientEvent) -> dict[str, Any] | None:
        item = normalize(e, own_user_ids=frozenset({reader_id}), command_prefix=prefix)
        if not isinstance(item, Message) or purged(stones, room_id, item.ts):
            return None
        body = current_body(e, reader_id, prefix)
        if body is None:
            return None
        return {
            "event_id": item.event_id,
            "sender": item.sender,
            "ts": item.ts,
            "body": body,
            "permalink": permalink(room_id, item.event_id, server_name),
        }

    centre = shown(event)
    if centre is None or centre["event_id"] != event_id:
        raise QueryError("event", f"{event_id} is no message that can be shown")
    older = [m for e in newest_first if (m := shown(e)) is not None][:before]
    newer = [m for e in oldest_first if (m := shown(e)) is not None][:after]
    return [*reversed(older), centre, *newer]
