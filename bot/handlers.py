"""Command policy: which messages are answered, by whom, where; then parse, look up, reply.

Order of the checks for an `m.room.message` (each one that fails ends it silently unless said):
own event or any `m.notice` → not shaped like a command → older than `MAX_COMMAND_AGE_MS` →
the room (not joined, DM, or refused by scope: silent, never read) → the command room's rules
(not a DM, asker on the allow-list) → parse (an unknown `!word` gets a reply only in the command
room; a usage error always does) → already answered (in memory, or the bot's own reply in the
room log) → per-asker rate limit (one polite notice) → the command.
The first two checks and the rate limit's count are `bot.incoming`'s.

"Already answered" reads the room log, not a journal: a command whose `m.in_reply_to` already
has the bot's notice within the scanned bound is not answered twice, so a restart that gets a
command delivered again (Synapse retrying a transaction, a first `/sync`) answers it once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from bot.appservice import BoundedSeen
from bot.commands.grammar import COMMANDS, command_name, help_text, parse
from bot.commands.records import (
    Command,
    HelpCommand,
    MoreCommand,
    PinCommand,
    PinsCommand,
    SearchCommand,
    UnknownCommand,
    UnpinCommand,
    UsageError,
)
from bot.config import ServiceConfig
from bot.errors import CommandError
from bot.incoming import MAX_COMMAND_AGE_MS, Incoming, RateLimit, incoming
from bot.lookup import RoomView, fused_search, read_room
from bot.metrics import ServiceMetrics
from bot.outbox import Outbox, Pending
from bot.paging import Page, Pages, ShownIds
from bot.patterns import compile_pattern
from bot.pins import PinActions
from bot.recent import RecentEvents
from bot.replies import ReplyContent, SearchView, search_reply, text_reply
from bot.roomlog import RoomLog
from bot.sender import BotClient, txn_id_for
from bot.visibility import ANYONE, Audience, Audiences, audience_unchanged, room_audience
from ingest.errors import (
    MatrixAuthError,
    MatrixError,
    MatrixForbidden,
    MatrixUnavailable,
)
from ingest.rooms import RoomCache
from ingest.scope import puppet_in_events
from ingest.scrub import scrub
from ingest.search import Searcher
from ingest.types import Refusal, RoomID

__all__ = ["CommandHandler"]


class RoomRefused(CommandError):
    """A command's read of a room found it refused by scope (a bridge puppet in its log)."""

    def __init__(self, room_id: RoomID) -> None:
        super().__init__(f"{room_id} is not a room Muninn indexes")
        self.room_id = room_id


log = logging.getLogger("muninn.bot")

SMALL_LOG = 64  # events read to check "already answered" for replies that need no log
AUDIENCE_CHANGED = (
    "The room's members or history visibility changed while this was answered; nothing is "
    "quoted. Please ask again."
)


