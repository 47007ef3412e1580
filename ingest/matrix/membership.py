"""A member's membership history: its `m.room.member` events, newest first.

The room state holds one membership event per user. The one before it is free
(`unsigned.prev_content`); every earlier one costs a fetch through `unsigned.replaces_state`.
Two rules read further back than one hop:
- DM detection (rule 3): `is_direct` sits only on the invite, and it survives the join only in
  the join's `prev_content`; a later display-name or avatar change pushes it out of the state.
- The audience cut (`bot.chat.visibility`): a member sees a `joined` room from the start of their
  current, continuous membership, and a profile change is a new member event but not a new join.

The homeserver answers a fetch only for an event the reader may see (a member's event from
before the reader joined a `joined` room is a 404), so a walk can end early; `Chain.complete`
says whether it did, and each rule decides which way an incomplete walk errs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ingest.event import ClientEvent, EventContent, Unsigned, content_of

__all__ = [
    "Chain",
    "GetEvent",
    "direct_in",
    "membership",
    "prev_content",
    "prev_membership",
    "walk_back",
    "was_direct",
]

# event id → the event, None if not visible
GetEvent = Callable[[str], Awaitable[ClientEvent | None]]

MAX_HOPS = 20  # member events one walk follows back (profile changes since the join)


def _unsigned(event: ClientEvent) -> Unsigned:
    unsigned = event.get("unsigned")
    return unsigned if isinstance(unsigned, dict) else {}


def prev_content(event: ClientEvent) -> EventContent:
    """The content this state event replaced: `unsigned.prev_content` (the spec), or the
    top-level copy older servers send."""
    prev = _unsigned(event).get("prev_content")
    if not isinstance(prev, dict):
        prev = event.get("prev_content")
    return prev if isinstance(prev, dict) else {}


def _replaces(event: ClientEvent) -> str | None:
    prev_id = _unsigned(event).get("replaces_state")
    if not isinstance(prev_id, str):
        prev_id = event.get("replaces_state")  # top level in some servers' /event answers
    return prev_id if isinstance(prev_id, str) else None


def membership(event: ClientEvent) -> str | None:
    value = content_of(event).get("membership")
    return value if isinstance(value, str) else None


def prev_membership(event: ClientEvent) -> str | None:
    value = prev_content(event).get("membership")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Chain:
    """A member's events, newest first, followed back while the membership before counted."""

    events: tuple[ClientEvent, ...]
    complete: bool  # False: a hop was not visible, had no pointer, or the bound was reached

    @property
    def oldest_ts(self) -> int | None:
        ts = self.events[-1].get("origin_server_ts") if self.events else None
        return ts if isinstance(ts, int) else None


async def walk_back(
    event: ClientEvent,
    get_event: GetEvent,
    *,
    counted: frozenset[str],
    hops: int = MAX_HOPS,
) -> Chain:
    """`event` and the member events before it, for as long as the membership before was one
    of `counted` (read from `prev_content`, so the last hop fetched is where it changed)."""
    events = [event]
    current = event
    for _ in range(hops):
        if prev_membership(current) not in counted:
            return Chain(tuple(events), complete=True)
        prev_id = _replaces(current)
        found = await get_event(prev_id) if prev_id is not None else None
        if found is None or membership(found) not in counted:
            return Chain(tuple(events), complete=False)
        events.append(found)
        current = found
    return Chain(tuple(events), complete=prev_membership(current) not in counted)


def was_direct(event: ClientEvent) -> bool:
    """Whether a member event, or the membership it replaced, had is_direct: it sits only on
    the invite, and after the join it survives in `prev_content`."""
    return bool(content_of(event).get("is_direct")) or bool(prev_content(event).get("is_direct"))


def direct_in(chain: Chain) -> bool:
    """Whether any membership in the chain, or the one before its oldest event, had is_direct."""
    return any(was_direct(e) for e in chain.events)
