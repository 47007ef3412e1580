"""A Matrix client-server event as Muninn reads it: a typed view of the homeserver's JSON.

The raw document stops at the Matrix layer (`ingest.matrix`, which hands this view on as its
own): what the timeline, a state read, an appservice push or `/sync` hands on is a
`ClientEvent` — the same dict, its keys named and typed, so the rules, the read path and the
chat code never hold a `dict[str, Any]`. Every key may be absent (a redacted event has no
content; a message no `state_key`), and what the event's sender wrote is still unchecked: its
values are `object` until a rule has looked at them (`ingest.rules.events.normalize`,
`bot.chat.commands.incoming`). `content_of`, `relation_of` and `bundled_edit` are the one read
of `content`, `m.relates_to` and `unsigned.m.relations`; `events_in` and `as_event` the one
step from the homeserver's JSON to the view.

It sits at the root of `ingest`, beside `types`, because the pure rules under the Matrix layer
(`ingest.rules`) take it too. So do Matrix's names that mautrix has no constant for; mautrix's
`EventType`, `MessageType`, `RelationType` name the rest and are used as they are
(`EventType.ROOM_MESSAGE.t`): no `m.room.*` string is spelled outside `ingest/matrix/`
(`tests/test_matrix_names.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypedDict, cast

from mautrix.types import RelationType

__all__ = [
    "BRIDGE_TYPES",
    "SERVER_NOTICE",
    "ClientEvent",
    "EventContent",
    "Relation",
    "Unsigned",
    "as_event",
    "bundled_edit",
    "content_of",
    "events_in",
    "relation_of",
]

# MSC2346's bridge state event (its state key: the bridged channel), and its pre-spec name.
BRIDGE_TYPES: Final = ("m.bridge", "uk.half-shot.bridge")
SERVER_NOTICE: Final = "m.server_notice"  # the msgtype of a homeserver's notices to its users

# What a sender put in `content` (`m.room.message`, `m.room.redaction`, state events): the keys
# Muninn reads, each `object` until checked (a body may be a number, a relation a string).
EventContent = TypedDict(
    "EventContent",
    {
        "body": object,
        "msgtype": object,
        "format": object,
        "formatted_body": object,
        "m.new_content": object,
        "m.relates_to": object,
        "m.mentions": object,
        "redacts": object,
        "membership": object,
        "is_direct": object,
        "history_visibility": object,
        "join_rule": object,
        "name": object,
        "alias": object,
        "alt_aliases": object,
        "displayname": object,
        "room_version": object,
        "type": object,  # m.room.create's room type (`m.space`)
        "events": object,
        "state_default": object,
        "users": object,
        "users_default": object,
    },
    total=False,
)

# `content["m.relates_to"]`: an edit's, a thread's or a reply's target (checked as read).
Relation = TypedDict(
    "Relation",
    {"rel_type": object, "event_id": object, "m.in_reply_to": object, "is_falling_back": object},
    total=False,
)

# What the homeserver adds: a redaction's trace, an edit bundled with its target, prior state.
Unsigned = TypedDict(
    "Unsigned",
    {
        "redacted_because": dict[str, Any],
        "m.relations": dict[str, Any],
        "prev_content": EventContent,
        "replaces_state": str,
        "age": int,
        "transaction_id": str,
    },
    total=False,
)


class ClientEvent(TypedDict, total=False):
    """One event as the client-server API serves it (`/messages`, `/event`, `/state`, an
    appservice transaction, `/sync`); keys as the spec names them."""

    event_id: str
    type: str
    sender: str
    room_id: str
    origin_server_ts: int
    state_key: str
    redacts: str  # room versions before 11: the redacted event's id is at the top level
    content: EventContent
    unsigned: Unsigned
    # Older servers' copies at the top level of what the spec puts in `unsigned`.
    prev_content: EventContent
    replaces_state: str


def content_of(event: ClientEvent) -> EventContent:
    """The event's content, or {} when it has none (redacted) or it is not an object: the one
    read of `content` every layer makes."""
    content = event.get("content")
    return content if isinstance(content, dict) else {}


def relation_of(content: Mapping[str, object]) -> Relation:
    """`content["m.relates_to"]`, or {} when it has none or it is not an object: the one read
    of an event's (or an edit's new content's) relation."""
    rel = content.get("m.relates_to")
    return cast(Relation, rel) if isinstance(rel, dict) else {}


def as_event(value: object) -> ClientEvent | None:
    """A JSON object as the typed view of an event, None for anything else; its values are
    still unchecked, as any event's are."""
    return cast(ClientEvent, value) if isinstance(value, dict) else None


def events_in(value: object) -> list[ClientEvent]:
    """The JSON objects of a homeserver's list as events: an entry that is no object, or a
    `value` that is no list, is no event."""
    return (
        [cast(ClientEvent, e) for e in value if isinstance(e, dict)]
        if isinstance(value, list)
        else []
    )


def bundled_edit(event: ClientEvent) -> object:
    """The latest edit the homeserver bundled with `event` (`unsigned.m.relations.m.replace`,
    spec v1.7), None when it bundled none; unchecked (`as_event` tells an event from junk)."""
    unsigned = event.get("unsigned")
    relations = unsigned.get("m.relations") if isinstance(unsigned, dict) else None
    return relations.get(RelationType.REPLACE.value) if isinstance(relations, dict) else None
