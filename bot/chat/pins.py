"""`!pin`, `!unpin` and `!pins`: the pinboard commands over the room log (no storage).

A `!pin` changes nothing but the room log (the command event *is* the marker); the reply only
says what the fold will make of it. `!pins` folds the markers within the scanned bound. The
markers are read from the room log here (`markers`, `pin_target`); `bot.chat.pinboard` folds them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bot.chat.commands.grammar import parse
from bot.chat.commands.records import PinCommand, PinsCommand, UnpinCommand, UsageError
from bot.chat.html import excerpt, safe_html, safe_plain
from bot.chat.pinboard import (
    Board,
    Marker,
    MayUnpin,
    fold,
    marker_from_command,
    resolve_offset,
    select,
    unpin_rule,
)
from bot.chat.reads import LogReader
from bot.chat.replies import NOTE_WIDTH, PinsView, notice, pins_reply, shorten
from bot.chat.replying import Replier
from bot.chat.visibility import ANYONE, Audience
from bot.errors import CommandError
from ingest.index.records import Tombstone
from ingest.matrix import ClientEvent
from ingest.matrix.rooms import RoomCache, RoomInfo
from ingest.rules.events import is_command, reply_target
from ingest.rules.scrub import scrub
from ingest.search.hits import purged
from ingest.search.logs.roomlog import RoomLog, TimelineItem, current_body
from ingest.search.permalink import cited_events, permalink
from ingest.types import RoomID

if TYPE_CHECKING:
    from bot.chat.commands.incoming import Incoming

__all__ = ["BoardReader", "PinActions", "markers", "pin_target"]

log = logging.getLogger("muninn.chat")


def _index_of(history: list[TimelineItem], msg: Incoming) -> int:
    """Where the command sits in the history; appended if the read did not reach it yet."""
    for i in range(len(history) - 1, -1, -1):
        if history[i].event_id == msg.event_id:
            return i
    body = msg.body
    root = msg.reply_to.thread_root
    history.append(TimelineItem(msg.event_id, msg.sender, msg.ts, body, root, msg.content, False))
    return len(history) - 1


def _body(item: TimelineItem) -> str:
    """A pinned message's text as a reply may show it: fallback stripped, secrets scrubbed."""
    return scrub(item.body)


def pin_target(
    history: Sequence[TimelineItem],
    index: int,
    command: PinCommand | UnpinCommand,
    *,
    bot_user_id: str,
    prefix: str,
) -> str | None:
    """The target of the `!pin`/`!unpin` at `history[index]`: reply, else ^N, else (a pin with
    a note) itself; None when there is none (`refusal` says why, for the reply).

    A reply to Muninn's own reply targets the message it cites when it cites exactly one (a
    search with one result), else nothing: its flattened text is no message to pin. A bare
    `!pin` (no reply, ^N, label or note) pins nothing: the message "!pin" is none either."""
    item = history[index]
    target = reply_target(item.content)
    if target is not None:
        own = next((h for h in history if h.event_id == target and h.sender == bot_user_id), None)
        if own is None:
            return target
        cited = cited_events(str(own.content.get("formatted_body", own.body)))
        return cited[0] if len(cited) == 1 else None
    if command.offset is not None:
        return resolve_offset(
            history, index, command.offset, bot_user_id=bot_user_id, prefix=prefix
        )
    if isinstance(command, PinCommand) and (command.note or command.label):
        return item.event_id
    return None


def markers(history: Sequence[TimelineItem], bot_user_id: str, prefix: str) -> list[Marker]:
    """The `!pin`/`!unpin` markers of a history (oldest first), targets resolved. A marker
    that cannot be read is skipped: anyone can post one, and one must never break the board
    of the room (`!pins`, `!pin`, `!unpin`, `muninn pins`)."""
    markers = []
    for index, item in enumerate(history):
        body = item.body
        if item.redacted or item.sender == bot_user_id or not is_command(body, prefix):
            continue
        try:
            marker = _marker(history, index, bot_user_id, prefix)
        except UsageError:
            continue
        except Exception as e:  # a malformed marker the grammar did not foresee (see above)
            log.warning("skipping pin marker %s: %s: %s", item.event_id, type(e).__name__, e)
            continue
        if marker is not None:
            markers.append(marker)
    return markers


