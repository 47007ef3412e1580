"""A Matrix client-server event as Muninn reads it: a typed view of the homeserver's JSON.

The raw document stops here (the Matrix layer, `ingest.matrix`): what the timeline, a state read,
an appservice push or `/sync` hands on is a `ClientEvent` — the same dict, its keys named and
typed, so the read path and the chat code above never hold a `dict[str, Any]`. Every key may be
absent (a redacted event has no content; a message no `state_key`), and what the event's sender
wrote is still unchecked: its values are `object` until a rule has looked at them
(`ingest.rules.events.normalize`, `bot.chat.incoming`).
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["ClientEvent", "EventContent", "Relation", "Unsigned"]

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
