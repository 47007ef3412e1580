"""`ingest.index.tombstones`: an operator's purge applied to the windows a room holds.

`muninn purge` records a tombstone (`ingest.index.records.Tombstone`, rule 12); the room's next
pass (`ingest.index.refresh`) deletes what each new one covers, rewrites the windows it cut and
marks it applied. The tombstone stays, so the pages walked after it skip its events
(`ingest.index.pages`) and they are never indexed again. `forget_removed` is rule 13b: the text a
redaction, an edit or a purge took out leaves the store's files.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ingest.index.points import CollectionLookup
from ingest.index.records import TOMBSTONE_PREFIX, Tombstone, room_tombstones
from ingest.index.reports import RoomReport
from ingest.index.windows import ChunkParams, WindowSet
from ingest.store import AsyncCollection, PointFilter
from ingest.types import RoomID

# A `WindowSet`'s changes embedded and written (`ingest.index.points.commit_changes`, the room's
# state, names and report bound by the writer).
Commit = Callable[[WindowSet], Awaitable[None]]


async def room_stones(col: AsyncCollection, room_id: RoomID) -> list[tuple[Tombstone, bool]]:
    """The room's tombstones, and whether each is applied."""
    found = await col.list_meta(f"{TOMBSTONE_PREFIX}{room_id}:")
    return room_tombstones(found, room_id)


async def apply_tombstones(
    col: AsyncCollection,
    room_id: RoomID,
    stones: Sequence[Tombstone],
    tails: dict[str, str],
    params: ChunkParams,
    report: RoomReport,
    commit: Commit,
) -> dict[str, str]:
    """Delete what new tombstones cover; they stay, so those events are never re-indexed.
    Returns the room's window tails after the purge."""
    lookup = CollectionLookup(col.sync, room_id)
    for stone in stones:
        flt = PointFilter(room_ids=(room_id,), after_ts=stone.from_ts, before_ts=stone.to_ts)
        windows = [lookup.stored(p) for p in await col.scroll(flt)]
        ws = WindowSet(room_id, lookup, params, tails)
        report.purged_messages += ws.purge(windows, stone.from_ts, stone.to_ts)
        await commit(ws)
        tails = ws.tails
    return tails


async def mark_applied(col: AsyncCollection, stones: Sequence[Tombstone]) -> None:
    """Record each tombstone as applied, once the cursor holds the tails after it."""
    for stone in stones:
        await col.put_meta(stone.key, {**stone.as_meta(), "applied": True})


def forget_removed(col: AsyncCollection, report: RoomReport) -> None:
    """Rule 13b: text a redaction, an edit or a purge took out must not stay in the store's
    files; the generation's close rewrites them."""
    if report.redactions_applied or report.edits_applied or report.purged_messages:
        col.forget_removed()


__all__ = ["Commit", "apply_tombstones", "forget_removed", "mark_applied", "room_stones"]
