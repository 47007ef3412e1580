"""When the one writer runs inside `muninn run`: debounced room wake-ups and a periodic full pass.

One task runs every refresh, so there is never more than one writer pass at a time. A wake-up
for a room (a message or redaction arrived) opens a coalescing window of `debounce` seconds;
when it closes, every room woken meanwhile is refreshed in one `refresh(only=rooms)`. The full
pass runs at start and then every `interval` seconds. A failed pass is logged and retried with
backoff; it never stops the service, and the cursor rule (rule 10) makes the retry safe.
A room a pass left behind (its pass's time ran out with pages to read, `walkbounds`) is woken
again at once and refreshed after the other rooms woken meanwhile: a flood in one room delays
another room's new message by at most one room's pass time, not by the whole flood.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from ingest.errors import MuninnError
from ingest.index.reports import RefreshReport
from ingest.types import RoomID

__all__ = ["RefreshScheduler"]

log = logging.getLogger("muninn.service")

Refresh = Callable[[Sequence[RoomID] | None], Awaitable[RefreshReport | None]]


class RefreshScheduler:
    """`wake(room)` from the event path; `run()` as one long-lived task."""

    def __init__(
        self,
        refresh: Refresh,
        *,
        debounce: float,
        interval: float,
        full_at_start: bool = True,
        max_backoff: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._refresh = refresh
        self.debounce = debounce
        self.interval = interval
        self.max_backoff = max_backoff
        self._clock = clock
        self._pending: set[RoomID] = set()
        self._behind: set[RoomID] = set()  # rooms a pass left with pages to read: last
        self._due: float | None = None  # when the pending rooms are refreshed
        self._next_full = clock() if full_at_start else clock() + interval
        self._changed = asyncio.Event()
        self._failures = 0
        self.passes = 0  # completed passes, for tests and status
        self._started = 0
        self._finished = 0
        self._progress = asyncio.Condition()

    def wake(self, room_id: RoomID) -> None:
        """A room changed: refresh it within about `debounce` seconds."""
        self._pending.add(room_id)
        if self._due is None:
            self._due = self._clock() + self.debounce
        self._changed.set()

    async def settle(self, rooms: Sequence[RoomID]) -> None:
        """Wake `rooms` and wait until a pass that started after this call has finished."""
        target = self._started + 1
        for room_id in rooms:
            self.wake(room_id)
        async with self._progress:
            await self._progress.wait_for(lambda: self._finished >= target)

    async def run(self) -> None:
        while True:
            now = self._clock()
            deadline = self._next_full if self._due is None else min(self._due, self._next_full)
            if deadline > now:
                self._changed.clear()
                # Not `asyncio.wait_for`: on Python 3.11 it drops a cancellation that arrives
                # in the same turn as the wake-up, and `stop()` then waits forever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(deadline - now):
                        await self._changed.wait()
                continue
            if self._next_full <= now:
                self._pending.clear()  # the full pass covers them
                self._due = None
                ok = await self._pass(None)
                self._next_full = self._clock() + (self.interval if ok else self._backoff())
            else:
                rooms = sorted(self._pending, key=lambda r: (r in self._behind, r))
                self._pending.clear()
                self._due = None
                if not await self._pass(rooms):
                    self._pending.update(rooms)
                    self._due = self._clock() + self._backoff()

    async def _pass(self, rooms: Sequence[RoomID] | None) -> bool:
        started = self._clock()
        self._started += 1
        try:
            report = await self._refresh(rooms)
        except (MuninnError, OSError) as e:
            self._failures += 1
            what = "full refresh" if rooms is None else f"refresh of {', '.join(rooms)}"
            log.warning("%s failed: %s", what, e)
            return False
        finally:
            async with self._progress:
                self._finished += 1
                self._progress.notify_all()
        self._failures = 0
        self.passes += 1
        behind = report.behind() if report is not None else []
        self._behind.difference_update(rooms or self._behind)
        self._behind.update(behind)
        for room_id in behind:  # on at once, after whatever else is woken meanwhile
            self.wake(room_id)
        what = "full pass" if rooms is None else f"{len(rooms)} room(s)"
        log.info("refreshed %s in %.2fs", what, self._clock() - started)
        return True

    def _backoff(self) -> float:
        return float(min(self.max_backoff, 2 ** min(self._failures, 10)))
