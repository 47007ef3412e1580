"""The fast tier's kit: the real command handler in this process, no homeserver.

`FastBot` wires a real `bot.chat.handlers.CommandHandler` with in-memory parts of the homeserver
(`bot.chat.ports.HomeserverParts`) that hold data, not the behaviour under test:

- `MemoryRooms`: each room's log, a list of typed events (`Event`, mautrix's content types and
  event types) served newest first as `/messages?dir=b` serves them; the current state is the
  latest state event of each key, and `room_state` is the product's own parser over it
  (`ingest.matrix.state.room_state_from`), so the room verdicts are the real `RoomCache` over
  the real `RoomScope`;
- `RecordingSender`: keeps every reply, puts it in the room's log as the homeserver would (so
  "already answered" reads it there), repeats a transaction id as the homeserver does (once),
  and can refuse a reply as the homeserver does (`refuse`);
- the real `Searcher` over a real edge store in a temp dir with the session's MiniLM (empty
  unless a test writes to it: a fresh message is found by the transcript fold of the log).

The command policy (admission, rate limit, parsing, replies, the reply budget) runs as in
`muninn run`; `FastBot.ask` reads the event as the service does on receipt
(`bot.chat.commands.incoming.incoming`), hands the handler the command and returns the replies
it sent.
What a test needs of the handler is built into it (`serve_command_room`, `before_recheck`):
the product has no test hooks.
Tests of what the homeserver does (delivery, membership, visibility as Synapse serves it) stay
against the real Synapse (the `synapse` marker).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mautrix.types import (
    EventType,
    JoinRule,
    JoinRulesStateEventContent,
    Membership,
    MemberStateEventContent,
    MessageType,
    SerializableAttrs,
    TextMessageEventContent,
)

from bot.chat.commands.incoming import incoming
from bot.chat.handlers import CommandHandler
from bot.chat.ports import HomeserverParts
from bot.config import ServiceConfig, parse_config
from bot.demo.client import reply_content
from bot.service import wiring
from ingest.errors import MatrixError, MatrixForbidden
from ingest.matrix import room_state_from
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import RoomScope
from ingest.search import Searcher
from ingest.store import Store, open_store
from ingest.types import EventID, RoomAlias, RoomID, RoomState, UserID
from tests.botkit import before_recheck
from tests.indexing import shared_embedder

__all__ = ["BOT", "SERVER", "Event", "FastBot", "MemoryRooms", "RecordingSender", "fast_bot"]

SERVER = "muninn.test"
BOT = UserID(f"@muninn:{SERVER}")
JSONDict = dict[str, Any]

_ids = itertools.count(1)


@dataclass(frozen=True)
class Event:
    """One event of a room's log; `raw` is its JSON as the client-server API serves it."""

    event_id: str
    type: EventType
    sender: str
    ts: int
    content: SerializableAttrs | Mapping[str, Any]
    state_key: str | None = None
    replaces_state: str | None = None  # the state event this one replaced
    redacted: bool = False
    redacted_ts: int | None = None  # when the redaction was sent
    redacts: str | None = None  # an `m.room.redaction`'s target

    def raw(self, room_id: RoomID) -> JSONDict:
        attrs = isinstance(self.content, SerializableAttrs)
        content = self.content.serialize() if attrs else dict(self.content)
        event: JSONDict = {
            "event_id": self.event_id,
            "room_id": room_id,
            "type": self.type.t,
            "sender": self.sender,
            "origin_server_ts": self.ts,
            "content": {} if self.redacted else content,
            "unsigned": {},
        }
        if self.state_key is not None:
            event["state_key"] = self.state_key
        if self.replaces_state is not None:
            event["unsigned"]["replaces_state"] = self.replaces_state
        if self.redacted:
            because = {"redacted": True, "origin_server_ts": self.redacted_ts}
            event["unsigned"]["redacted_because"] = because
        if self.redacts is not None:
            event["redacts"] = self.redacts
        return event


def text(body: str, thread: str | None = None) -> JSONDict:
    """An `m.text` message's content, in `thread` (its reply the thread's fallback)."""
    content = TextMessageEventContent(msgtype=MessageType.TEXT, body=body)
    if thread is not None:
        content.set_thread_parent(thread)
    return dict(content.serialize())


