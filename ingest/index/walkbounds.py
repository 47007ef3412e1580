"""One room's `/messages` walk within a pass's bounds (docs/ARCHITECTURE.md §3 rule 11).

A faulty homeserver (or a proxy before it) must not hold the one writer on one room: the
reader ends a walk that repeats itself (`TimelineReader.walk`, `MatrixBadPaging`), and here a
pass reads at most `WALK_PAGES` pages of a room and waits at most `WALK_READ_SECONDS` for them.
In `muninn run` one busy room must not hold it either: a pass the service's scheduler runs
(`room_time`) spends at most `WALK_PASS_SECONDS` on a room's walk, reading, embedding and
writing together (one sender's flood of 10,000 messages held every other room's new messages
back until it was all embedded, 122 s, issue 46); such a room is said to be `behind` and goes
on at the next pass, which takes the rooms not behind first. A pass of `muninn refresh` or
`muninn import` reads every room to its end.
A room cut short between pages keeps its cursor and goes on at the next pass (lossless); a page
that does not come within the time left fails the room (`MatrixUnavailable`, retried at the
next pass). Either is logged by room, and the other rooms of the pass go on.

A cursor the homeserver refuses (400 "'from' parameter is invalid": a token of a database
since restored or replaced) would fail its room at every pass, never indexed again (issue 46):
`healing_walk` reads the room again from its start instead, says so, and the windows already
indexed stay until the new walk replaces them (its pages are replays, rule 11).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Protocol

from ingest.errors import MatrixError, MatrixUnavailable
from ingest.index.reports import RoomReport
from ingest.matrix import Page
from ingest.types import RoomID

__all__ = [
    "WALK_PAGES",
    "WALK_PASS_SECONDS",
    "WALK_READ_SECONDS",
    "bounded_walk",
    "healing_walk",
    "refused_cursor",
]

log = logging.getLogger("muninn.index")

WALK_PAGES = 10_000  # a room's pages a pass: a million events at the default page size
WALK_READ_SECONDS = 120.0  # waiting for a room's pages a pass (not embedding or writing them)
WALK_PASS_SECONDS = 20.0  # a room's walk a pass of `muninn run`: read, embedded and written

# The time a pass gives each room's walk (None: no bound, read to the end), set by `room_time`.
_ROOM_SECONDS: ContextVar[float | None] = ContextVar("room_seconds", default=None)


@contextlib.contextmanager
def room_time(seconds: float | None) -> Iterator[None]:
    """Within it, each room's walk gets at most `seconds` of a pass (`muninn run`'s passes)."""
    token = _ROOM_SECONDS.set(seconds)
    try:
        yield
    finally:
        _ROOM_SECONDS.reset(token)


class Walker(Protocol):
    def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]: ...


def refused_cursor(error: MatrixError) -> bool:
    """Whether `/messages` refused the `from` token it was given (Synapse: 400 M_UNKNOWN
    "'from' parameter is invalid"; the spec's errcode for a bad parameter, M_INVALID_PARAM)."""
    said = str(error).lower()
    named = any(mark in said for mark in ("'from'", "from token", "stream token"))
    return error.status == 400 and (error.errcode == "M_INVALID_PARAM" or named)


async def healing_walk(
    reader: Walker, room_id: RoomID, token: str | None, page_size: int, report: RoomReport
) -> AsyncIterator[Page]:
    """The room's walk from its cursor `token`; when the homeserver refuses that cursor
    before the first page (`refused_cursor`), the walk from the room's start instead, with
    `report.cursor_reset` set and said in `report.detail` and the log."""
    pages = reader.walk(room_id, token, page_size)
    try:
        try:
            first: Page | None = await anext(pages)
        except StopAsyncIteration:
            return
        except MatrixError as e:
            if token is None or not refused_cursor(e):
                raise
            await _close(pages)
            report.cursor_reset = True
            _say(
                report,
                f"the homeserver refused the room's cursor ({e}): read again from the room's "
                "start, what is indexed kept until replaced",
            )
            pages, first = reader.walk(room_id, None, page_size), None
        if first is not None:
            yield first
        async for page in pages:
            yield page
    finally:
        await _close(pages)


def _say(report: RoomReport, text: str, level: int = logging.WARNING) -> None:
    """Add `text` to what the report says of its room, and log it by room."""
    report.detail = f"{report.detail}; {text}" if report.detail else text
    log.log(level, "room %s: %s", report.room_id, report.detail, extra={"room_id": report.room_id})


async def _close(pages: AsyncIterator[Page]) -> None:
    aclose = getattr(pages, "aclose", None)
    if aclose is not None:
        await aclose()


async def bounded_walk(pages: AsyncIterator[Page], report: RoomReport) -> AsyncIterator[Page]:
    """`pages` until they end or a bound is reached; a cut says so in `report.detail`."""
    room_id = report.room_id
    waited, count = 0.0, 0
    began, budget = time.monotonic(), _ROOM_SECONDS.get()
    try:
        while True:
            if count >= WALK_PAGES or waited >= WALK_READ_SECONDS:
                _say(
                    report,
                    f"walk cut short after {count} pages and {waited:.0f} s of reading; the "
                    "next pass goes on from its cursor",
                )
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
            if count and budget is not None and time.monotonic() - began >= budget:
                # A page is left: read again at the next pass, its cursor still before it.
                report.behind = True
                _say(
                    report,
                    f"behind: {count} pages read and written in {budget:.0f} s of this pass; the "
                    "next pass goes on from its cursor, after the rooms not behind",
                    logging.INFO,
                )
                return
            count += 1
            yield page
    finally:
        await _close(pages)
