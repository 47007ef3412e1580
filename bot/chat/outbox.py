"""Replies that met a homeserver outage, sent again until they go through or are not worth it.

A reply's `PUT` already retries inside the request layer (~8 s); an outage longer than that
raised `MatrixUnavailable`, and the command was marked handled, so it was never answered
(issue 21 item 5). The transaction id is derived from the command (`txn_id_for`), so the same
`PUT` may be repeated as often as needed: the homeserver posts it once. The outbox repeats it
with back-off (`FIRST_DELAY` doubling to `MAX_DELAY`) while the reply is still worth sending:
at most `MAX_WAIT` seconds after it was held, and never once the command is older than
`MAX_COMMAND_AGE_MS` (the age past which a command is ignored). At most `MAX_WAITING` replies
wait; a reply given up is logged and counted (`muninn_replies_given_up_total`). On stop,
`drain` tries each waiting reply once more within the stop budget, then gives up the rest.

A reply that quotes the log carries its audience check (`Pending.instead`, rule 14), run just
before every repeat: who reads the room may change during the outage, and a reply checked once
before its first try would reach a member who joined since (issue 46). One that no longer
holds is replaced, under the same transaction id, by the short "ask again" notice the check
returns, repeated like any reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from bot.chat.commands.incoming import MAX_COMMAND_AGE_MS
from bot.chat.content import ReplyContent
from ingest.errors import MatrixUnavailable

__all__ = ["Outbox", "Pending"]

log = logging.getLogger("muninn.chat")

FIRST_DELAY = 2.0  # seconds before the first repeat, doubling
MAX_DELAY = 60.0  # seconds, the cap of that doubling
MAX_WAIT = 600.0  # seconds a reply is repeated at most
MAX_WAITING = 256  # replies waiting at once; one more is given up at once

Send = Callable[[str, ReplyContent, str], Awaitable[object]]  # room, content, txn id


@dataclass(frozen=True)
class Pending:
    """A reply to send again: where, what, under which transaction id, for which command."""

    room_id: str
    content: ReplyContent
    txn_id: str
    command_ts: int  # ms, the command's origin_server_ts
    # Checked just before each repeat: None, the reply still holds; else what replaces it.
    instead: Callable[[], Awaitable[ReplyContent | None]] | None = None


class Outbox:
    """Replies waiting for the homeserver; each is one task, kept until it ends."""

    def __init__(
        self,
        send: Send,
        *,
        on_given_up: Callable[[Pending, str], None] | None = None,
        on_sent: Callable[[Pending], None] | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        max_wait: float = MAX_WAIT,
        max_waiting: int = MAX_WAITING,
    ) -> None:
        self._send = send
        self._on_given_up = on_given_up
        self._on_sent = on_sent
        self._clock_ms = clock_ms
        self._first, self._max_delay, self._max_wait = first_delay, max_delay, max_wait
        self._max_waiting = max_waiting
        self._tasks: dict[str, asyncio.Task[None]] = {}  # by transaction id
        self._draining = asyncio.Event()

    def __len__(self) -> int:
        return len(self._tasks)

    def hold(self, pending: Pending) -> None:
        """Send `pending` again later (a reply already waiting under its txn id is kept)."""
        if pending.txn_id in self._tasks:
            return
        if len(self._tasks) >= self._max_waiting or self._draining.is_set():
            self._give_up(pending, f"{len(self._tasks)} replies already waiting")
            return
        task = asyncio.create_task(self._repeat(pending), name=f"outbox {pending.txn_id}")
        self._tasks[pending.txn_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(pending.txn_id, None))
        log.warning(
            "the reply in %s waits for the homeserver (%s)", pending.room_id, pending.txn_id
        )

    async def _repeat(self, p: Pending) -> None:
        deadline_ms = min(
            self._clock_ms() + int(self._max_wait * 1000), p.command_ts + MAX_COMMAND_AGE_MS
        )
        try:
            await self._until_sent(p, deadline_ms)
        except asyncio.CancelledError:
            self._give_up(p, "stopped before the homeserver answered")
            raise

    async def _until_sent(self, p: Pending, deadline_ms: int) -> None:
        delay = self._first
        while True:
            with contextlib.suppress(TimeoutError):  # a drain wakes the wait: one last try, now
                await asyncio.wait_for(self._draining.wait(), delay)
            if self._clock_ms() >= deadline_ms:
                self._give_up(p, "the command is too old to answer now")
                return
            try:
                if p.instead is not None and (notice := await p.instead()) is not None:
                    log.warning("withheld the reply in %s (%s): rule 14", p.room_id, p.txn_id)
                    p = replace(p, content=notice, instead=None)
                await self._send(p.room_id, p.content, p.txn_id)
            except MatrixUnavailable as e:
                if self._draining.is_set():
                    self._give_up(p, f"stopping, and the homeserver is still down ({e})")
                    return
                delay = min(delay * 2, self._max_delay)
                continue
            except Exception as e:  # refused for good: a repeat would fail the same way
                self._give_up(p, f"refused: {e}")
                return
            log.info("the reply in %s went through after an outage", p.room_id)
            if self._on_sent is not None:
                self._on_sent(p)
            return

    def _give_up(self, p: Pending, why: str) -> None:
        log.warning("gave up the reply in %s (%s): %s", p.room_id, p.txn_id, why)
        if self._on_given_up is not None:
            self._on_given_up(p, why)

    async def join(self) -> None:
        """Until every reply now waiting is sent or given up."""
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def drain(self, budget: float) -> None:
        """On stop: each waiting reply is tried once more, within `budget` seconds; the rest
        are given up."""
        self._draining.set()
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=budget)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        if late:
            log.warning(
                "stopped with %d replies unsent (the homeserver did not answer)", len(late)
            )
