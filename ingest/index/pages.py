"""`ingest.index.pages`: one page of a room's timeline applied, in order, to the room's windows.

Each event is normalised and scrubbed; messages in a purged range are skipped, edits and
redactions resolved (a redacted applied edit re-reads the original from the homeserver).
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from mautrix.types import RelationType

from ingest.errors import MuninnError
from ingest.index.records import Tombstone
from ingest.index.windows import EditOutcome, RevertEdit, WindowSet
from ingest.matrix import ClientEvent
from ingest.rules.events import normalize
from ingest.rules.scrub import scrub
from ingest.types import (
    Edit,
    EventID,
    Message,
    Normalized,
    Redaction,
    RoomID,
    Skip,
    SkipReason,
)

log = logging.getLogger("muninn.index")

# `ingest.rules.events.normalize` with the writer's own user ids and command prefix (rule 9) bound:
# every event of a page, and what a redaction re-reads, is normalized the same way.
Normalize = Callable[[ClientEvent], Normalized]


class EventSource(Protocol):
    """What a page's redactions re-read: the writer's `RoomSource`."""

    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None: ...
    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[ClientEvent]: ...


class PageTally(Protocol):
    """What applying a page counts (a `RoomReport`)."""

    indexed: int
    edits_applied: int
    redactions_applied: int
    skipped: Counter[str]


async def apply_events(
    ws: WindowSet,
    events: Sequence[ClientEvent],
    stones: Sequence[Tombstone],
    tally: PageTally,
    *,
    reader: EventSource,
    own_user_ids: frozenset[str],
    command_prefix: str,
) -> None:
    """Apply one page's events in order to `ws`, counting what each did in `tally`.

    One event never holds a room back: an event the writer cannot take (whatever its content
    makes the chunker or the ids raise) is logged with its room and event ids, counted as
    `unwritable` and passed, so the cursor moves on (an edit or a redaction so passed removes its
    target's message: never the old text kept). The store's and the homeserver's errors
    (`MuninnError`) still fail the room, which the next pass retries.
    """
    norm: Normalize = functools.partial(
        normalize, own_user_ids=own_user_ids, command_prefix=command_prefix
    )
    items = [norm(e) for e in events]
    ws.prefetch(_referenced_ids(items))
    for item in items:
        try:
            await _apply(ws, item, stones, tally, reader, norm)
        except MuninnError:
            raise
        except Exception as e:  # any fault of one event's content (see above)
            # An edit or a redaction that cannot be applied must not leave the text it replaces
            # or removes indexed (rules 10, 11): that message goes whole. Should even that
            # raise, the room fails and the next pass retries it.
            # Only its own sender's edit can so remove a message (rule 11: others' edits are
            # ignored); a redaction's power the homeserver checked.
            if isinstance(item, Redaction):
                ws.set_message(item.redacts, None)
            elif isinstance(item, Edit) and ws.sender_of(item.target) == item.sender:
                ws.set_message(item.target, None)
            event_id = getattr(item, "event_id", None)
            log.warning(
                "room %s: event %s cannot be written, skipped (%s: %s)",
                ws.room_id,
                event_id,
                type(e).__name__,
                e,
                extra={"room_id": ws.room_id, "event_id": event_id},
            )
            tally.skipped[str(SkipReason.UNWRITABLE)] += 1


async def _apply(
    ws: WindowSet,
    item: Normalized,
    stones: Sequence[Tombstone],
    tally: PageTally,
    reader: EventSource,
    norm: Normalize,
) -> None:
    """One event's effect on `ws` (`WindowSet` changes nothing when it raises)."""
    if isinstance(item, Skip):
        tally.skipped[str(item.reason)] += 1
    elif isinstance(item, Message):
        if any(s.covers(item.ts) for s in stones):
            tally.skipped[str(SkipReason.PURGED)] += 1
        elif ws.add_message(_scrubbed(item)):
            tally.indexed += 1
        else:
            tally.skipped[str(SkipReason.DUPLICATE)] += 1
    elif isinstance(item, Edit):
        outcome = ws.apply_edit(item, scrub(item.new_body))
        if outcome == EditOutcome.APPLIED:
            tally.edits_applied += 1
        elif outcome == EditOutcome.UNKNOWN_TARGET and item.withdrawn is not None:
            # A bot editing its own notice: neither is indexed, neither is invalid.
            tally.skipped[str(item.withdrawn)] += 1
        elif outcome != EditOutcome.NOT_NEWER:
            tally.skipped[str(SkipReason.INVALID_EDIT)] += 1
    elif isinstance(item, Redaction):
        result = ws.redact(item)
        if isinstance(result, RevertEdit):
            message = await _reread(ws.room_id, result, stones, reader=reader, norm=norm)
            ws.set_message(result.target, message)
        if result:
            tally.redactions_applied += 1


async def _reread(
    room_id: RoomID,
    revert: RevertEdit,
    stones: Sequence[Tombstone],
    *,
    reader: EventSource,
    norm: Normalize,
) -> Message | None:
    """A redacted edit was the applied one: rebuild the message from the homeserver."""
    original = await reader.get_event(room_id, revert.target)
    if original is None:
        return None
    msg = norm(original)
    if not isinstance(msg, Message) or any(s.covers(msg.ts) for s in stones):
        return None
    best: Edit | None = None
    for raw in await reader.relations(room_id, revert.target, RelationType.REPLACE.value):
        edit = norm(raw)
        if (
            isinstance(edit, Edit)
            and edit.sender == msg.sender
            and (best is None or (edit.ts, edit.event_id) > (best.ts, best.event_id))
        ):
            best = edit
    msg = _scrubbed(msg)
    if best is None:
        return msg
    return replace(
        msg,
        body=scrub(best.new_body),
        msgtype=best.msgtype,
        edit_event_id=best.event_id,
        edit_ts=best.ts,
    )


def _scrubbed(message: Message) -> Message:
    body = scrub(message.body)
    return message if body == message.body else replace(message, body=body)


def _referenced_ids(items: Sequence[object]) -> list[EventID]:
    """Every event id a page's items look up, so the store is asked once a page."""
    ids: list[EventID] = []
    for item in items:
        if isinstance(item, Message):
            ids.append(item.event_id)
        elif isinstance(item, Edit):
            ids.append(item.target)
        elif isinstance(item, Redaction):
            ids.append(item.redacts)
    return ids


__all__ = ["EventSource", "PageTally", "apply_events"]