class MemoryRooms:
    """Rooms held in memory: their logs and state, as the bot's parts read them."""

    def __init__(self, bot: str = BOT) -> None:
        self.bot = bot
        self.logs: dict[RoomID, list[Event]] = {}  # oldest first
        self.aliases: dict[str, RoomID] = {}
        self.direct: set[RoomID] = set()
        self.reads: list[RoomID] = []  # every log read (`latest`, `newer_than`), in order
        self._last_ts = 0

    # ------------------------------------------------------------ building rooms

    def _ts(self) -> int:
        self._last_ts = max(self._last_ts + 1, int(time.time() * 1000))
        return self._last_ts

    def add(
        self,
        room_id: RoomID,
        type: EventType,
        sender: str,
        content: SerializableAttrs | Mapping[str, Any],
        state_key: str | None = None,
    ) -> str:
        event_id = f"$e{next(_ids)}:{SERVER}"
        replaces = None
        if state_key is not None:
            replaces = next(
                (
                    e.event_id
                    for e in reversed(self.logs[room_id])
                    if e.type == type and e.state_key == state_key
                ),
                None,
            )
        event = Event(event_id, type, sender, self._ts(), content, state_key, replaces)
        self.logs.setdefault(room_id, []).append(event)
        return event_id

    def create_room(
        self,
        owner: str,
        *,
        members: Sequence[str] = (),
        bot_joined: bool = True,
        alias: str | None = None,
        visibility: str = "shared",
        join_rule: JoinRule = JoinRule.PUBLIC,
    ) -> RoomID:
        """A room `owner` made, `members` and (unless not `bot_joined`) the bot joined."""
        room_id = RoomID(f"!r{next(_ids)}:{SERVER}")
        self.logs[room_id] = []
        self.add(room_id, EventType.ROOM_CREATE, owner, {"room_version": "10"}, "")
        self.join(room_id, owner)
        self.add(
            room_id, EventType.ROOM_JOIN_RULES, owner, JoinRulesStateEventContent(join_rule), ""
        )
        self.set_visibility(room_id, owner, visibility)
        if alias is not None:
            full = alias if ":" in alias else f"{alias}:{SERVER}"
            self.aliases[full] = room_id
            self.add(room_id, EventType.ROOM_CANONICAL_ALIAS, owner, {"alias": full}, "")
        for member in members:
            self.join(room_id, member)
        if bot_joined:
            self.join(room_id, self.bot)
        return room_id

    def join(self, room_id: RoomID, user: str, displayname: str | None = None) -> str:
        content = MemberStateEventContent(membership=Membership.JOIN, displayname=displayname)
        return self.add(room_id, EventType.ROOM_MEMBER, user, content, user)

    def set_visibility(self, room_id: RoomID, sender: str, visibility: str) -> str:
        content = {"history_visibility": visibility}
        return self.add(room_id, EventType.ROOM_HISTORY_VISIBILITY, sender, content, "")

    def say(
        self,
        room_id: RoomID,
        sender: str,
        body: str,
        *,
        reply_to: str | None = None,
        thread: str | None = None,
    ) -> str:
        """An `m.text` message in the room's log: in `thread`, or a rich reply to `reply_to`
        with the spec's fallbacks (as the demo's clients send one)."""
        if reply_to is not None and thread is None:
            content = reply_content(room_id, self.event(room_id, reply_to), body)
        else:
            content = text(body, thread)
        return self.add(room_id, EventType.ROOM_MESSAGE, sender, content)

    def redact(self, room_id: RoomID, event_id: str, sender: str) -> str:
        """The event's content goes (the log serves it redacted) and a redaction follows."""
        log = self.logs[room_id]
        index = next(i for i, e in enumerate(log) if e.event_id == event_id)
        redaction = self.add(room_id, EventType.ROOM_REDACTION, sender, {"redacts": event_id})
        log[index] = dataclasses.replace(log[index], redacted=True, redacted_ts=log[-1].ts)
        log[-1] = dataclasses.replace(log[-1], redacts=event_id)
        return redaction

    def event(self, room_id: RoomID, event_id: str) -> JSONDict:
        return next(e.raw(room_id) for e in self.logs[room_id] if e.event_id == event_id)

    def _joined(self, room_id: RoomID | str) -> list[Event]:
        log = self.logs.get(RoomID(room_id))
        if log is None or self._membership(log, self.bot) != "join":
            raise MatrixForbidden(f"{self.bot} is not in {room_id}", status=403)
        return log

    @staticmethod
    def _membership(log: Sequence[Event], user: str) -> str | None:
        member = EventType.ROOM_MEMBER
        found = [e for e in log if e.type == member and e.state_key == user]
        return found[-1].raw(RoomID("")).get("content", {}).get("membership") if found else None

    # ------------------------------------------------------------ RoomLogSource

    async def latest(self, room_id: RoomID, limit: int) -> list[JSONDict]:
        self.reads.append(room_id)
        log = self._joined(room_id)
        return [e.raw(room_id) for e in reversed(log[-limit:])]

    async def newer_than(
        self, room_id: RoomID, known: Set[str], limit: int
    ) -> tuple[list[JSONDict], bool]:
        self.reads.append(room_id)
        out: list[JSONDict] = []
        for e in reversed(self._joined(room_id)):
            if e.event_id in known:
                return out, True
            if len(out) == limit:
                return out, False
            out.append(e.raw(room_id))
        return out, True

    # ------------------------------------------------------------ RoomStates, Aliases

    async def state_events(self, room_id: RoomID | str) -> list[JSONDict]:
        current: dict[tuple[str, str], Event] = {}
        for e in self._joined(room_id):
            if e.state_key is not None:
                current[(e.type.t, e.state_key)] = e
        return [e.raw(RoomID(room_id)) for e in current.values()]

    async def get_event(self, room_id: RoomID | str, event_id: str) -> JSONDict | None:
        log = self._joined(room_id)
        return next((e.raw(RoomID(room_id)) for e in log if e.event_id == event_id), None)

    async def resolve_alias(self, alias: RoomAlias | str) -> RoomID | None:
        return self.aliases.get(alias if ":" in alias else f"{alias}:{SERVER}")

    # ------------------------------------------------------------ StateSource (RoomCache)

    @property
    def user_id(self) -> str:
        return self.bot

    async def room_state(self, room_id: RoomID | str) -> RoomState:
        return room_state_from(RoomID(room_id), await self.state_events(room_id), UserID(self.bot))

    async def direct_rooms(self) -> set[RoomID]:
        return set(self.direct)


