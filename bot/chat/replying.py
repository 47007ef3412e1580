"""How a command's reply goes out: "already answered" and the asker's rate, who reads the room
(rule 14) and its re-check just before every send of a reply that quotes the log
(`send_quoting`: the first `PUT` and each repeat after an outage), the send itself (a refused
reply is followed by a notice; one that met an outage waits in the `Outbox`).

A part of the command handler (`bot.chat.handlers`) that the commands share (`bot.chat.pins`,
`bot.chat.searching`); the order of the checks is the handler's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Literal

from bot.chat.command_room import CommandRoomVerdict
from bot.chat.commands.incoming import Incoming, RateLimit
from bot.chat.content import ReplyContent
from bot.chat.metrics import ChatMetrics
from bot.chat.outbox import Outbox, Pending
from bot.chat.ports import RoomStates, Sender
from bot.chat.reads import LogReader
from bot.chat.replies import text_reply
from bot.chat.sender import txn_id_for
from bot.chat.visibility import ANYONE, Audience, Audiences, audience_unchanged, room_audience
from ingest.errors import (
    MatrixAuthError,
    MatrixError,
    MatrixForbidden,
    MatrixUnavailable,
    failure_retrieved,
)
from ingest.matrix import ClientEvent
from ingest.rules.scrub import scrub
from ingest.search.logs.roomlog import RoomLog
from ingest.types import RoomID

__all__ = [
    "AUDIENCE_CHANGED",
    "COMMAND_ROOM_CHANGED",
    "SMALL_LOG",
    "FreshStates",
    "Replier",
    "answer_small",
]

log = logging.getLogger("muninn.chat")

AUDIENCE_CHANGED = (
    "The room's members or history visibility changed while this was answered; nothing is "
    "quoted. Please ask again."
)
COMMAND_ROOM_CHANGED = (
    "This room is no longer one only the allowed askers and Muninn can read (see the log or "
    "`muninn status`); the answer is withheld."
)


class Replier:
    def __init__(
        self,
        sender: Sender,
        states: RoomStates,
        audiences: Audiences,
        metrics: ChatMetrics,
        *,
        bot_user_id: str,
        command_room: RoomID | None,
        rate_per_minute: int,
        command_room_now: Callable[[RoomID], Awaitable[CommandRoomVerdict]],
    ) -> None:
        """`command_room_now`: whether the command room is served, read from the homeserver
        now (not from a cache), asked just before a reply there is sent."""
        self._sender = sender
        self._states = states
        self._fresh = FreshStates(states)  # the check before a send: shared, begun after it
        self._audiences = audiences
        self._bot_user_id = bot_user_id
        self.command_room = command_room
        self._rate_per_minute = rate_per_minute
        self._command_room_now = command_room_now
        self._limits = RateLimit(rate_per_minute)
        self.outbox = Outbox(  # replies that met an outage, sent again under their txn id
            # one PUT a repeat: the outbox is the retry loop, and a quoting reply's audience is
            # checked before each repeat, not before a queue of the request layer's own
            lambda room_id, content, txn: sender.send_message(room_id, content, txn, attempts=1),
            on_given_up=lambda pending, why: metrics.replies_given_up.inc(),
        )
        self.answered = 0  # replies sent, for tests and status
        self.latencies_ms: deque[float] = deque(maxlen=256)  # event received → reply sent

    async def send_quoting(
        self, msg: Incoming, content: ReplyContent, cut: Audience | None
    ) -> bool:
        """Send a reply that quotes the log read under `cut`: the audience is checked just
        before the `PUT`, and again before every repeat if an outage holds it (rule 14). The
        `PUT` is tried once, not behind the request layer's retries, so no queue stands
        between the check and the homeserver but the request itself. A reply that no longer
        holds is replaced by a short "ask again" notice. False: withheld."""

        async def instead() -> ReplyContent | None:
            why = await self.withheld(msg, cut)
            return None if why is None else self._text(msg, why, "error")

        notice = await instead()
        await self.send(msg, notice or content, instead=None if notice else instead)
        return notice is None

    async def send(
        self,
        msg: Incoming,
        content: ReplyContent,
        *,
        instead: Callable[[], Awaitable[ReplyContent | None]] | None = None,
    ) -> None:
        """Send a reply; one the homeserver refuses (413 M_TOO_LARGE, 400 M_BAD_JSON…) is
        followed by a short notice saying so, never by silence. `instead`: the audience check
        a quoting reply passed just now, run again before each repeat (`send_quoting`)."""
        txn = txn_id_for(msg.room_id, msg.event_id)
        try:
            once = None if instead is None else 1
            await self._sender.send_message(msg.room_id, content, txn, attempts=once)
        except MatrixUnavailable:  # an outage: the same txn id again later (`bot.chat.outbox`)
            self.outbox.hold(Pending(msg.room_id, content, txn, msg.ts, instead))
            return
        except (MatrixAuthError, MatrixForbidden):
            raise  # not this reply's fault: a second send would fail the same way
        except MatrixError as e:
            log.warning("the homeserver refused the reply to %s: %s", msg.event_id, e)
            why = e.errcode or f"HTTP {e.status}"
            text = f"The homeserver refused this answer ({why}); try a narrower search."
            kind = "error" if msg.room_id == self.command_room else None
            refused = text_reply(msg.reply_to, text, results_kind=kind)
            await self._sender.send_message(msg.room_id, refused, f"{txn}.refused")
        self.answered += 1
        elapsed = (time.monotonic() - msg.received) * 1000
        self.latencies_ms.append(elapsed)
        log.info("answered %s in %s in %.0f ms", msg.event_id, msg.room_id, elapsed)

    async def say(self, msg: Incoming, text: str, kind: Literal["error", "help", "info"]) -> None:
        """A short text reply; in the command room it carries `{kind: text}` as the results,
        so a Persona always finds `org.muninn.results`."""
        await self.send(msg, self._text(msg, text, kind))

    def _text(
        self, msg: Incoming, text: str, kind: Literal["error", "help", "info"]
    ) -> ReplyContent:
        text = scrub(text)  # a usage error quotes the command, which may hold a pasted token
        results_kind = kind if msg.room_id == self.command_room else None
        # `!help` is Muninn's own text: no invisible word joiner in `from:@user` (rule 16).
        return text_reply(msg.reply_to, text, results_kind=results_kind, own=kind == "help")

    def _limited(self, msg: Incoming) -> Literal["ok", "warn", "drop"]:
        verdict = self._limits.check(msg.sender)
        if verdict != "ok":
            log.info("rate limit: %s (%s)", msg.sender, verdict)
        return verdict

    def within_rate(self, msg: Incoming) -> bool:
        """Whether the asker's rate would let this command through now (`may_answer` counts
        it): work begun before the log read is begun for no command the rate drops."""
        return self._limits.within(msg.sender)

    async def may_answer(self, msg: Incoming, room_log: RoomLog) -> bool:
        """Not answered yet and within the asker's rate; sends the one rate notice itself."""
        if room_log.answered(msg.event_id, self._bot_user_id):
            log.info("%s was already answered in the room", msg.event_id)
            return False
        verdict = self._limited(msg)
        if verdict == "warn":
            per = self._rate_per_minute
            text = f"You are sending commands faster than {per} a minute; try again shortly."
            await self.say(msg, text, "error")
        return verdict == "ok"

    async def audience(self, room_id: RoomID) -> Audience:
        """Who reads a reply in `room_id`, and so what log text it may quote (rule 14); the
        command room's askers may read every room (`ANYONE`: no cut). Kept per room until the
        room's state may have changed (`Audiences`): ask it after reading the room's log,
        whose read drops it on a state event the dispatcher may not have seen."""
        if room_id == self.command_room:
            return ANYONE
        return await self._audiences.get(
            room_id,
            lambda: room_audience(
                self._states, room_id, {self._bot_user_id}, self._audiences.memo
            ),
        )

    async def withheld(self, msg: Incoming, cut: Audience | None) -> str | None:
        """Just before a reply quoting under `cut` is sent: None when no member or visibility
        event since the audience was read changed who reads it, else the notice that replaces
        the reply (rule 14; a join during a search must not read what came before it). Raises
        `MatrixUnavailable` when the room cannot be read: nothing is sent unchecked."""
        if msg.room_id == self.command_room:
            return await self._command_room_withheld(msg)
        if cut is None or not cut.basis:
            return None  # the command room (`ANYONE`): no audience was read
        if await audience_unchanged(self._fresh, msg.room_id, cut):
            return None
        self._audiences.drop(msg.room_id)
        if await self.audience(RoomID(msg.room_id)) == cut:
            return None  # a rename, or a change that moves no cut
        return AUDIENCE_CHANGED

    async def _command_room_withheld(self, msg: Incoming) -> str | None:
        """The command room is still served (rule 14): an asker may invite someone while a
        command runs, and whoever joins would read the reply's other rooms."""
        verdict = await self._command_room_now(RoomID(msg.room_id))
        if verdict.eligible:
            return None
        log.error(
            "withholding the reply to %s: the command room %s is no longer served: %s (%s)",
            msg.event_id,
            msg.room_id,
            verdict.reason,
            verdict.detail,
        )
        return COMMAND_ROOM_CHANGED


