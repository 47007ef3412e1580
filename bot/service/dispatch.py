"""The event path of `muninn run`: each event read once on receipt, then dispatched in order.

`accept` is the live stream's sink (appservice pushes, the `/sync` loop): it reads each event
of a batch once (`bot.chat.commands.incoming.received`: the command in it, its `received` time
stamped now) and queues the batch, or answers False when the queue is full (the caller retries).
`run`, the one dispatcher task, takes the batches off in order and for each event
- drops cached room state on any state event, and hands the bot's own membership to
  `own_membership` (invites); the bot's own join (the roster's) wakes its room's refresh at
  once, not at the next full pass (issue 46);
- wakes the room's refresh for a message or redaction in an eligible room (debounced, one
  writer), except for a bot command: the writer indexes none, and the pass would compete (the
  event as the writer reads it was read on receipt, `Received.said`);
- hands each command, as read on receipt, to the `CommandPool` (a free slot, a deadline).
A batch counts as done (`queue.join()`) once every command it started has finished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from mautrix.types import EventType

from bot.chat.commands.incoming import Received, received
from bot.chat.handlers import CommandHandler
from bot.service.inflight import CommandPool, Countdown
from bot.service.scheduler import RefreshScheduler
from ingest.errors import ConfigError, MatrixError
from ingest.matrix import ClientEvent, content_of
from ingest.matrix.rooms import RoomCache
from ingest.types import RoomID, Skip, SkipReason

__all__ = ["Dispatcher"]

log = logging.getLogger("muninn.service")

_WAKE_TYPES = (EventType.ROOM_MESSAGE.t, EventType.ROOM_REDACTION.t)

OwnMembership = Callable[[RoomID, ClientEvent], Awaitable[None]]


@dataclass(frozen=True)
class Dispatcher:
    """`accept(events)` from the live stream; `run()` as one long-lived task."""

    queue: asyncio.Queue[Sequence[Received]]
    rooms: RoomCache
    handler: CommandHandler  # whose user and prefix say which events are commands
    commands: CommandPool
    scheduler: RefreshScheduler  # woken when a room's refresh is due
    own_membership: OwnMembership  # the bot's own membership event, its room's state dropped

    def accept(self, events: Sequence[ClientEvent]) -> bool:
        """The sink of the live stream: False when the queue is full (the caller retries).
        Each event is read only once the queue has room: an offer refused is no receipt."""
        if self.queue.full():
            return False
        self.queue.put_nowait(received(events, self.handler.bot_user_id, self.handler.prefix))
        return True

    async def run(self) -> None:
        while True:
            batch = await self.queue.get()
            done = Countdown(self.queue.task_done)
            try:
                for item in batch:
                    event = item.event
                    try:
                        if await self.dispatch(item) and item.command is not None:
                            await self.commands.submit(item.command, done)
                    except (MatrixError, ConfigError, OSError) as e:
                        log.warning("event %s: %s", event.get("event_id"), e)
                    except Exception:  # a bug in one event must not stop the others
                        log.exception("event %s failed", event.get("event_id"))
            finally:
                done.release()

    async def dispatch(self, item: Received) -> bool:
        """The in-order part of one event; False when it is one no command can be in (a state
        event, or no room or type)."""
        event = item.event
        room_id = event.get("room_id")
        etype = event.get("type")
        if not isinstance(room_id, str) or not isinstance(etype, str):
            return False
        if "state_key" in event:
            self.rooms.invalidate(room_id)
            self.handler.state_changed(room_id)
            if (
                etype == EventType.ROOM_MEMBER.t
                and event.get("state_key") == self.handler.bot_user_id
            ):
                await self.own_membership(RoomID(room_id), event)
                if _joined(event):  # a room just joined is read now; the pass judges its scope
                    self.scheduler.wake(RoomID(room_id))
            return False
        ours = event.get("sender") == self.handler.bot_user_id
        wakes = etype in _WAKE_TYPES and not ours and not self._indexes_nothing(item)
        if wakes and (await self.rooms.get(room_id)).verdict.eligible:
            self.scheduler.wake(RoomID(room_id))
        return True

    def _indexes_nothing(self, item: Received) -> bool:
        """A bot command, by the writer's own rule as read on receipt: it indexes none (rule
        9). A bridge puppet's command still wakes the writer, whose pass refuses the room
        (rule 4)."""
        sender = item.event.get("sender")
        if isinstance(sender, str) and self.rooms.scope.is_puppet(sender):
            return False
        return isinstance(item.said, Skip) and item.said.reason is SkipReason.COMMAND


def _joined(event: ClientEvent) -> bool:
    """A member event that joins (not a profile change of a member already joined)."""
    if content_of(event).get("membership") != "join":
        return False
    unsigned = event.get("unsigned")
    before = unsigned.get("prev_content") if isinstance(unsigned, dict) else None
    return not isinstance(before, dict) or before.get("membership") != "join"
