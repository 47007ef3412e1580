"""The writer's paths that take a room out of a pass (`ingest.index.refresh`): a room that failed
(recorded for the next pass to retry), a room that left scope (purged), a room a bridge
puppet spoke in (refused for good, then purged).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ingest.errors import MatrixError
from ingest.index.generations import Generations
from ingest.index.records import CURSOR_PREFIX, REFUSED_PREFIX, RETRY_PREFIX, retry_record
from ingest.index.reports import RoomReport
from ingest.rules.scrub import scrub
from ingest.store import AsyncCollection, PointFilter
from ingest.types import Refusal, RoomID

log = logging.getLogger("muninn.index")  # the writer's log, as before the split

ERROR_CHARS = 500  # an error as recorded and reported: scrubbed, and cut to this length


async def room_failed(
    col: AsyncCollection,
    room_id: RoomID,
    error: Exception,
    retries: Mapping[str, Mapping[str, Any]],
    full: bool,
) -> RoomReport:
    """Record a room's failure where status and the next pass find it; its report."""
    # Scrubbed and cut: an error may quote an event of the room.
    text = scrub(f"{type(error).__name__}: {error}")[:ERROR_CHARS]
    before = retries.get(RETRY_PREFIX + room_id) or {}
    record = retry_record(room_id, text, before, full=full)
    failed = int(record["failed_passes"])
    await col.put_meta(RETRY_PREFIX + room_id, record)
    log.warning(
        "room %s failed (%d pass(es) in a row), retried next pass: %s",
        room_id,
        failed,
        text,
        exc_info=not isinstance(error, MatrixError),
        extra={"room_id": room_id},
    )
    return RoomReport(room_id, error=text, failed_passes=failed)


async def purge_room(col: AsyncCollection, room_id: RoomID, report: RoomReport) -> None:
    """Delete every point and the cursor of a room that left scope."""
    ids = await col.point_ids(PointFilter(room_ids=(room_id,)))
    await col.delete(ids)
    await col.delete_meta(CURSOR_PREFIX + room_id)
    col.forget_removed()  # rule 13b: the store's files must not keep the room's text
    report.windows_deleted += len(ids)
    report.purged_room = True
    log.warning(
        "purged room %s from the index (%s): %d windows", room_id, report.verdict, len(ids)
    )


async def refuse_bridged(
    col: AsyncCollection,
    generations: Generations,
    room_id: RoomID,
    puppet: str,
    report: RoomReport,
) -> None:
    """Rule 4 by sender: purge what this walk indexed and remember the refusal."""
    report.verdict = str(Refusal.BRIDGED)
    report.detail = f"bridged: sender {puppet} is in a bridge puppet namespace"
    marker = {"user_id": puppet, "detail": report.detail}
    await col.put_meta(REFUSED_PREFIX + room_id, marker)
    log.warning("refusing room %s: %s", room_id, report.detail)
    await purge_room(col, room_id, report)
    await generations.copy_refusal(col, room_id, marker)
