"""`ingest.search.tails`: what a room's timeline since its cursor says of an indexed window.

Pure rules over events already read (`ingest.search.revalidate` reads them): a room's tail of
redactions and edits after the writer's cursor (`Tail`), the same tail taken from a log the
caller has just read (`tail_since`), and whether a window is still what the index holds
(`current`; a fetched event's bundled latest edit, `bundled_edit_ok`), by the writer's own
normalisation (`ingest.rules.events.normalize`) and edit rule (`WindowSet.apply_edit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mautrix.types import EventType

from ingest.matrix import ClientEvent, as_event, bundled_edit, content_of, relation_of
from ingest.rules.events import is_edit, normalize
from ingest.search.hits import StoredMessage, WindowPayload, cited_events
from ingest.types import Edit, Redaction

__all__ = [
    "TAIL_TYPES",
    "LogRead",
    "Tail",
    "bundled_edit_ok",
    "current",
    "edited_since",
    "read_tail",
    "tail_since",
]

# What can make an indexed window stale, as timeline events: redactions, and edits (an edit is
# an `m.room.message` with the type of what it edits; only messages are indexed).
TAIL_TYPES = (EventType.ROOM_REDACTION.t, EventType.ROOM_MESSAGE.t)
NO_PREFIX = ""  # edits are judged by sender and order; an edit into a command is text gone too


@dataclass
class Tail:
    """The room's redactions and edits after the cursor, as the writer would read them."""

    redacted: set[str] = field(default_factory=set)
    edits: dict[str, list[Edit]] = field(default_factory=dict)  # target -> edits of it

    def add(self, event: ClientEvent) -> None:
        if event.get("type") == EventType.ROOM_MESSAGE.t and not is_edit(
            relation_of(content_of(event))
        ):
            return  # a message, not an edit: it redacts and edits nothing (a burst's commands)
        item = normalize(event, own_user_ids=frozenset(), command_prefix=NO_PREFIX)
        if isinstance(item, Redaction):
            self.redacted.add(str(item.redacts))
        elif isinstance(item, Edit):  # a redacted edit normalises to a skip: it edits nothing
            self.edits.setdefault(str(item.target), []).append(item)

    def copy(self) -> Tail:
        return Tail(set(self.redacted), {k: list(v) for k, v in self.edits.items()})


def read_tail(events: Iterable[ClientEvent], tail: Tail | None = None) -> Tail:
    tail = tail if tail is not None else Tail()
    for event in events:
        tail.add(event)
    return tail


@dataclass(frozen=True)
class LogRead:
    """A room's events a caller read for its query, newest first, from the present back
    without a gap, begun after it took the writer's `mark` of the room (`Searcher.marks`):
    the log then reaches back to the mark unless more was said since than it holds."""

    events: Sequence[ClientEvent]  # as the homeserver sent them (`roomlog.RoomLog.raw`)
    mark: str | None

    def tail(self) -> Tail | None:
        return tail_since(self.events, self.mark)


def tail_since(log: Sequence[ClientEvent], mark: str | None) -> Tail | None:
    """The tail after the writer's newest walked event `mark`, from a read of the room's log
    (newest first, from the present back without a gap: the bot's read for the command it
    answers); None when the log does not reach back to `mark`, or no mark is known.

    Read after the command arrived, such a log is as fresh a snapshot as a tail read begun a
    few milliseconds later, and it saves the command one or two `/messages` of its own.
    """
    if mark is None:
        return None
    newer: list[ClientEvent] = []
    for event in log:
        if event.get("event_id") == mark:
            return read_tail(e for e in reversed(newer) if e.get("type") in TAIL_TYPES)
        newer.append(event)
    return None


def edited_since(message: StoredMessage, edit: Edit) -> bool:
    """Whether `edit` replaces what the index holds for `message`, by the writer's rules
    (`WindowSet.apply_edit`): its author's, and newer than the edit applied (if any)."""
    applied = (int(message.get("edit_ts") or -1), str(message.get("edit_event_id") or ""))
    return edit.sender == message.get("sender") and (edit.ts, str(edit.event_id)) > applied


def current(payload: WindowPayload, tail: Tail) -> bool:
    """Whether a window is still what the index holds, given the room's tail since its cursor:
    nothing it cites redacted, no message of it edited since."""
    if any(e in tail.redacted for e in cited_events(payload)):
        return False
    return not any(
        edited_since(m, edit)
        for m in payload.get("messages", [])
        for edit in tail.edits.get(str(m.get("event_id")), ())
    )


def bundled_edit_ok(message: StoredMessage, event: ClientEvent) -> bool:
    """A fetched message event against what the index holds: its bundled latest edit (spec
    v1.7; Synapse bundles the author's, unredacted) is the one applied, or none newer.

    A bundled edit that is no valid edit by the writer's rules hides an unknown number of
    earlier ones: the text cannot be told, so the hit is not shown.
    """
    bundled = bundled_edit(event)
    if bundled is None:
        return True  # an applied edit since redacted is caught by fetching the edit itself
    edit_event = as_event(bundled)
    if edit_event is None:
        return False
    if edit_event.get("event_id") == message.get("edit_event_id"):
        return True
    edit = normalize(edit_event, own_user_ids=frozenset(), command_prefix=NO_PREFIX)
    if not isinstance(edit, Edit) or edit.target != message.get("event_id"):
        return False
    return not edited_since(message, edit)
