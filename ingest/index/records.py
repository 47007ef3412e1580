"""`ingest.index.records`: the typed meta records a collection keeps beside its points.

The one place their keys are spelled: a room's cursor, an operator's purge (tombstone), a
puppet refusal, a failing room's retry record, an import's export record and the
compatibility record. The writer writes them; search, status and import read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.index.chunker import CHUNKER_VERSION
from ingest.matrix import ClientEvent
from ingest.matrix.export import EXPORT_TOKEN_PREFIX
from ingest.rules.events import normalize
from ingest.rules.lexical import LEXICAL_VERSION
from ingest.rules.scrub import SCRUB_VERSION
from ingest.store import Collection
from ingest.types import EmbedderIdentity, RoomID, Skip, SkipReason

SCHEMA_VERSION = 1
CURSOR_PREFIX = "cursor:"  # `cursor:<room id>` → where the writer's walk of the room stands
TOMBSTONE_PREFIX = "tombstone:"  # `tombstone:<room id>:<from>:<to>` → an operator's purge
REFUSED_PREFIX = "refused:"  # a room refused by what its timeline showed (a puppet sender)
RETRY_PREFIX = "retry:"  # a room whose last pass failed: why, and how many passes in a row
# Meta `export:<room id>` → {"path": …}: the file `muninn import` indexed the room from, the
# record its hits are revalidated against while no homeserver refresh has replaced it.
EXPORT_PREFIX = "export:"
COMPAT_KEY = "compat"  # what the collection's vectors and payloads depend on


def compatibility(identity: EmbedderIdentity) -> dict[str, Any]:
    """What a collection's vectors and payloads depend on; any change builds a new generation."""
    return {
        "schema": SCHEMA_VERSION,
        "embedder": dict(identity.as_record()),
        "chunker": CHUNKER_VERSION,
        "scrub": SCRUB_VERSION,
        "lexical": LEXICAL_VERSION,
    }


def cursor_record(
    token: str | None, tails: Mapping[str, str], last_event_id: str | None = None
) -> dict[str, Any]:
    """The value of `cursor:<room id>`: the walk's next token, the open windows' tails, and
    the newest event the walk has read (`last_event_id`): a room log read later that holds it
    holds everything the index may be missing (`ingest.search.tails.tail_since`)."""
    return {
        "token": token,
        "tails": dict(tails),
        "last_event_id": last_event_id,
        "updated_ms": int(time.time() * 1000),
    }


def cursor_mark(
    events: Sequence[ClientEvent], stones: Sequence[Tombstone], previous: str | None
) -> str | None:
    """The cursor's `last_event_id` after a page of `events` (oldest first): its newest event
    that leaves no trace of a message, neither redacted nor inside a purge (the collection
    keeps nothing of either, not even the id); else `previous`. An older mark only makes
    what a log read holds after it a larger superset of the tail."""
    for event in reversed(events):
        event_id, ts = event.get("event_id"), event.get("origin_server_ts")
        if not isinstance(event_id, str) or not isinstance(ts, int):
            continue
        if any(stone.covers(ts) for stone in stones):
            continue
        item = normalize(event, own_user_ids=frozenset(), command_prefix="")
        if isinstance(item, Skip) and item.reason is SkipReason.REDACTED:
            continue
        return event_id
    return previous


@dataclass(frozen=True)
class Tombstone:
    room_id: RoomID
    from_ts: int
    to_ts: int

    @property
    def key(self) -> str:
        return f"{TOMBSTONE_PREFIX}{self.room_id}:{self.from_ts}:{self.to_ts}"

    def covers(self, ts: int) -> bool:
        return self.from_ts <= ts <= self.to_ts

    @classmethod
    def from_meta(cls, record: Mapping[str, Any]) -> Tombstone:
        """A purge as the store or the purge file keeps it (`as_meta`, extra keys ignored).

        Raises:
            KeyError, TypeError, ValueError: the record is no purge.
        """
        return cls(RoomID(str(record["room_id"])), int(record["from_ts"]), int(record["to_ts"]))

    def as_meta(self) -> dict[str, Any]:
        """The record the store and the purge file keep (`from_meta` reads it back)."""
        return {"room_id": self.room_id, "from_ts": self.from_ts, "to_ts": self.to_ts}


def add_tombstone(collection: Collection, room_id: RoomID, from_ts: int, to_ts: int) -> Tombstone:
    """Record an operator's purge; the next refresh applies it and never re-indexes its events."""
    if to_ts < from_ts:
        raise ValueError(f"purge range ends ({to_ts}) before it starts ({from_ts})")
    stone = Tombstone(room_id, from_ts, to_ts)
    collection.put_meta(
        stone.key, {**stone.as_meta(), "created_ms": int(time.time() * 1000), "applied": False}
    )
    return stone


def room_tombstones(
    found: Mapping[str, Mapping[str, Any]], room_id: RoomID
) -> list[tuple[Tombstone, bool]]:
    """A room's tombstones among `tombstone:<room id>:` records, and whether each is applied."""
    return [
        (Tombstone.from_meta(v), bool(v.get("applied")))
        for v in found.values()
        if v.get("room_id") == room_id
    ]


def retry_record(
    room_id: RoomID, error: str, before: Mapping[str, Any], *, full: bool
) -> dict[str, Any]:
    """The value of `retry:<room id>` after the room failed again (`before`: the last one).

    Only full passes count (they decide a rebuild's switch): the live stream wakes a busy
    room's own refresh every few seconds, and a blip would otherwise count as persistent.
    """
    now = int(time.time() * 1000)
    failed = int(before.get("failed_passes", 0))
    failed += 1 if full or failed == 0 else 0
    return {
        "room_id": room_id,
        "error": error,
        "failed_passes": failed,
        "since_ms": int(before.get("since_ms", now)),
        "last_ms": now,
    }


def export_record(path: Path) -> dict[str, Any]:
    """The meta value `muninn import` keeps under `EXPORT_PREFIX + room_id`."""
    return {"path": str(path.resolve())}


def exported_rooms(
    exports: Mapping[str, Mapping[str, Any]],
    cursors: Mapping[str, Mapping[str, Any]],
    *,
    cursor_prefix: str,
) -> dict[RoomID, Path]:
    """Rooms whose index was built from an export: an export record names the file, and the
    room's cursor is still the export's (a refresh from the homeserver since replaces it, and
    then the homeserver is the record again)."""
    out: dict[RoomID, Path] = {}
    for key, record in exports.items():
        room_id = key.removeprefix(EXPORT_PREFIX)
        token = str((cursors.get(cursor_prefix + room_id) or {}).get("token", ""))
        if token.startswith(EXPORT_TOKEN_PREFIX) and isinstance(record.get("path"), str):
            out[RoomID(room_id)] = Path(record["path"])
    return out


def puppet_refusal(
    marker: Mapping[str, Any] | None, is_puppet: Callable[[str], bool]
) -> dict[str, Any] | None:
    """A `refused:<room id>` record if it still names a bridge puppet (the configured
    namespaces decide), else None."""
    if marker is not None and is_puppet(str(marker.get("user_id"))):
        return dict(marker)
    return None


__all__ = [
    "COMPAT_KEY",
    "CURSOR_PREFIX",
    "EXPORT_PREFIX",
    "REFUSED_PREFIX",
    "RETRY_PREFIX",
    "SCHEMA_VERSION",
    "TOMBSTONE_PREFIX",
    "Tombstone",
    "add_tombstone",
    "compatibility",
    "cursor_mark",
    "cursor_record",
    "export_record",
    "exported_rooms",
    "puppet_refusal",
    "retry_record",
    "room_tombstones",
]
