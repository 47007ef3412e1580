"""`ingest.index.reports`: what a writer pass did, per room and in all (`muninn refresh --json`).

Filled in by `ingest.index.refresh` and the parts it drives (`ingest.index.pages`,
`ingest.index.points`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ingest.types import RoomID


@dataclass
class RoomReport:
    """What one refresh did to one room (the `muninn refresh --json` per-room record)."""

    room_id: RoomID
    room_alias: str | None = None
    verdict: str = "eligible"
    detail: str = ""
    events_read: int = 0
    indexed: int = 0
    edits_applied: int = 0
    redactions_applied: int = 0
    purged_messages: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    windows_written: int = 0
    windows_deleted: int = 0
    windows_embedded: int = 0
    # The room's points once the pass is done (what `muninn status` counts); None when the
    # pass did not read the room (refused, failed). `windows_written` counts every upsert,
    # a window rewritten as its messages arrive each time.
    points: int | None = None
    purged_room: bool = False
    # the homeserver refused the room's cursor: read again from its start (`detail` says so;
    # not in the JSON, `ingest.index.walkbounds.healing_walk`)
    cursor_reset: bool = False
    error: str | None = None  # this pass failed the room; the next pass retries it
    # the pass's time for the room ran out with pages left (`walkbounds.WALK_PASS_SECONDS`)
    behind: bool = False
    failed_passes: int = 0  # full passes in a row that failed the room (at least 1 if failed)

    def as_json(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "room_alias": self.room_alias,
            "verdict": self.verdict,
            "detail": self.detail,
            "events_read": self.events_read,
            "indexed": self.indexed,
            "edits_applied": self.edits_applied,
            "redactions_applied": self.redactions_applied,
            "purged_messages": self.purged_messages,
            "skipped": dict(sorted(self.skipped.items())),
            "windows_written": self.windows_written,
            "windows_deleted": self.windows_deleted,
            "windows_embedded": self.windows_embedded,
            "points": self.points,
            "purged_room": self.purged_room,
            "error": self.error,
            "behind": self.behind,
            "failed_passes": self.failed_passes,
        }


@dataclass
class RefreshReport:
    generation: str
    rooms: list[RoomReport] = field(default_factory=list)
    activated: bool = False
    switch_held: str | None = None  # why a complete rebuilt generation did not switch yet

    @property
    def failed(self) -> list[RoomReport]:
        return [r for r in self.rooms if r.error is not None]

    def behind(self) -> list[RoomID]:
        """The rooms this pass left with pages to read (`walkbounds.WALK_PASS_SECONDS`)."""
        return [r.room_id for r in self.rooms if r.behind]

    def as_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "activated": self.activated,
            "switch_held": self.switch_held,
            "rooms": [r.as_json() for r in self.rooms],
        }
