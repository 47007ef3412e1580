"""What the store says about its rooms, for `muninn status`: one read, the same on both sides.

`muninn status` reads it from the store itself, or, while `muninn run` holds the embedded store
(one process per path), from the service's `POST /_muninn/status` (`bot.service.http_api`), which
answers `StoreFacts.as_json()` of the same read. The homeserver's half of the status (which
rooms are joined, their verdicts) the CLI asks the homeserver for itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ingest.index.records import (
    COMPAT_KEY,
    CURSOR_PREFIX,
    EXPORT_PREFIX,
    REFUSED_PREFIX,
    RETRY_PREFIX,
    exported_rooms,
)
from ingest.store import Collection, PointFilter, Store
from ingest.store.contract import DAMAGED
from ingest.types import RoomID

__all__ = ["StoreFacts", "read_facts"]

JSONDict = dict[str, Any]


@dataclass(frozen=True)
class StoreFacts:
    """The active generation and, by room id, its records: cursor, writer refusal, failing
    passes, the export it was imported from (while the export is still its record), points."""

    generation: str | None
    versions: JSONDict | None
    points: int
    cursors: dict[str, JSONDict]
    refused: dict[str, JSONDict]
    retries: dict[str, JSONDict]
    imported: dict[str, str]  # room id → the export file `muninn import` read
    room_points: dict[str, int]
    # Rule 13a: what the generation no longer holds of what was written (None: it is whole).
    damage: str | None = None
    # A generation being built beside the active one (rule 13): {generation, rooms_read,
    # rooms, points}; None when none is. Searches read the active one until it switches in.
    rebuilding: JSONDict | None = None
    # room id → an alias its stored windows carry (what the store knows of a room's name with
    # the homeserver down, or of an imported room; issue 44).
    room_aliases: dict[str, str] = field(default_factory=dict)

    @property
    def archive(self) -> bool:
        """Every room here was built by `muninn import` and no homeserver pass wrote any: an
        archive store (a `muninn refresh`/`run` over it would purge rooms the reader left)."""
        return bool(self.imported) and not self.homeserver_rooms

    def room(self, room_id: str) -> tuple[JSONDict | None, JSONDict | None, JSONDict, int]:
        """A room's cursor, refusal marker, failing-pass record ({} when none) and points."""
        return (
            self.cursors.get(room_id),
            self.refused.get(room_id),
            self.retries.get(room_id) or {},
            self.room_points.get(room_id, 0),
        )

    @property
    def homeserver_rooms(self) -> list[str]:
        """Rooms whose index a homeserver pass wrote (a cursor that is not an export's): a
        store with any is one `muninn refresh`/`run` write to, and purge unjoined rooms from."""
        return sorted(set(self.cursors) - set(self.imported))

    def as_json(self) -> JSONDict:
        return {
            "generation": self.generation,
            "versions": self.versions,
            "points": self.points,
            "cursors": self.cursors,
            "refused": self.refused,
            "retries": self.retries,
            "imported": self.imported,
            "room_points": self.room_points,
            "damage": self.damage,
            "rebuilding": self.rebuilding,
            "room_aliases": self.room_aliases,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> StoreFacts:
        return cls(
            generation=doc["generation"],
            versions=doc["versions"],
            points=int(doc["points"]),
            cursors=dict(doc["cursors"]),
            refused=dict(doc["refused"]),
            retries=dict(doc["retries"]),
            imported=dict(doc["imported"]),
            room_points={k: int(v) for k, v in doc["room_points"].items()},
            damage=doc.get("damage"),
            rebuilding=doc.get("rebuilding"),
            room_aliases=dict(doc.get("room_aliases") or {}),
        )


EMPTY = StoreFacts(None, None, 0, {}, {}, {}, {}, {})


def read_facts(store: Store) -> StoreFacts:
    """One read of the active generation's records (blocking: run it in a thread)."""
    active = store.active()
    if active is None:
        return EMPTY
    col = store.open(active, dense_dim=None, create=False)

    def by_room(prefix: str) -> dict[str, JSONDict]:
        return {k.removeprefix(prefix): v for k, v in col.list_meta(prefix).items()}

    raw_cursors = col.list_meta(CURSOR_PREFIX)
    imported = exported_rooms(
        col.list_meta(EXPORT_PREFIX), raw_cursors, cursor_prefix=CURSOR_PREFIX
    )
    cursors = {k.removeprefix(CURSOR_PREFIX): v for k, v in raw_cursors.items()}
    refused, retries = by_room(REFUSED_PREFIX), by_room(RETRY_PREFIX)
    rooms = sorted(set(cursors) | set(refused) | set(retries) | set(imported))
    return StoreFacts(
        generation=active,
        versions=col.get_meta(COMPAT_KEY),
        points=col.count(),
        cursors=cursors,
        refused=refused,
        retries=retries,
        imported={room: str(path) for room, path in imported.items()},
        room_points={r: col.count(PointFilter(room_ids=(RoomID(r),))) for r in rooms},
        damage=col.damage,
        rebuilding=_rebuilding(store, active, len(cursors)),
        room_aliases={r: a for r in rooms if (a := _stored_alias(col, RoomID(r))) is not None},
    )


# Windows of a room read for its alias: the first that carries one names it.
_ALIAS_READS = 16


def _stored_alias(col: Collection, room_id: RoomID) -> str | None:
    """The canonical alias the room's stored windows were written under, if any."""
    windows = col.scroll(PointFilter(room_ids=(room_id,)), batch=_ALIAS_READS)
    for point in itertools.islice(windows, _ALIAS_READS):
        alias = point.payload.get("room_alias")
        if isinstance(alias, str) and alias:
            return alias
    return None


def _rebuilding(store: Store, active: str, rooms: int) -> JSONDict | None:
    """The generation a writer is building beside `active` (its compat record not yet
    complete), how many rooms it has read of the `rooms` the active one holds, its points."""
    for name in store.generations():
        if name == active or DAMAGED in name:
            continue
        col = store.open(name, dense_dim=None, create=False)
        compat = col.get_meta(COMPAT_KEY) or {}
        if compat.get("complete", True):
            continue
        read = len(col.list_meta(CURSOR_PREFIX))
        return {
            "generation": name,
            "rooms_read": read,
            "rooms": max(rooms, read),
            "points": col.count(),
        }
    return None
