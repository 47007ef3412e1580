"""A `/rooms/{id}/state` answer reduced to a `RoomState` (pure; no I/O).

Scope decides on the result (`ingest.rules.scope`); the reader (`ingest.matrix.reader`) and the
export reader (`ingest.matrix.export`) build it from what they fetched or read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mautrix.types import EventType

from ingest.event import BRIDGE_TYPES, ClientEvent, EventContent, content_of
from ingest.matrix.membership import prev_content, was_direct
from ingest.types import RoomAlias, RoomID, RoomState, UserID

__all__ = ["room_state_from"]

_MEMBER = EventType.ROOM_MEMBER.t


def _members(events: Sequence[ClientEvent]) -> tuple[dict[str, str], bool]:
    """membership by user id, and whether any member event says is_direct (now or before)."""
    membership: dict[str, str] = {}
    direct = False
    for e in events:
        if e.get("type") != _MEMBER or not isinstance(e.get("state_key"), str):
            continue
        membership[e["state_key"]] = str(content_of(e).get("membership", ""))
        direct = direct or was_direct(e)
    return membership, direct


def _past_members(events: Sequence[ClientEvent]) -> tuple[UserID, ...]:
    """Who was joined and is not now (left, kicked, banned): the member event's previous
    membership says so. An invite or a ban of someone who never joined names no sender."""
    past = {
        e["state_key"]
        for e in events
        if e.get("type") == _MEMBER
        and isinstance(e.get("state_key"), str)
        and content_of(e).get("membership") in ("leave", "ban")
        and prev_content(e).get("membership") == "join"
    }
    return tuple(sorted(UserID(u) for u in past))


def room_state_from(room_id: RoomID, events: Sequence[ClientEvent], reader: UserID) -> RoomState:
    """Reduce a `/rooms/{id}/state` answer to a `RoomState` (pure; no I/O); an entry that is
    no JSON object (a faulty server's `[1, 2, 3]`) is no state event."""
    events = [e for e in events if isinstance(e, dict)]
    state: dict[tuple[str, str], EventContent] = {}
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("type"), str):
            state[(e["type"], str(e.get("state_key", "")))] = content_of(e)

    def content(event_type: EventType) -> EventContent:
        return state.get((event_type.t, ""), {})

    membership, direct = _members(events)
    levels = content(EventType.ROOM_POWER_LEVELS)
    events_levels = levels.get("events")
    events_levels = events_levels if isinstance(events_levels, dict) else {}
    users = levels.get("users")
    users = users if isinstance(users, dict) else {}
    joined = sorted(u for u, m in membership.items() if m == "join")
    alias, alt_aliases = _aliases(content(EventType.ROOM_CANONICAL_ALIAS))
    create = content(EventType.ROOM_CREATE)
    visibility = content(EventType.ROOM_HISTORY_VISIBILITY).get("history_visibility")
    return RoomState(
        room_id=room_id,
        joined=membership.get(reader) == "join",
        name=_str_or_none(content(EventType.ROOM_NAME).get("name")),
        canonical_alias=alias,
        alt_aliases=alt_aliases,
        join_rule=_str_or_none(content(EventType.ROOM_JOIN_RULES).get("join_rule")),
        history_visibility=_str_or_none(visibility),
        # Encryption cannot be turned off: the state event's presence is what counts.
        encrypted=(EventType.ROOM_ENCRYPTION.t, "") in state,
        # A create event without room_version means version 1 (the spec's default).
        room_version=str(create.get("room_version", "1")) if create else None,
        create_type=_str_or_none(create.get("type")),
        members=tuple(UserID(u) for u in joined),
        invited=tuple(sorted(UserID(u) for u, m in membership.items() if m == "invite")),
        past_members=_past_members(events),
        direct_flag=direct,
        bridge_state_keys=tuple(
            sorted({k for (t, k), c in state.items() if t in BRIDGE_TYPES and c})
        ),
        display_names=tuple(
            (UserID(u), name)
            for u in joined
            if (name := _str_or_none(state[(_MEMBER, u)].get("displayname")))
        ),
        # Unset, the spec's `state_default` is 50: a moderator's.
        pins_level=_level(
            events_levels.get(EventType.ROOM_PINNED_EVENTS.t),
            _level(levels.get("state_default"), 50),
        ),
        user_levels=tuple(
            sorted((UserID(u), _level(n, 0)) for u, n in users.items() if isinstance(u, str))
        ),
        users_default=_level(levels.get("users_default"), 0),
    )


def _level(value: Any, default: int) -> int:
    """A power level: an integer (older room versions allow a decimal string), else `default`."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and value.isascii():
        return int(value)
    return default


def _aliases(content: Mapping[str, Any]) -> tuple[RoomAlias | None, tuple[RoomAlias, ...]]:
    alt = content.get("alt_aliases")
    alts = (
        [a for a in alt if isinstance(a, str) and a.startswith("#")]
        if isinstance(alt, list)
        else []
    )
    return _alias_or_none(content.get("alias")), tuple(RoomAlias(a) for a in alts)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _alias_or_none(value: Any) -> RoomAlias | None:
    return RoomAlias(value) if isinstance(value, str) and value.startswith("#") else None