@dataclass
class Sent:
    room_id: str
    content: Mapping[str, Any]
    txn_id: str
    event_id: str


class RecordingSender:
    """The bot's one write: every reply kept (`sent`) and put in the room's log; a transaction
    id sent again posts nothing new (as the homeserver deduplicates it). `refuse(content)` may
    return the `MatrixError` the homeserver would answer instead (413, 502…)."""

    def __init__(self, rooms: MemoryRooms) -> None:
        self._rooms = rooms
        self.sent: list[Sent] = []
        self.refuse: Callable[[Mapping[str, Any]], MatrixError | None] | None = None

    async def send_message(
        self,
        room_id: RoomID | str,
        content: Mapping[str, Any],
        txn_id: str,
        *,
        attempts: int | None = None,
    ) -> EventID:
        refused = self.refuse(content) if self.refuse is not None else None
        if refused is not None:
            raise refused
        done = next((s for s in self.sent if s.txn_id == txn_id), None)
        if done is not None:
            return EventID(done.event_id)
        room = RoomID(room_id)
        event_id = self._rooms.add(room, EventType.ROOM_MESSAGE, self._rooms.bot, content)
        self.sent.append(Sent(room, content, txn_id, event_id))
        return EventID(event_id)


def _in_reply_to(content: Mapping[str, Any]) -> str | None:
    rel = content.get("m.relates_to")
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