def _marker(
    history: Sequence[TimelineItem], index: int, bot_user_id: str, prefix: str
) -> Marker | None:
    item = history[index]
    command = parse(item.body, prefix=prefix, now_ms=item.ts, in_command_room=True)
    if not isinstance(command, PinCommand | UnpinCommand):
        return None
    target = pin_target(history, index, command, bot_user_id=bot_user_id, prefix=prefix)
    return marker_from_command(
        item.event_id, item.sender, item.ts, command, target, thread_root=item.thread_root
    )


@dataclass(frozen=True)
class BoardReader:
    """A room's board as the bot folds it, for `!pins` and `muninn pins` alike: the markers of
    the log (the bot's own notices and its command prefix told apart), each pinned message's
    text as it reads now, and the pins older than the read fetched one by one."""

    fetch: Callable[[RoomID, str], Awaitable[ClientEvent | None]]
    bot_user_id: str
    prefix: str
    server_name: str

    def edited(self, room_log: RoomLog) -> dict[str, str]:
        """Each message's text with its author's valid edits applied (scrubbed), as the
        transcript shows it: a pin shows what the message says now, not what it said (rule 6)."""
        return {m.event_id: m.body for m in room_log.messages(self.bot_user_id, self.prefix)}

    def board(self, history: list[TimelineItem], may_unpin: MayUnpin) -> Board:
        return fold(markers(history, self.bot_user_id, self.prefix), may_unpin=may_unpin)

    def fold_log(
        self, room_log: RoomLog, cut: Audience, may_unpin: MayUnpin
    ) -> tuple[Board, dict[str, str], dict[str, str], dict[str, int]]:
        """The board (pins the room's readers may all see), and the text, sender and time of
        each pinned message within the log (pure CPU work: run in a thread)."""
        history = room_log.timeline()
        board = self.board(history, may_unpin)
        # Pins made, and messages sent, where the room's readers may not all see them: hidden.
        board = Board(tuple(p for p in board.pins if cut.sees(p.pinned_ts)), board.capacity)
        targets = {p.target for p in board.pins}
        edited = self.edited(room_log)
        bodies: dict[str, str] = {}
        senders: dict[str, str] = {}
        times: dict[str, int] = {}
        for item in history:
            if item.event_id not in targets:
                continue
            if not item.redacted and cut.sees(item.ts):
                known = item.event_id in edited
                bodies[item.event_id] = edited[item.event_id] if known else _body(item)
            senders[item.event_id] = item.sender
            times[item.event_id] = item.ts
        return board, bodies, senders, times

    async def view(
        self,
        room_log: RoomLog,
        stones: Sequence[Tombstone],
        info: RoomInfo,
        command: PinsCommand,
        cut: Audience,
        results_json: bool,
    ) -> PinsView:
        """`room_log` already without what `stones` (the recorded purges) cover."""
        room_id = room_log.room_id
        # Scrubbing the log's text is CPU work of up to `SCAN_TEXT`: off the event loop.
        may_unpin = unpin_rule(info.state)
        board, bodies, senders, times = await asyncio.to_thread(
            self.fold_log, room_log, cut, may_unpin
        )
        missing = [p.target for p in board.pins if p.target not in senders]
        fetched = await asyncio.gather(*(self.fetch(room_id, t) for t in missing))
        for target, event in zip(missing, fetched, strict=True):
            body = None if event is None else current_body(event, self.bot_user_id, self.prefix)
            ts = event.get("origin_server_ts") if event is not None else None
            if event is None or body is None or not isinstance(ts, int):
                continue
            if purged(stones, room_id, ts):
                continue  # beyond the read, but a purge covers it all the same
            if cut.sees(ts):
                bodies[target] = body
            senders[target] = str(event.get("sender"))
            times[target] = ts
        pins = select(board, label=command.label, text=command.text, bodies=bodies)
        # Notes are user text echoed back: scrubbed like every body a reply shows.
        pins = tuple(replace(p, note=scrub(p.note)) for p in pins)
        return PinsView(
            room_id=room_id,
            room_label=info.label,
            pins=pins,
            bodies=bodies,
            senders=senders,
            names=info.speakers,
            permalinks={p.target: permalink(room_id, p.target, self.server_name) for p in pins},
            scan=room_log.scan(),
            board_size=len(board.pins),
            results_json=results_json,
            times=times,
        )