SMALL_LOG = 64  # events read to check "already answered" for replies that need no log


async def answer_small(
    reads: LogReader,
    replier: Replier,
    msg: Incoming,
    text: str,
    kind: Literal["error", "help"] = "error",
) -> None:
    """A short text reply that quotes no log: "already answered" and the rate checked on the
    room's latest `SMALL_LOG` events only."""
    if await replier.may_answer(msg, await reads.read_log(msg.room_id, SMALL_LOG)):
        await replier.say(msg, text, kind)


# The state read for the check just before a reply is sent (rule 14) must be begun after the
# reply asked: a member who joined while it was built must be seen. A read under way began
# before that, so it is never shared with a later asker; every reply asking while it runs waits
# for the next read, begun once it ends, after all of them asked: as its own `/state` would be,
# and a burst in one room costs the homeserver a read a round trip, not one a reply (RESULTS §7).
_Read = asyncio.Future[list[ClientEvent]]


class FreshStates:
    """`RoomStates` whose `state_events` is begun after the call and shared with the calls
    made while it waits to begin; `get_event` is the client's."""

    def __init__(self, client: RoomStates) -> None:
        self._client = client
        self._waiting: dict[str, _Read] = {}  # room -> the next read, not begun yet
        self._running: dict[str, _Read] = {}  # room -> the read under way
        self._tasks: set[asyncio.Task[None]] = set()

    async def state_events(self, room_id: RoomID | str) -> list[ClientEvent]:
        read = self._waiting.get(room_id)
        if read is None:
            read = self._waiting[room_id] = asyncio.get_running_loop().create_future()
            read.add_done_callback(failure_retrieved)
            task = asyncio.ensure_future(self._read(room_id, read))
            self._tasks.add(task)  # held until it ends: the loop keeps only a weak reference
            task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(read)  # a reply cut off leaves the read to the others

    async def _read(self, room_id: RoomID | str, read: _Read) -> None:
        try:
            running = self._running.get(room_id)
            if running is not None:
                await asyncio.wait([running])  # began before some of this read's askers asked
            # From here a new asker waits for the next read: this one begins now.
            del self._waiting[room_id]
            self._running[room_id] = read
            state = await self._client.state_events(room_id)
        except asyncio.CancelledError:  # the service stops
            read.cancel()
            raise
        except Exception as e:  # every asker of this read sees its failure
            read.set_exception(e)
        else:
            read.set_result(state)
        finally:
            for held in (self._waiting, self._running):
                if held.get(room_id) is read:
                    del held[room_id]

    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None:
        return await self._client.get_event(room_id, event_id)
