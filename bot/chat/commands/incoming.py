"""The incoming-event filter: which events are command candidates, and each asker's rate.

`incoming` turns a raw event into an `Incoming` (or None: not a message, the bot's own, a
notice, no prefix); it runs once per event, on receipt (`Received`), which stamps the
`received` time a reply's latency counts from and reads the event as the writer would
(`normalize`, for the wake-up decision: a command is never indexed). `RateLimit` counts each
asker's commands a minute. The rest of the policy (rooms, askers, parse, "already answered")
is `bot.chat.handlers.CommandHandler`'s.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from mautrix.types import EventType, MessageType

from bot.chat.content import ReplyTo
from ingest.matrix import ClientEvent, EventContent, content_of
from ingest.rules.events import is_command, normalize, thread_root, typed_text
from ingest.types import Normalized, RoomID

__all__ = [
    "MAX_COMMAND_AGE_MS",
    "BoundedSeen",
    "Incoming",
    "RateLimit",
    "Received",
    "incoming",
    "received",
]

MAX_COMMAND_AGE_MS = 15 * 60_000  # an older command is history, not a question


class RateLimit:
    """At most `per_minute` commands per asker in any 60 s; one notice when first exceeded.

    It remembers at most `max_askers` askers, forgetting the least recently seen: an asker
    idle for a minute has nothing left to count, and is always seen less recently than one
    still counted.
    """

    MAX_ASKERS = 10_000

    def __init__(
        self,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        max_askers: int = MAX_ASKERS,
    ) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._max = max_askers
        self._times: dict[str, list[float]] = {}  # least recently seen first
        self._warned: dict[str, float] = {}

    @property
    def askers(self) -> int:
        """How many askers are remembered."""
        return len(self._times)

    def within(self, user: str) -> bool:
        """Whether `check` would let `user`'s next command through now; counts nothing."""
        now = self._clock()
        return sum(now - t < 60.0 for t in self._times.get(user, ())) < self.per_minute

    def check(self, user: str) -> Literal["ok", "warn", "drop"]:
        now = self._clock()
        while user not in self._times and len(self._times) >= self._max:
            forgotten = next(iter(self._times))  # seen least recently: idle ones come first
            del self._times[forgotten]
            self._warned.pop(forgotten, None)
        recent = [t for t in self._times.pop(user, []) if now - t < 60.0]
        if len(recent) < self.per_minute:
            recent.append(now)
            self._times[user] = recent
            self._warned.pop(user, None)
            return "ok"
        self._times[user] = recent
        if user in self._warned:
            return "drop"
        self._warned[user] = now
        return "warn"


@dataclass(frozen=True)
class Incoming:
    """A message that is shaped like a command."""

    room_id: RoomID
    event_id: str
    sender: str
    ts: int
    body: str  # what the sender typed: a reply's fallback quote removed (`typed_text`)
    content: EventContent
    received: float = field(default_factory=time.monotonic)  # when it arrived: on receipt

    @property
    def reply_to(self) -> ReplyTo:
        return ReplyTo(self.room_id, self.event_id, thread_root(self.content))


def incoming(event: ClientEvent, bot_user_id: str, prefix: str) -> Incoming | None:
    """The event as a command candidate, or None (not a message, ours, a notice, no prefix)."""
    content = content_of(event)
    if event.get("type") != EventType.ROOM_MESSAGE.t:
        return None
    body, sender = content.get("body"), event.get("sender")
    if (
        not isinstance(body, str)
        or sender == bot_user_id
        or content.get("msgtype") != MessageType.TEXT.value
    ):
        return None  # m.notice (other bots) and media are never commands
    text = typed_text(body, content)
    if not is_command(text, prefix):
        return None
    ts = event.get("origin_server_ts")
    return Incoming(
        RoomID(str(event.get("room_id"))),
        str(event.get("event_id")),
        str(sender),
        ts if isinstance(ts, int) else 0,
        text,
        content,
    )


@dataclass(frozen=True)
class Received:
    """One event as it arrived, read once: the command candidate in it, if any, carried from
    the receipt through the queue and a command slot to the handler; and the event as the
    writer reads it (`normalize` with the bot's user and prefix), which the dispatcher's
    wake-up decision takes instead of reading the event again."""

    event: ClientEvent
    command: Incoming | None
    said: Normalized


def received(events: Iterable[ClientEvent], bot_user_id: str, prefix: str) -> list[Received]:
    """A batch as it arrives (an appservice transaction, a `/sync` response), each event read
    once now: a command's `received` is stamped here, before the queue and the slot."""
    own = frozenset({bot_user_id})
    return [
        Received(
            event,
            incoming(event, bot_user_id, prefix),
            normalize(event, own_user_ids=own, command_prefix=prefix),
        )
        for event in events
    ]


class BoundedSeen:
    """A set that remembers at most `capacity` keys, forgetting the least recently added."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._keys: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: str) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)

    def discard(self, key: str) -> None:
        self._keys.pop(key, None)