def _nothing_pinned(item: TimelineItem, command: PinCommand, prefix: str) -> str:
    """Why a `!pin` found no target, and how to pin."""
    how = (
        f"reply to the message itself with {prefix}pin, or use {prefix}pin ^N for the N-th "
        "message above"
    )
    if reply_target(item.content) is not None:
        return f"Nothing pinned: that is Muninn's own reply, not a message; {how}."
    if command.offset is not None:
        return f"There are fewer than {command.offset} messages above; nothing pinned."
    return (
        f"Nothing pinned: {how}, or add a label or note to pin this one "
        f"({prefix}pin #label what to remember)."
    )


@dataclass(eq=False)
class PinActions:
    """The pinboard commands, given the parts of the handler they use: the log reader (its
    purges too), the replier (rate, audience, send), the room verdicts and the board reader."""

    reads: LogReader
    replier: Replier
    rooms: RoomCache
    boards: BoardReader

    async def pin(self, msg: Incoming, command: PinCommand | UnpinCommand) -> None:
        reads, replier, boards = self.reads, self.replier, self.boards
        room_log = await reads.read_log(msg.room_id)
        if not await replier.may_answer(msg, room_log):
            return
        room_log, _ = await reads.readable(room_log)
        history = room_log.timeline()
        index = _index_of(history, msg)
        target = pin_target(
            history, index, command, bot_user_id=boards.bot_user_id, prefix=boards.prefix
        )
        may_unpin = unpin_rule((await self.rooms.get(msg.room_id)).state)
        before = boards.board(history[:index], may_unpin)
        if isinstance(command, UnpinCommand):
            await self._unpin(msg, command, target, before, may_unpin)
            return
        if target is None:
            raise CommandError(_nothing_pinned(history[index], command, boards.prefix))
        items = {i.event_id: i for i in history}
        # The confirmation quotes the message only if the whole room may see it (rule 14):
        # `^5` may reach above the join of someone who just came in.
        audience = await replier.audience(msg.room_id)
        seen = target in items and audience.sees(items[target].ts)
        edited = await asyncio.to_thread(boards.edited, room_log) if seen else {}
        body = edited[target] if target in edited else _body(items[target]) if seen else ""
        verb = "Re-pinned" if before.get(target) else "Pinned"
        label = f" under #{command.label}" if command.label else ""
        cut = excerpt(body, (), 100) if body else None
        plain = f"📌 {verb}{safe_plain(label)}: {cut.plain if cut else target}"
        html = f"📌 {verb}{safe_html(label)}: {cut.html if cut else safe_html(target)}"
        if command.note:
            note = shorten(scrub(command.note), NOTE_WIDTH)
            plain += f" — {safe_plain(note)}"
            html += f" — {safe_html(note)}"
        await replier.send_quoting(
            msg, notice(msg.reply_to, plain, html), audience if seen else None
        )

    async def _unpin(
        self,
        msg: Incoming,
        command: UnpinCommand,
        target: str | None,
        before: Board,
        may_unpin: MayUnpin,
    ) -> None:
        if target is None:
            if command.offset is not None:
                why = f"there are fewer than {command.offset} messages above"
            else:
                why = "!unpin needs a target: reply to the pinned message, or give ^N"
            text = f"Nothing unpinned: {why}."
        elif (pinned := before.get(target)) is None:
            text = "Nothing unpinned: that message is not on the pinboard."
        elif pinned.pinned_by != msg.sender and not may_unpin(msg.sender):
            text = (
                "Nothing unpinned: another member's pin is unpinned by them or by someone the "
                "room lets change its pinned messages (a moderator, by default)."
            )
        else:
            text = "Unpinned."
        await self.replier.say(msg, text, "info")

    async def show(self, msg: Incoming, command: PinsCommand, in_command_room: bool) -> None:
        reads, replier = self.reads, self.replier
        own_log = await reads.read_log(msg.room_id)
        if not await replier.may_answer(msg, own_log):
            return
        room_id, room_log, cut = msg.room_id, own_log, ANYONE
        if command.room is not None:
            room_id = (await reads.resolve_rooms((command.room,)))[0]
            room_log = await reads.read_log(room_id)
        elif not in_command_room:
            cut = await replier.audience(msg.room_id)
        room_log, stones = await reads.readable(room_log)
        info = await self.rooms.get(room_id)
        view = await self.boards.view(room_log, stones, info, command, cut, in_command_room)
        filtered = command.label is not None or command.text is not None
        await replier.send_quoting(msg, pins_reply(msg.reply_to, view, filtered), cut)
