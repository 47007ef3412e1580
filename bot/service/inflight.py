"""Commands in flight: a bounded number run at once, each under its own deadline.

The service's one event loop hands each command, as read on receipt
(`bot.chat.commands.incoming.Incoming`, its `received` time stamped then), to
`CommandPool.submit`, which waits for a free slot (so a burst backs up into the event queue, and
a full queue answers 503 to the homeserver) and then runs the command as its own task. A command
still running at its deadline is cancelled and `on_timeout` answers it briefly: a slow command
never holds the others, and never ends in silence. `done` callbacks let the caller count a batch
as handled only once every command it started has finished."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.chat.commands.incoming import Incoming
from ingest.errors import ConfigError, MatrixError

__all__ = ["CommandPool", "Countdown"]

log = logging.getLogger("muninn.service")

Run = Callable[[Incoming], Awaitable[None]]


class Countdown:
    """Calls `then` once every `hold()` has been matched by a `release()`."""

    def __init__(self, then: Callable[[], None]) -> None:
        self._then = then
        self._held = 1  # the creator's own hold, released when it has handed out the rest

    def hold(self) -> None:
        self._held += 1

    def release(self) -> None:
        self._held -= 1
        if self._held == 0:
            self._then()


class CommandPool:
    """`submit(command)` from the one dispatcher; `close()` on stop."""

    def __init__(self, limit: int, timeout: float, run: Run, on_timeout: Run) -> None:
        self.limit = limit
        self.timeout = timeout
        self._run = run
        self._on_timeout = on_timeout
        self._slots = asyncio.Semaphore(limit)
        self._tasks: set[asyncio.Task[None]] = set()
        self._keys: set[str] = set()  # event ids in flight: a duplicate delivery waits for none
        self.running = 0
        self.waiting = 0  # submits waiting for a slot (0 or 1: the dispatcher is one task)
        self.peak = 0  # most commands ever in flight at once, for status and benchmarks
        self.timeouts = 0

    async def submit(self, command: Incoming, done: Countdown) -> None:
        """Wait for a free slot, then start the command; `done` is released when it ends."""
        key = command.event_id
        if key in self._keys:
            return
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self._keys.add(key)
        self.running += 1
        self.peak = max(self.peak, self.running)
        done.hold()
        task = asyncio.create_task(self._one(command), name=f"muninn-command-{key}")
        self._tasks.add(task)

        def finished(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            self._keys.discard(key)
            self.running -= 1
            self._slots.release()
            done.release()

        task.add_done_callback(finished)

    async def _one(self, command: Incoming) -> None:
        try:
            deadline = asyncio.timeout(self.timeout)
            try:
                async with deadline:
                    await self._run(command)
            except TimeoutError:
                if not deadline.expired():
                    raise  # a timeout of the command's own, not our deadline
                self.timeouts += 1
                log.warning(
                    "command %s still running after %.0f s; cancelled",
                    command.event_id,
                    self.timeout,
                )
                async with asyncio.timeout(self.timeout):
                    await self._on_timeout(command)
        except (MatrixError, ConfigError, OSError, TimeoutError) as e:
            log.warning("event %s: %s", command.event_id, e)
        except Exception:  # a bug in one command must not stop the others
            log.exception("event %s failed", command.event_id)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
