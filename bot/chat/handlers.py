"""Command policy: which messages are answered, by whom, where; then parse, look up, reply.

Order of the checks for an `m.room.message` (each one that fails ends it silently unless said):
own event or any `m.notice` → not shaped like a command → older than `MAX_COMMAND_AGE_MS` →
the room (not joined, DM, or refused by scope: silent, never read) → the command room's rules
(not a DM, asker on the allow-list) → parse (an unknown `!word` gets a reply only in the command
room; a usage error always does) → already answered (in memory, or the bot's own reply in the
room log) → per-asker rate limit (one polite notice) → the command.
The first two checks and the rate limit's count are `bot.chat.commands.incoming`'s.

A homeserver read that fails past the request layer's retries (a 5xx, an answer of the wrong
shape, a pagination that would not end) once the command is admitted is answered with
`HOMESERVER_FAILED`, never silence; a failed read of the room's own state before admission
stays silent (the room may not be answered: a DM, a refused room).

"Already answered" reads the room log, not a journal: a command whose `m.in_reply_to` already
has the bot's notice within the scanned bound is not answered twice, so a restart that gets a
command delivered again (Synapse retrying a transaction, a first `/sync`) answers it once.

Each command's handler is bound to the declaration that parses and documents it (`Bound`, the
table in `CommandHandler.__init__`), as maubot's `@command.new` binds one to its declaration:
the declaration that read a message picks the handler that answers it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from bot.chat.command_alias import NOT_RESOLVED, CommandRoomAlias
from bot.chat.command_room import CommandRoomPolicy, CommandRoomVerdict, RefusalsTold
from bot.chat.commands.grammar import (
    COMMANDS,
    HELP,
    MORE,
    PIN,
    PINS,
    SEARCH,
    UNPIN,
    Parsed,
    help_text,
    parse_command,
)
from bot.chat.commands.incoming import MAX_COMMAND_AGE_MS, BoundedSeen, Incoming
from bot.chat.commands.records import (
    Command,
    HelpCommand,
    MoreCommand,
    PinCommand,
    UnknownCommand,
    UnpinCommand,
    UsageError,
)
from bot.chat.commands.spec import CommandSpec
from bot.chat.metrics import ChatMetrics
from bot.chat.pins import BoardReader, PinActions
from bot.chat.ports import HomeserverParts
from bot.chat.reads import LogReader, RoomRefused
from bot.chat.replying import Replier, answer_small
from bot.chat.searching import SearchActions, tombstones
from bot.chat.visibility import Audiences
from bot.config import ServiceConfig
from bot.errors import CommandError
from ingest.errors import MatrixAuthError, MatrixError, MatrixForbidden
from ingest.matrix.rooms import RoomCache
from ingest.search import Searcher
from ingest.search.logs.recent import RecentEvents
from ingest.types import Refusal, RoomID

__all__ = ["HOMESERVER_FAILED", "Bound", "CommandHandler"]

HOMESERVER_FAILED = (
    "The homeserver failed to answer a read this needs ({why}); nothing is shown. Please ask "
    "again shortly."
)


log = logging.getLogger("muninn.chat")

# Seconds a command in a room that may be the command room waits for its alias to resolve,
# while it is not resolved yet (`CommandRoomAlias.now`), before it is told so
RESOLVE_WAIT = 2.0

C = TypeVar("C", bound=Command)


@dataclass(frozen=True)
class Bound(Generic[C]):
    """A command's declaration and the handler that answers it: `run(msg, command,
    in_command_room)` takes the record the declaration's builder returns (mypy checks it)."""

    spec: CommandSpec[C]
    run: Callable[[Incoming, C, bool], Awaitable[None]]


def bind(*bound: Bound[Any]) -> dict[str, Bound[Any]]:
    """The handlers by their command's name; every declared command has exactly one."""
    table = {b.spec.name: b for b in bound}
    declared = [spec.name for spec in COMMANDS]
    if len(table) != len(bound) or sorted(table) != sorted(declared):
        raise ValueError(f"bind each of {declared} once, not {[b.spec.name for b in bound]}")
    return table


class CommandHandler:
    def __init__(
        self,
        cfg: ServiceConfig,
        homeserver: HomeserverParts,
        searcher: Searcher,
        rooms: RoomCache,
        *,
        bot_user_id: str,
        command_room: RoomID | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        metrics: ChatMetrics | None = None,
    ) -> None:
        self.rooms = rooms
        self.bot_user_id = bot_user_id
        self.command_policy = CommandRoomPolicy.of(cfg.bot.command_room_askers, bot_user_id)
        self.prefix = cfg.bot.prefix
        self.server_name = cfg.homeserver.server_name
        self.metrics = metrics or ChatMetrics()
        self._audiences = Audiences()
        self._handled = BoundedSeen(4096)
        self._told = RefusalsTold()  # why the command room is not served, told its askers
        self._clock_ms = clock_ms
        # The parts the commands share, each given only what it uses (no handler inside).
        hs = homeserver
        self.reads = LogReader(  # the one reader of a room's log
            hs.log,
            hs.aliases,
            rooms,
            cfg.bot.transcript_limit,
            purges=functools.partial(tombstones, searcher),
            logs=RecentEvents(),
            on_state=self._audiences.drop,
        )
        self.replier = Replier(
            hs.sender,
            hs.states,
            self._audiences,
            self.metrics,
            bot_user_id=bot_user_id,
            command_room=command_room,
            rate_per_minute=cfg.bot.rate_per_minute,
            command_room_now=self._command_room_now,
        )
        # `bot.command_room`'s alias, until resolved (its retries run in `muninn run`)
        self.command_alias = CommandRoomAlias(
            cfg.bot.command_room,
            hs.aliases,
            self.server_name,
            resolved=command_room,
            on_resolved=self._command_room_resolved,
        )
        boards = BoardReader(hs.states.get_event, bot_user_id, self.prefix, self.server_name)
        self.pins = PinActions(self.reads, self.replier, rooms, boards)
        self.searching = SearchActions(
            searcher,
            self.reads,
            self.replier,
            rooms,
            self.metrics,
            bot_user_id=bot_user_id,
            prefix=self.prefix,
            server_name=self.server_name,
        )
        self.read_log = self.reads.read_log
        self.say = self.replier.say
        self.outbox = self.replier.outbox
        self.latencies_ms = self.replier.latencies_ms
        # Each declared command, bound to what answers it.
        self._bound = bind(
            Bound(SEARCH, self.searching.search),
            Bound(MORE, self._more),
            Bound(PIN, self._pin),
            Bound(UNPIN, self._pin),
            Bound(PINS, self.pins.show),
            Bound(HELP, self._help),
        )

    @property
    def command_room(self) -> RoomID | None:
        """The room answered under the command room's rules; the replier's, whose replies
        there carry results and read every room."""
        return self.replier.command_room

    def asker_allowed(self, user_id: str) -> bool:
        return self.command_policy.asker_allowed(user_id)

    def admitted(self, event_id: str) -> bool:
        """The command passed the room and asker checks (it is, or was, being answered)."""
        return event_id in self._handled

    async def handle(self, msg: Incoming) -> None:
        """Answer a command candidate as read on receipt
        (`bot.chat.commands.incoming.received`)."""
        if msg.event_id in self._handled:
            return
        if self._clock_ms() - msg.ts > MAX_COMMAND_AGE_MS:
            log.debug("ignoring %s: older than %d ms", msg.event_id, MAX_COMMAND_AGE_MS)
            return
        in_command_room = msg.room_id == self.command_room
        if not in_command_room and self.command_alias.pending:
            if await self._unresolved(msg):
                return
            in_command_room = msg.room_id == self.command_room
        if not await self._room_allowed(msg, in_command_room):
            return
        self._handled.add(msg.event_id)  # in flight: a duplicate delivery stops here
        with self._refusals():
            try:
                await self._parse_and_run(msg, in_command_room)
            except (MatrixAuthError, MatrixForbidden):
                raise  # not this command's fault: a reply would fail the same way
            except MatrixError as e:  # a read failed past its retries: say so, never silence
                log.warning("command %s: a homeserver read failed: %s", msg.event_id, e)
                why = e.errcode or (f"HTTP {e.status}" if e.status else type(e).__name__)
                await self.say(msg, HOMESERVER_FAILED.format(why=why), "error")

    async def _parse_and_run(self, msg: Incoming, in_command_room: bool) -> None:
        try:
            parsed = parse_command(
                msg.body,
                prefix=self.prefix,
                now_ms=msg.ts,
                in_command_room=in_command_room,
                server_name=self.server_name,
            )
        except UnknownCommand as e:
            self.metrics.commands.labels(command="unknown", outcome="unknown").inc()
            if in_command_room or e.suggestion is not None:  # a typo of ours: say so
                await self._answer_small(msg, str(e))
            return
        except UsageError as e:
            name = e.command or "unknown"
            self.metrics.commands.labels(command=name, outcome="usage_error").inc()
            await self._answer_small(msg, str(e))
            return
        if parsed is None:
            return
        await self._run(msg, parsed, in_command_room)

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        """A command's read met a bridge puppet (`RoomRefused`, rule 4): the room verdicts
        remember it, before the refusal is answered (`_run`) or propagates."""
        try:
            yield
        except RoomRefused as e:
            self.rooms.mark_bridged(e.room_id, e.puppet)
            raise

    async def _room_allowed(self, msg: Incoming, in_command_room: bool) -> bool:
        info = await self.rooms.get(msg.room_id)
        if in_command_room:
            refused = self.command_policy.serves_room(info)
            if not refused.eligible:
                log.error(
                    "not serving the command room %s: %s (%s)",
                    msg.room_id,
                    refused.reason,
                    refused.detail,
                )
            if not self.asker_allowed(msg.sender):
                log.info("command room: %s is not on command_room_askers", msg.sender)
                return False  # silence: only an allowed asker is told why it is not served
            if self._told.first(refused):
                await self._tell_refused(msg, refused)
            return refused.eligible
        reason = info.verdict.reason
        if reason is Refusal.NOT_JOINED or reason is Refusal.DM:
            return False  # never answered in, and not worth a line a message
        if reason is not None:
            log.info("not answering in %s: %s (%s)", msg.room_id, reason, info.verdict.detail)
            return False
        return True

    async def _tell_refused(self, msg: Incoming, refused: CommandRoomVerdict) -> None:
        """An allowed asker meets the refused command room: why and the fix, once a cause
        (`RefusalsTold`); the notice quotes no room, so it needs no audience check."""
        try:
            with self._refusals():
                await self._answer_small(msg, refused.notice)
        except (MatrixError, RoomRefused) as e:
            self._told.forget(refused)  # tell it on the next command
            log.warning("could not tell %s why the command room is not served: %s", msg.sender, e)

    async def _unresolved(self, msg: Incoming) -> bool:
        """While `bot.command_room`'s alias is not resolved (rule 14): a command in a room that
        may be the command room (its state names the alias, or the command room's policy would
        serve it) has the alias tried at once; still unresolved, an allowed asker is told so,
        never answered as in an ordinary room. True: answered (or silent) here."""
        info = await self.rooms.get(msg.room_id)
        if not (
            self.command_alias.may_be(info.state) or self.command_policy.serves_room(info).eligible
        ):
            return False  # an ordinary room
        if await self.command_alias.now(RESOLVE_WAIT) is not None:
            return False  # resolved: the room is answered by the rules of what it is
        if self.asker_allowed(msg.sender):
            self._handled.add(msg.event_id)  # admitted: a duplicate delivery stops here
            why = self.command_alias.error or "it has not been tried yet"
            await self._answer_small(msg, NOT_RESOLVED.format(why=why))
        return True

    def _command_room_resolved(self, room_id: RoomID) -> None:
        """The alias resolved: replies there carry results, and it is answered as the command
        room from the next command on, and its verdicts leave it out of the index by its id
        too (an alias its state does not list still names it)."""
        self.replier.command_room = room_id
        self.rooms.scope = self.rooms.scope.with_command_room_id(room_id)

    async def _command_room_now(self, room_id: RoomID) -> CommandRoomVerdict:
        return self.command_policy.serves_room(await self.rooms.fresh(room_id))

    async def _answer_small(
        self, msg: Incoming, text: str, kind: Literal["error", "help"] = "error"
    ) -> None:
        await answer_small(self.reads, self.replier, msg, text, kind)

    # ------------------------------------------------------------ commands

    async def _run(self, msg: Incoming, parsed: Parsed, in_command_room: bool) -> None:
        name = parsed.spec.name
        outcome = "failed"  # an unexpected exception propagates, counted as failed
        try:
            with self._refusals():
                await self._bound[name].run(msg, parsed.command, in_command_room)
            outcome = "ok"
        except RoomRefused as e:  # silent in the refused room; the command room is told
            outcome = "refused"
            if in_command_room and e.room_id != msg.room_id:
                await self.say(msg, str(e), "error")
        except CommandError as e:  # only a CommandError's own text ever reaches a room
            outcome = "error"
            await self.say(msg, str(e), "error")
        finally:
            self.metrics.commands.labels(command=name, outcome=outcome).inc()

    async def _help(self, msg: Incoming, command: HelpCommand, in_command_room: bool) -> None:
        if command.topic is None:
            text = help_text(self.prefix, in_command_room)
        else:
            text = self._bound[command.topic].spec.help(self.prefix, in_command_room)
        await self._answer_small(msg, text, "help")

    async def _more(self, msg: Incoming, command: MoreCommand, in_command_room: bool) -> None:
        await self.searching.more(msg, in_command_room)

    async def _pin(
        self, msg: Incoming, command: PinCommand | UnpinCommand, in_command_room: bool
    ) -> None:
        await self.pins.pin(msg, command)

    def state_changed(self, room_id: str) -> None:
        """The dispatcher saw a state event in the room: what is kept from its state goes."""
        self._audiences.drop(room_id)
