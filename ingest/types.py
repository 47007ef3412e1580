"""Plain typed records that cross layers. Ids reuse mautrix's NewTypes."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mautrix.types import EventID, EventType, MessageType, RoomAlias, RoomID, UserID

__all__ = [
    "Edit",
    "EmbedderIdentity",
    "EventID",
    "Message",
    "Normalized",
    "Redaction",
    "Refusal",
    "RoomAlias",
    "RoomID",
    "RoomState",
    "Skip",
    "SkipReason",
    "SparseVector",
    "UserID",
    "Verdict",
    "Window",
]


# ---------------------------------------------------------------- scope


class Refusal(enum.StrEnum):
    """Why a room is never read into the index."""

    NOT_JOINED = "not_joined"
    EXCLUDED = "excluded"
    COMMAND_ROOM = "command_room"  # `bot.command_room`: where people ask, not where answers are
    DM = "dm"
    BRIDGED = "bridged"
    ENCRYPTED = "encrypted"


@dataclass(frozen=True)
class RoomState:
    """What the homeserver says about a room, reduced to what scope and citations need.

    Built by `ingest.matrix` from `/rooms/{id}/state`; scope decides on it without I/O.
    """

    room_id: RoomID
    joined: bool = True
    name: str | None = None
    canonical_alias: RoomAlias | None = None
    alt_aliases: tuple[RoomAlias, ...] = ()
    join_rule: str | None = None
    history_visibility: str | None = None
    encrypted: bool = False
    room_version: str | None = None
    create_type: str | None = None
    members: tuple[UserID, ...] = ()  # joined
    invited: tuple[UserID, ...] = ()  # invited, not yet joined (they may read once they join)
    # Who was joined and has left or was kicked or banned since: a sender must have joined, and
    # the membership event stays in the state after it leaves, so this names the past senders
    # (rule 4, by sender, before any event is read; a rejoin-and-leave-again is caught by the
    # writer's and the bot's check of every sender they read).
    past_members: tuple[UserID, ...] = ()
    # Any membership event in the room (for the reader, or by whoever invited it) had is_direct.
    direct_flag: bool = False
    # state_keys of m.bridge / uk.half-shot.bridge events present with non-empty content
    bridge_state_keys: tuple[str, ...] = ()
    # (user_id, displayname) of joined members that set one; citations show names, payloads mxids
    display_names: tuple[tuple[UserID, str], ...] = ()
    # `m.room.power_levels`: the level `m.room.pinned_events` needs (the spec's pinning; an
    # `!unpin` of another's pin needs it too), each listed user's level, and the default.
    pins_level: int = 50
    user_levels: tuple[tuple[UserID, int], ...] = ()
    users_default: int = 0

    def level_of(self, user_id: str) -> int:
        return next((n for u, n in self.user_levels if u == user_id), self.users_default)


@dataclass(frozen=True)
class Verdict:
    """Eligible, or refused with a reason and a human detail for the journal."""

    room_id: RoomID
    reason: Refusal | None = None
    detail: str = ""

    @property
    def eligible(self) -> bool:
        return self.reason is None


# ---------------------------------------------------------------- events


class SkipReason(enum.StrEnum):
    """Why an event of an eligible room was not indexed; each is counted."""

    ENCRYPTED = "encrypted"
    MEDIA = "media"
    NOTICE = "notice"
    OWN = "own"
    COMMAND = "command"
    MALFORMED = "malformed"
    STATE = "state"
    OTHER = "other"  # reactions, receipts, unknown event types
    INVALID_EDIT = "invalid_edit"
    REDACTED = "redacted"  # an event that arrived already redacted
    PURGED = "purged"  # inside an operator's purge tombstone (writer-owned)
    DUPLICATE = "duplicate"  # already indexed (a replayed page after a crash; writer-owned)
    UNWRITABLE = "unwritable"  # the writer failed on it: logged by its ids and passed


@dataclass(frozen=True)
class Message:
    """One indexable message (after reply-fallback stripping, before scrub): text as typed, or
    a file, image, video or audio clip by its filename and caption (`ingest.rules.media`)."""

    event_id: EventID
    room_id: RoomID
    sender: UserID
    ts: int  # origin_server_ts, milliseconds
    body: str
    thread_root: EventID | None = None
    msgtype: str = MessageType.TEXT.value
    # The m.replace event whose text `body` holds, when the message was edited (writer-owned).
    edit_event_id: EventID | None = None
    edit_ts: int | None = None
    # `m.mentions.user_ids` when the sender's client set `m.mentions` (None: it did not).
    mentions: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Edit:
    """An `m.replace` event. Validity against its target is checked by the writer."""

    event_id: EventID
    room_id: RoomID
    sender: UserID
    ts: int
    target: EventID
    new_body: str
    event_type: str = EventType.ROOM_MESSAGE.t
    # Why the new content is no text Muninn indexes (a notice, media, a command): the edit
    # withdraws the old text (new_body is empty); the reason counts it when its target is unknown.
    withdrawn: SkipReason | None = None
    # The new content's msgtype, which the edited message takes (m.text when withdrawn).
    msgtype: str = MessageType.TEXT.value


@dataclass(frozen=True)
class Redaction:
    event_id: EventID
    room_id: RoomID
    sender: UserID
    ts: int
    redacts: EventID


@dataclass(frozen=True)
class Skip:
    event_id: EventID | None
    reason: SkipReason
    detail: str = ""


Normalized = Message | Edit | Redaction | Skip


# ---------------------------------------------------------------- windows and vectors


@dataclass(frozen=True)
class Window:
    """Consecutive messages of one timeline (the main one, or one thread)."""

    room_id: RoomID
    thread_root: EventID | None
    messages: tuple[Message, ...]
    room_alias: RoomAlias | None = None

    @property
    def first_event_id(self) -> EventID:
        return self.messages[0].event_id

    @property
    def last_event_id(self) -> EventID:
        return self.messages[-1].event_id


@dataclass(frozen=True)
class SparseVector:
    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class EmbedderIdentity:
    """What a vector space is: two identities differ means their vectors must never mix."""

    provider: str  # "local" | "ollama"
    model: str
    dimension: int
    document_profile: str = ""  # e.g. "search_document: " prefix, or "" for none
    query_profile: str = ""

    def as_record(self) -> Mapping[str, Any]:
        """Every field by name: the identity is all of them."""
        return asdict(self)


@dataclass(frozen=True)
class StoredPoint:
    """A point as the store returns it (payload is the §4 JSON payload)."""

    id: str
    payload: Mapping[str, Any]
    score: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
