"""The tools' results as the SDK publishes their JSON schemas (each tool's `outputSchema`).

These describe the documents the CLI prints, never a copy of them: the builders stay
`SearchResult.as_json` (§4.3), `PinsView.as_json` (§4.4) and `bot.mcp.lookups`. Every record
allows keys it does not name and requires none, so a document that grows or trims a field is
passed on as the CLI prints it rather than refused by its own schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, TypeAdapter, WithJsonSchema
from typing_extensions import TypedDict

from bot.chat.pinboard import Pin

__all__ = ["Board", "Context", "RoomList", "SearchDocument"]

_OPEN = ConfigDict(extra="allow")


class Said(TypedDict, total=False):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    event_id: str
    sender: str
    ts: int  # ms since the epoch
    body: str  # a file, image, video or audio clip: its filename and caption
    msgtype: str  # m.text, m.emote, m.file, m.image, m.video, m.audio


class Quoted(Said, total=False):
    permalink: str


class Beside(TypedDict, total=False):
    """A hit's best message's conversation (`search`'s `context: N`), each side oldest first."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    before: list[Quoted]
    after: list[Quoted]


class Cited(Said, total=False):
    context: Beside  # only on the best message, and only when `context` was asked for


class Behind(TypedDict, total=False):
    """A searched room the index has not caught up with (`indexing`)."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    room_id: str
    room_alias: str | None
    reason: str  # not_read: never read; behind: its homeserver holds newer events
    indexed_ts: int | None  # when the index last read the room, ms
    lag_seconds: float | None


class HitRecord(TypedDict, total=False):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    room_id: str
    room_alias: str | None
    thread_root: str | None
    first_event_id: str
    last_event_id: str
    event_ids: list[str]
    messages: list[Cited]
    score: float
    permalink: str  # matrix.to, to `best_event_id`
    best_event_id: str


class SearchDocument(TypedDict, total=False):
    """`muninn search --json` (docs/ARCHITECTURE.md §4.3)."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    hits: list[HitRecord]
    warnings: list[str]
    retrievers: list[str]
    dropped_stale: int
    below_floor: int
    next_offset: int | None  # `cursor` of the next page; null on the last
    sort: str
    indexing: list[Behind]  # the searched rooms the index has not caught up with; [] all are


class Context(TypedDict, total=False):
    """`context`: the messages around `event_id`, oldest first."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    room_id: str
    room_alias: str | None
    event_id: str
    messages: list[Quoted]


class PinShown(TypedDict, total=False):
    """What `!pins` adds to a pin (`bot.chat.pinboard.Pin`): the pinned message as it reads now."""

    sender: str | None
    ts: int | None
    body: str | None
    permalink: str | None


def _pin_schema() -> dict[str, Any]:
    """A pin's record: `bot.chat.pinboard.Pin`'s fields (their one owner) and `PinShown`'s."""
    schema = TypeAdapter(Pin).json_schema()
    schema["properties"] |= TypeAdapter(PinShown).json_schema()["properties"]
    schema.pop("required", None)
    return {**schema, "title": "PinRecord", "additionalProperties": True}


PinRecord = Annotated[dict[str, Any], WithJsonSchema(_pin_schema())]


class Board(TypedDict, total=False):
    """`muninn pins --json` (docs/ARCHITECTURE.md §4.4)."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    room_id: str
    room_label: str
    board_size: int
    scanned: int
    bound: int
    pins: list[PinRecord]


class RoomRecord(TypedDict, total=False):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    room_id: str
    room_alias: str | None
    name: str | None
    indexed: bool
    points: int
    indexed_ts: int | None  # when the index last read the room, ms
    lag_seconds: float | None
    unknown: list[str]  # fields only the homeserver knows, while it cannot be asked


class RoomList(TypedDict, total=False):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    rooms: list[RoomRecord]
    warnings: list[str]  # e.g. the homeserver is down: the rooms are the index's
