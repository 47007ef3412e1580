"""The refresh scheduler: wake-ups debounced into one pass, a failed pass retried, a clean stop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from bot.service.scheduler import RefreshScheduler
from ingest.index.reports import RefreshReport, RoomReport
from ingest.types import RoomID


async def test_scheduler_debounces_wakeups_into_one_pass() -> None:
    """Wake-ups within the debounce window become one refresh of all those rooms."""
    calls: list[Sequence[RoomID] | None] = []

    async def refresh(rooms: Sequence[RoomID] | None) -> None:
        calls.append(rooms)

    sched = RefreshScheduler(refresh, debounce=0.05, interval=3600, full_at_start=False)
    task = asyncio.create_task(sched.run())
    try:
        sched.wake(RoomID("!b"))
        sched.wake(RoomID("!a"))
        await asyncio.wait_for(sched.settle([RoomID("!a")]), 2)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert calls == [["!a", "!b"]]


async def test_scheduler_retries_a_failed_pass() -> None:
    """A failing refresh is logged and retried; the scheduler keeps running."""
    from ingest.errors import MatrixUnavailable

    calls: list[Sequence[RoomID] | None] = []

    async def refresh(rooms: Sequence[RoomID] | None) -> None:
        calls.append(rooms)
        if len(calls) == 1:
            raise MatrixUnavailable("down")

    sched = RefreshScheduler(refresh, debounce=0.01, interval=3600, full_at_start=False)
    sched._backoff = lambda: 0.01  # type: ignore[method-assign]
    task = asyncio.create_task(sched.run())
    try:
        sched.wake(RoomID("!a"))
        for _ in range(200):
            if len(calls) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert calls[:2] == [["!a"], ["!a"]]


async def test_scheduler_stops_when_a_room_changes_as_it_is_stopped() -> None:
    """Regression (a hung CI run): `stop()` cancelled the scheduler in the same loop turn as a
    wake-up, and Python 3.11's `asyncio.wait_for` returned the wake-up and dropped the
    cancellation, so the task waited again and `muninn run` never finished stopping."""

    async def refresh(rooms: Sequence[RoomID] | None) -> None:
        pass

    sched = RefreshScheduler(refresh, debounce=3600, interval=3600, full_at_start=False)
    task = asyncio.create_task(sched.run())
    await asyncio.sleep(0.01)  # the task now waits for a change
    sched.wake(RoomID("!a"))
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=2)
    assert done == {task}, "the scheduler swallowed its cancellation and kept waiting"
    assert task.cancelled()


async def test_scheduler_takes_a_room_left_behind_again_after_the_others() -> None:
    """Regression (issue 46): a room whose pass ran out of time with pages left (a flood) is
    refreshed again at once, but after a room woken meanwhile: another room's new message
    waits one room's pass time, not the whole flood."""
    calls: list[list[RoomID]] = []
    flood, quiet = RoomID("!a-flood"), RoomID("!z-quiet")
    left = [3]

    async def refresh(rooms: Sequence[RoomID] | None) -> RefreshReport:
        calls.append(list(rooms or []))
        report = RefreshReport("g")
        for room_id in rooms or []:
            behind = room_id == flood and left[0] > 0
            left[0] -= room_id == flood
            report.rooms.append(RoomReport(room_id, behind=behind))
            if room_id == flood and len(calls) == 1:
                sched.wake(quiet)  # a message in another room while the flood is embedded
        return report

    sched = RefreshScheduler(refresh, debounce=0.01, interval=3600, full_at_start=False)
    task = asyncio.create_task(sched.run())
    try:
        sched.wake(flood)
        for _ in range(200):
            if len(calls) >= 4:
                break
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert calls[:2] == [[flood], [quiet, flood]]  # the quiet room before the flood's rest
    assert calls[2:4] == [[flood], [flood]]  # on until it is no longer behind
    assert len(calls) == 4