class CommandHandler:
    def __init__(
        self,
        cfg: ServiceConfig,
        client: BotClient,
        searcher: Searcher,
        rooms: RoomCache,
        *,
        bot_user_id: str,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.cfg = cfg
        self.client = client
        self.searcher = searcher
        self.rooms = rooms
        self.bot_user_id = bot_user_id
        self.prefix = cfg.bot.prefix
        self.server_name = cfg.homeserver.server_name
        self.command_room: RoomID | None = None
        self._limits = RateLimit(cfg.bot.rate_per_minute)
        self._audiences = Audiences()
        self._logs = RecentEvents(on_state=self._audiences.drop)
        self._handled = BoundedSeen(4096)
        self._pages = Pages()  # `!more`
        self._clock_ms = clock_ms
        self.pins = PinActions(self)
        self.metrics = metrics or ServiceMetrics()
        self.outbox = Outbox(  # replies that met an outage, sent again under their txn id
            self.client.send_message,
            on_given_up=lambda pending, why: self.metrics.replies_given_up.inc(),
        )
        self.answered = 0  # replies sent, for tests and status
        self.latencies_ms: deque[float] = deque(maxlen=256)  # event received → reply sent
        # Awaited between a reply's build and its audience re-check (tests make a join there).
        self.before_recheck: Callable[[], Awaitable[None]] | None = None

    def asker_allowed(self, user_id: str) -> bool:
        return self.rooms.scope.asker_allowed(user_id)

    def admitted(self, event_id: str) -> bool:
        """The command passed the room and asker checks (it is, or was, being answered)."""
        return event_id in self._handled

    async def handle(self, event: Mapping[str, Any]) -> None:
        msg = incoming(event, self.bot_user_id, self.prefix)
        if msg is None or msg.event_id in self._handled:
            return
        if self._clock_ms() - msg.ts > MAX_COMMAND_AGE_MS:
            log.debug("ignoring %s: older than %d ms", msg.event_id, MAX_COMMAND_AGE_MS)
            return
        in_command_room = msg.room_id == self.command_room
        if not await self._room_allowed(msg, in_command_room):
            return
        self._handled.add(msg.event_id)  # in flight: a duplicate delivery stops here
        try:
            command = parse(
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
            name = command_name(msg.body, self.prefix) or "unknown"
            self.metrics.commands.labels(command=name, outcome="usage_error").inc()
            await self._answer_small(msg, str(e))
            return
        if command is None:
            return
        await self._run(msg, command, in_command_room)

    async def _room_allowed(self, msg: Incoming, in_command_room: bool) -> bool:
        info = await self.rooms.get(msg.room_id)
        if in_command_room:
            refused = info.serves_commands
            if not refused.eligible:
                log.error(
                    "not serving the command room %s: %s (%s)",
                    msg.room_id,
                    refused.reason,
                    refused.detail,
                )
                return False
            if not self.asker_allowed(msg.sender):
                log.info("command room: %s is not on command_room_askers", msg.sender)
                return False
            return True
        reason = info.verdict.reason
        if reason is Refusal.NOT_JOINED or reason is Refusal.DM:
            return False  # never answered in, and not worth a line a message
        if reason is not None:
            log.info("not answering in %s: %s (%s)", msg.room_id, reason, info.verdict.detail)
            return False
        return True

    # ------------------------------------------------------------ sending

    async def send(self, msg: Incoming, content: ReplyContent) -> None:
        """Send a reply; one the homeserver refuses (413 M_TOO_LARGE, 400 M_BAD_JSON…) is
        followed by a short notice saying so, never by silence."""
        txn = txn_id_for(msg.room_id, msg.event_id)
        try:
            await self.client.send_message(msg.room_id, content, txn)
        except MatrixUnavailable:  # an outage: the same txn id again later (`bot.outbox`)
            self.outbox.hold(Pending(msg.room_id, content, txn, msg.ts))
            return
        except (MatrixAuthError, MatrixForbidden):
            raise  # not this reply's fault: a second send would fail the same way
        except MatrixError as e:
            log.warning("the homeserver refused the reply to %s: %s", msg.event_id, e)
            why = e.errcode or f"HTTP {e.status}"
            text = f"The homeserver refused this answer ({why}); try a narrower search."
            kind = "error" if msg.room_id == self.command_room else None
            refused = text_reply(msg.reply_to, text, results_kind=kind)
            await self.client.send_message(msg.room_id, refused, f"{txn}.refused")
        self.answered += 1
        elapsed = (time.monotonic() - msg.received) * 1000
        self.latencies_ms.append(elapsed)
        log.info("answered %s in %s in %.0f ms", msg.event_id, msg.room_id, elapsed)

    async def read_log(self, room_id: RoomID, bound: int | None = None) -> RoomLog:
        """The room's latest raw events; a bridge puppet among them refuses the room (rule 4)."""
        bound = bound or self.cfg.bot.transcript_limit
        raw, cut = await self._logs.latest(self.client, room_id, bound)
        puppet = puppet_in_events(raw, self.rooms.scope)
        if puppet is not None:
            self.rooms.mark_bridged(room_id, puppet)
            log.warning("refusing room %s: bridged, sender %s is a puppet", room_id, puppet)
            raise RoomRefused(room_id)
        return RoomLog(room_id, raw, bound, cut)

    def _limited(self, msg: Incoming) -> Literal["ok", "warn", "drop"]:
        verdict = self._limits.check(msg.sender)
        if verdict != "ok":
            log.info("rate limit: %s (%s)", msg.sender, verdict)
        return verdict

    async def may_answer(self, msg: Incoming, room_log: RoomLog) -> bool:
        """Not answered yet and within the asker's rate; sends the one rate notice itself."""
        if room_log.answered(msg.event_id, self.bot_user_id):
            log.info("%s was already answered in the room", msg.event_id)
            return False
        verdict = self._limited(msg)
        if verdict == "warn":
            per = self.cfg.bot.rate_per_minute
            text = f"You are sending commands faster than {per} a minute; try again shortly."
            await self.say(msg, text, "error")
        return verdict == "ok"

    async def say(self, msg: Incoming, text: str, kind: Literal["error", "help", "info"]) -> None:
        """A short text reply; in the command room it carries `{kind: text}` as the results,
        so a Persona always finds `org.muninn.results`."""
        text = scrub(text)  # a usage error quotes the command, which may hold a pasted token
        in_command_room = msg.room_id == self.command_room
        results_kind = kind if in_command_room else None
        # `!help` is Muninn's own text: no invisible word joiner in `from:@user` (rule 16).
        reply = text_reply(msg.reply_to, text, results_kind=results_kind, own=kind == "help")
        await self.send(msg, reply)

    async def _answer_small(
        self, msg: Incoming, text: str, kind: Literal["error", "help"] = "error"
    ) -> None:
        if await self.may_answer(msg, await self.read_log(msg.room_id, SMALL_LOG)):
            await self.say(msg, text, kind)

    # ------------------------------------------------------------ commands

    async def _run(self, msg: Incoming, command: Command, in_command_room: bool) -> None:
        name = command_name(msg.body, self.prefix) or type(command).__name__.lower()
        outcome = "failed"  # an unexpected exception propagates, counted as failed
        try:
            if isinstance(command, HelpCommand):
                await self._answer_small(msg, self._help(command, in_command_room), "help")
            elif isinstance(command, SearchCommand):
                await self._search(msg, command, in_command_room)
            elif isinstance(command, MoreCommand):
                await self._more(msg, in_command_room)
            elif isinstance(command, PinCommand | UnpinCommand):
                await self.pins.pin(msg, command)
            elif isinstance(command, PinsCommand):
                await self.pins.show(msg, command, in_command_room)
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

    def _help(self, command: HelpCommand, in_command_room: bool) -> str:
        if command.topic is None:
            return help_text(self.prefix, in_command_room)
        spec = next(s for s in COMMANDS if s.name == command.topic)
        return spec.help(self.prefix, in_command_room)

    def state_changed(self, room_id: str) -> None:
        """The dispatcher saw a state event in the room: what is kept from its state goes."""
        self._audiences.drop(room_id)

    async def audience(self, room_id: RoomID) -> Audience:
        """Who reads a reply in `room_id`, and so what log text it may quote (rule 14); the
        command room's askers may read every room (`ANYONE`: no cut). Kept per room until the
        room's state may have changed (`Audiences`): ask it after reading the room's log,
        whose read drops it on a state event the dispatcher may not have seen."""
        if room_id == self.command_room:
            return ANYONE
        return await self._audiences.get(
            room_id,
            lambda: room_audience(self.client, room_id, {self.bot_user_id}, self._audiences.memo),
        )

    async def audience_holds(self, msg: Incoming, cut: Audience | None) -> bool:
        """Just before a reply quoting under `cut` is sent: no member or visibility event since
        the audience was read changed who reads it, else the reply is withheld with a notice
        (rule 14; a join during a search must not read what came before it)."""
        if self.before_recheck is not None:
            await self.before_recheck()
        if cut is None or not cut.basis:
            return True  # the command room (`ANYONE`): no audience was read
        if await audience_unchanged(self.client, msg.room_id, cut):
            return True
        self._audiences.drop(msg.room_id)
        if await self.audience(RoomID(msg.room_id)) == cut:
            return True  # a rename, or a change that moves no cut
        await self.say(msg, AUDIENCE_CHANGED, "error")
        return False

    async def resolve_rooms(self, rooms: tuple[str, ...]) -> list[RoomID]:
        """`in:` rooms to ids; each must be a room Muninn indexes."""
        out: list[RoomID] = []
        for room in rooms:  # the parser bounds their number
            room_id = RoomID(room) if room.startswith("!") else None
            if room_id is None:
                try:
                    room_id = await self.client.resolve_alias(room)
                except MatrixError:
                    room_id = None
            info = await self.rooms.get(room_id) if room_id else None
            if room_id is None or info is None or not info.verdict.eligible:
                raise CommandError(f"{room} is not a room Muninn indexes")
            if room_id not in out:  # an alias and the id of one room: one read, not two
                out.append(room_id)
        return out

    async def _view(self, room_id: RoomID) -> RoomView:
        """Another room's transcript, for `in:` in the command room (no visibility cut)."""
        info = await self.rooms.get(room_id)
        alias = info.state.canonical_alias if info.state else None
        return RoomView(await self.read_log(room_id), alias, ANYONE)

    async def _more(self, msg: Incoming, in_command_room: bool) -> None:
        page = self._pages.take(_page_key(msg), msg.ts)
        if page is None:
            await self._answer_small(
                msg,
                f"No search of yours to continue here (a next page is kept for 10 minutes): "
                f"search again with {self.prefix}search",
            )
            return
        await self._search(msg, page.command, in_command_room, page)

    async def _search(
        self,
        msg: Incoming,
        command: SearchCommand,
        in_command_room: bool,
        page: Page | None = None,
    ) -> None:
        read = await read_room(self.searcher, msg.room_id, self.read_log, self.audience)
        own_log, marks = read.log, read.marks
        if not await self.may_answer(msg, own_log):
            return
        # Compiled only now, past the rate limit and off the loop: a bounded pattern still
        # costs up to ~10 ms of CPU (`compile_pattern`).
        matcher = None
        if command.regex is not None:
            matcher = await asyncio.to_thread(compile_pattern, command.regex)
        if in_command_room and command.regex is not None and not command.rooms:
            # A /regex/ reads rooms' latest messages, never the index: across every room it
            # would always answer nothing, which reads as "no such message".
            raise CommandError(
                "A /regex/ searches a room's latest messages, not the index: name the room "
                "with in:#room (up to 8)."
            )
        if in_command_room:
            rooms: list[RoomID] | None = await self.resolve_rooms(command.rooms) or None
            views = [await self._view(r) for r in rooms or ()]
            cuts: dict[str, Audience] = {}
        else:
            info = await self.rooms.get(msg.room_id)
            cut = await read.audience()
            rooms = [msg.room_id]
            alias = info.state.canonical_alias if info.state else None
            views = [RoomView(own_log, alias, cut)]
            cuts = {msg.room_id: cut}
        started = time.monotonic()
        result = await fused_search(
            self.searcher,
            command,
            rooms=rooms,
            views=views,
            audiences=cuts,
            bot_user_id=self.bot_user_id,
            prefix=self.prefix,
            pattern=matcher,
            marks=marks,
            names=await self._mention_names(command, rooms),
            shown=page.shown if page else ShownIds(),
            depth=page.depth if page else 0,
        )
        shown = (page.shown if page else ShownIds()).adding(
            e for hit in result.hits for e in hit.event_ids
        )
        depth = (page.depth if page else 0) + len(result.hits)
        more = result.next_offset is not None
        self._pages.remember(_page_key(msg), command, shown, depth, msg.ts, more)
        self.metrics.search_latency.labels(source="command").observe(time.monotonic() - started)
        names: dict[str, dict[str, str]] = {}
        labels: dict[str, str] = {}
        for hit in result.hits:
            if hit.room_id not in names:
                info = await self.rooms.get(hit.room_id)
                names[hit.room_id], labels[hit.room_id] = info.names, info.label
        view = SearchView(
            result,
            command.texts,
            command.regex,
            matcher=matcher,
            scans=[v.log.scan() for v in views],
            names=names,
            room_labels=labels,
            show_rooms=in_command_room,
            results_json=in_command_room,
            command=command,
            prefix=self.prefix,
            more=result.remaining,
            first=(page.depth if page else 0) + 1,
        )
        if await self.audience_holds(msg, cuts.get(msg.room_id)):
            await self.send(msg, search_reply(msg.reply_to, view))

    async def _mention_names(
        self, command: SearchCommand, rooms: list[RoomID] | None
    ) -> dict[str, tuple[str, ...]]:
        """The display names of the users `mentions:` asks for, in the rooms searched: how
        a client without `m.mentions` writes a mention."""
        found: dict[str, set[str]] = {}
        if not command.filter.mentions:
            return {}
        for room_id in rooms or ():
            names = (await self.rooms.get(room_id)).names
            for user in command.filter.mentions:
                if user in names:
                    found.setdefault(user, set()).add(names[user])
        return {user: tuple(sorted(n)) for user, n in found.items()}


def _page_key(msg: Incoming) -> tuple[str, str, str | None]:
    """Whose `!more` continues which search: the asker's, in this room, in this thread."""
    return (msg.sender, msg.room_id, msg.reply_to.thread_root)
