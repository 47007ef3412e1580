"""One room's `/messages` walk within a pass's bounds (docs/ARCHITECTURE.md §3 rule 11).

A faulty homeserver (or a proxy before it) must not hold the one writer on one room: the
reader ends a walk that repeats itself (`TimelineReader.walk`, `MatrixBadPaging`), and here a
pass reads at most `WALK_PAGES` pages of a room and waits at most `WALK_READ_SECONDS` for them.
One busy room must not hold it either: a pass spends at most `WALK_PASS_SECONDS` on a room's
walk, reading, embedding and writing together (one sender's flood of 10,000 messages held
every other room's new messages back until it was all embedded, 122 s, issue 46); such a room
is said to be `behind` and goes on at the next pass, which takes the rooms not behind first.
A room cut short between pages keeps its cursor and goes on at the next pass (lossless); a page
that does not come within the time left fails the room (`MatrixUnavailable`, retried at the
next pass). Either is logged by room, and the other rooms of the pass go on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from ingest.errors import MatrixUnavailable
from ingest.index.reports import RoomReport
from ingest.matrix import Page

__all__ = ["WALK_PAGES", "WALK_PASS_SECONDS", "WALK_READ_SECONDS", "bounded_walk"]

log = logging.getLogger("muninn.refresh")

WALK_PAGES = 10_000  # a room's pages a pass: a million events at the default page size
WALK_READ_SECONDS = 120.0  # waiting for a room's pages a pass (not embedding or writing them)
WALK_PASS_SECONDS = 20.0  # a room's walk a pass, its pages read, embedded and written


async def bounded_walk(pages: AsyncIterator[Page], report: RoomReport) -> AsyncIterator[Page]:
    """`pages` until they end or a bound is reached; a cut says so in `report.detail`."""
    room_id = report.room_id
    waited, count = 0.0, 0
    began = time.monotonic()
    try:
        while True:
            if count >= WALK_PAGES or waited >= WALK_READ_SECONDS:
                report.detail = (
                    f"walk cut short after {count} pages and {waited:.0f} s of reading; the "
                    "next pass goes on from its cursor"
                )
                log.warning("room %s: %s", room_id, report.detail, extra={"room_id": room_id})
                return
            started = time.monotonic()
            try:
                async with asyncio.timeout(WALK_READ_SECONDS - waited):
                    page = await anext(pages)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise MatrixUnavailable(
                    f"/messages of {room_id} did not answer within {WALK_READ_SECONDS:.0f} s "
                    f"of reading this pass (after {count} pages)"
                ) from None
            waited += time.monotonic() - started
            if count and time.monotonic() - began >= WALK_PASS_SECONDS:
                # A page is left: read again at the next pass, its cursor still before it.
                report.behind = True
                report.detail = (
                    f"behind: {count} pages read and written in {WALK_PASS_SECONDS:.0f} s; the "
                    "next pass goes on from its cursor, after the rooms not behind"
                )
                log.info("room %s: %s", room_id, report.detail, extra={"room_id": room_id})
                return
            count += 1
            yield page
    finally:
        aclose = getattr(pages, "aclose", None)
        if aclose is not None:
            await aclose()