@dataclass
class FastBot:
    """The handler and its parts; `close()` closes the store (the `fast` fixture does)."""

    rooms: MemoryRooms
    sender: RecordingSender
    verdicts: RoomCache
    handler: CommandHandler
    cfg: ServiceConfig
    store: Store
    searcher: Searcher
    asked: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.store.close()

    def serve_command_room(self, room_id: RoomID) -> None:
        """A new handler over the same rooms and store, with `room_id` its command room (as
        `muninn run` resolves `bot.command_room` before it builds the handler)."""
        self.handler = _handler(
            self.cfg, self.rooms, self.sender, self.verdicts, self.searcher, room_id
        )

    def before_recheck(self, act: Callable[[], Awaitable[None]]) -> None:
        """`act` runs between a reply's build and its audience re-check."""
        replier = self.handler.replier
        replier.withheld = before_recheck(replier, act)  # type: ignore[method-assign]

    async def ask(
        self, room_id: RoomID, sender: str, body: str, **relation: str | None
    ) -> list[Mapping[str, Any]]:
        """Say `body` in the room and hand it to the handler as the dispatcher would; the
        replies it sent to it (none: it stayed silent)."""
        event_id = self.rooms.say(room_id, sender, body, **relation)
        await self.handle(room_id, event_id)
        return self.replies(event_id)

    async def handle(self, room_id: RoomID, event_id: str) -> None:
        self.asked.append(event_id)
        await self.handle_event(self.rooms.event(room_id, event_id))

    async def handle_event(self, event: JSONDict) -> None:
        """The event read as the service reads it on receipt; a command goes to the handler."""
        msg = incoming(event, self.handler.bot_user_id, self.handler.prefix)
        if msg is not None:
            await self.handler.handle(msg)

    def replies(self, event_id: str) -> list[Mapping[str, Any]]:
        return [s.content for s in self.sent_to(event_id)]

    def sent_to(self, event_id: str) -> list[Sent]:
        return [s for s in self.sender.sent if _in_reply_to(s.content) == event_id]

    async def reply(
        self, room_id: RoomID, sender: str, body: str, **relation: str | None
    ) -> Mapping[str, Any]:
        """The one reply to a command."""
        found = await self.ask(room_id, sender, body, **relation)
        assert len(found) == 1, found
        return found[0]


def fast_config(tmp: Path, scope: Mapping[str, Any] | None = None, **bot: Any) -> ServiceConfig:
    doc = {
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": SERVER},
        "reader": {"user_id": BOT, "access_token": "unused"},
        "index": {"store": {"path": str(tmp / "qdrant")}, "collection": "muninn_fast"},
        "bot": {"transcript_limit": 50, "rate_per_minute": 1000, **bot},
        "scope": dict(scope or {}),
    }
    return parse_config(doc, tmp)


def fast_bot(
    tmp: Path,
    *,
    command_room: RoomID | None = None,
    scope: Mapping[str, Any] | None = None,
    **bot: Any,
) -> FastBot:
    """A command handler over fresh in-memory rooms; `bot` settings over the kit's defaults
    (`command_room_askers`, `rate_per_minute`, `prefix`…), `scope` the config's section."""
    cfg = fast_config(tmp, scope, **bot)
    rooms = MemoryRooms()
    sender = RecordingSender(rooms)
    scope = RoomScope.from_config(cfg.scope, SERVER)
    verdicts = RoomCache(rooms, scope)
    store = open_store(cfg.index, cfg.base_dir)
    searcher = wiring.searcher(cfg, store, shared_embedder(), live_check=None)
    handler = _handler(cfg, rooms, sender, verdicts, searcher, command_room)
    return FastBot(rooms, sender, verdicts, handler, cfg, store, searcher)


def _handler(
    cfg: ServiceConfig,
    rooms: MemoryRooms,
    sender: RecordingSender,
    verdicts: RoomCache,
    searcher: Searcher,
    command_room: RoomID | None,
) -> CommandHandler:
    parts = HomeserverParts(log=rooms, states=rooms, aliases=rooms, sender=sender)
    return CommandHandler(
        cfg, parts, searcher, verdicts, bot_user_id=BOT, command_room=command_room
    )
