"""The event path in process (tests/bot/fastkit.py, no Synapse): each event read once on
receipt, its `received` time stamped there, the record carried through the queue and a command
slot to the handler, and the writer woken on what was read then; each command answered by the
handler bound to its declaration.

The real `Dispatcher`, `CommandPool` and command handler over the kit's in-memory rooms.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mautrix.types import EventType

import bot.chat.commands.incoming as incoming_module
import ingest.rules.events as events_module
from bot.chat.commands.grammar import COMMANDS, HELP, SEARCH
from bot.chat.commands.incoming import Incoming
from bot.chat.handlers import Bound, bind
from bot.service.dispatch import Dispatcher
from bot.service.inflight import CommandPool
from bot.service.scheduler import RefreshScheduler
from ingest.matrix import ClientEvent
from ingest.types import Normalized, RoomID
from tests.bot.fastkit import SERVER, FastBot

ALICE = f"@alice:{SERVER}"
HOLD = 0.3  # seconds the first command holds the only slot

MakeBot = Callable[..., FastBot]
Run = Callable[[Incoming], Awaitable[None]]


def dispatcher(bot: FastBot, run: Run | None = None, *, queue_batches: int = 8) -> Dispatcher:
    """The service's dispatcher and a one-slot command pool over the kit's handler (`run` in
    its place when given)."""
    return Dispatcher(
        asyncio.Queue(queue_batches),
        rooms=bot.verdicts,
        handler=bot.handler,
        commands=CommandPool(1, 30.0, run or bot.handler.handle, _nothing),
        scheduler=_idle_scheduler(),
        own_membership=_no_membership,
    )


@asynccontextmanager
async def dispatching(bot: FastBot, run: Run | None = None) -> AsyncIterator[Dispatcher]:
    """`dispatcher(bot, run)`, running as its one task."""
    running = dispatcher(bot, run)
    task = asyncio.create_task(running.run())
    try:
        yield running
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await running.commands.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The id of every event `incoming` reads, in order."""
    read = incoming_module.incoming
    seen: list[str] = []

    def counted(event: ClientEvent, bot_user_id: str, prefix: str) -> Incoming | None:
        seen.append(str(event.get("event_id")))
        return read(event, bot_user_id, prefix)

    monkeypatch.setattr(incoming_module, "incoming", counted)
    return seen


@pytest.fixture
def normalised(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The id of every event `normalize` reads, wherever a loaded module calls it from."""
    real = events_module.normalize
    seen: list[str] = []

    def counted(event: ClientEvent, **kwargs: Any) -> Normalized:
        seen.append(str(event.get("event_id")))
        return real(event, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "normalize", None) is real:
            monkeypatch.setattr(module, "normalize", counted)
    return seen


async def _nothing(msg: Incoming) -> None:
    return None


async def _no_refresh(rooms: Sequence[RoomID] | None) -> None:
    return None


def _idle_scheduler() -> RefreshScheduler:
    """A scheduler that is never run: a wake-up is only noted."""
    return RefreshScheduler(_no_refresh, debounce=60.0, interval=3600.0, full_at_start=False)


async def _no_membership(room_id: RoomID, event: ClientEvent) -> None:
    return None


async def test_fast_dispatch_latency_counts_the_wait_for_a_slot(make_bot: MakeBot) -> None:
    """Regression (issue 38): `received` is stamped on receipt, so a reply's latency ("event
    received → reply sent") includes the queue and the wait for a free slot: with the only
    slot held for `HOLD` s, the command waiting behind it counts that wait."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    first, second = (bot.rooms.say(room, ALICE, "!help") for _ in range(2))
    gate = asyncio.Event()

    async def held_first(msg: Incoming) -> None:
        if msg.event_id == first:
            await gate.wait()
        await bot.handler.handle(msg)

    async with dispatching(bot, held_first) as running:
        assert running.accept([bot.rooms.event(room, first), bot.rooms.event(room, second)])
        await asyncio.sleep(HOLD)
        pool = running.commands
        assert (pool.running, pool.waiting) == (1, 1)  # the second waits for the slot
        gate.set()
        await asyncio.wait_for(running.queue.join(), 10)
    assert len(bot.replies(first)) == len(bot.replies(second)) == 1
    assert len(bot.handler.latencies_ms) == 2
    assert min(bot.handler.latencies_ms) >= HOLD * 1000


async def test_fast_dispatch_reads_each_event_once_on_receipt(
    make_bot: MakeBot, reads: list[str]
) -> None:
    """`incoming` runs once per event, when the batch is accepted (a state event, a message
    and a command: three reads), and the handler gets the record read then, its `received`
    time the receipt's."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    topic = bot.rooms.add(room, EventType.ROOM_TOPIC, ALICE, {"topic": "lunch"}, "")
    chat = bot.rooms.say(room, ALICE, "lunch at noon?")
    command = bot.rooms.say(room, ALICE, "!help")
    handled: list[Incoming] = []

    async def recorded(msg: Incoming) -> None:
        handled.append(msg)
        await bot.handler.handle(msg)

    async with dispatching(bot, recorded) as running:
        before = time.monotonic()
        assert running.accept([bot.rooms.event(room, e) for e in (topic, chat, command)])
        after = time.monotonic()
        await asyncio.wait_for(running.queue.join(), 10)
    assert reads == [topic, chat, command]
    [msg] = handled
    assert msg.event_id == command and before <= msg.received <= after
    assert len(bot.replies(command)) == 1


async def test_fast_dispatch_wakes_the_writer_on_what_was_read_on_receipt(
    make_bot: MakeBot, normalised: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wake-up decision (a message wakes the room's refresh, a command, which the writer
    never indexes, does not) takes the event as the writer reads it from the receipt:
    `normalize` runs once an event, when the batch is accepted, and not again on the way to
    the scheduler."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    chat = bot.rooms.say(room, ALICE, "lunch at noon?")
    command = bot.rooms.say(room, ALICE, "!help")
    woken: list[RoomID] = []
    async with dispatching(bot) as running:
        monkeypatch.setattr(running.scheduler, "wake", woken.append)
        assert running.accept([bot.rooms.event(room, chat)])
        assert normalised == [chat]
        await asyncio.wait_for(running.queue.join(), 10)
        assert normalised == [chat] and woken == [room]
        assert running.accept([bot.rooms.event(room, command)])
        assert normalised == [chat, command]
        await asyncio.wait_for(running.queue.join(), 10)
    assert normalised == [chat, command] and woken == [room]
    assert len(bot.replies(command)) == 1


async def test_fast_dispatch_a_full_queue_reads_nothing(
    make_bot: MakeBot, reads: list[str]
) -> None:
    """A batch offered to a full queue is refused (the caller offers it again) and not read:
    the offer that is accepted is the receipt."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    first, second = (bot.rooms.say(room, ALICE, "!help") for _ in range(2))
    stopped = dispatcher(bot, queue_batches=1)  # not running: the queue stays full
    assert stopped.accept([bot.rooms.event(room, first)])
    assert not stopped.accept([bot.rooms.event(room, second)])
    assert reads == [first] and stopped.queue.qsize() == 1


def test_fast_every_declared_command_is_bound_once() -> None:
    """The handler binds each declaration in `COMMANDS` to what answers it, once: a missing or
    a second binding is refused when the handler is built."""

    async def answer(msg: Incoming, command: object, in_command_room: bool) -> None:
        return None

    table = bind(*(Bound(spec, answer) for spec in COMMANDS))
    assert list(table) == [spec.name for spec in COMMANDS]
    with pytest.raises(ValueError, match="once"):
        bind(*(Bound(spec, answer) for spec in COMMANDS if spec is not HELP))
    with pytest.raises(ValueError, match="once"):
        bind(*(Bound(spec, answer) for spec in COMMANDS), Bound(SEARCH, answer))


async def test_fast_help_of_a_command_is_its_declaration(make_bot: MakeBot) -> None:
    """`!help search` answers with the help of the declaration the search handler is bound
    to (usage and help stay generated from the declarations)."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    reply = await bot.reply(room, ALICE, "!help search")
    assert str(reply["body"]).splitlines()[0] == SEARCH.help("!", False).splitlines()[0]


def counted(bot: FastBot, command: str, outcome: str) -> float:
    """`muninn_commands_total{command, outcome}` as the handler counted it."""
    [family] = bot.handler.metrics.commands.collect()
    want = {"command": command, "outcome": outcome}
    return sum(s.value for s in family.samples if s.name.endswith("_total") and s.labels == want)


async def test_fast_commands_are_counted_by_their_declaration(make_bot: MakeBot) -> None:
    """A command is counted under the name of the declaration that read it, an alias under
    its command's, a usage error under the command it misuses, an unknown word as unknown."""
    bot = make_bot()
    room = bot.rooms.create_room(ALICE)
    for body in ("!help", "!s lunch", "!more please", "!serach lunch"):
        await bot.ask(room, ALICE, body)
    assert counted(bot, "help", "ok") == 1
    assert counted(bot, "search", "ok") == 1
    assert counted(bot, "more", "usage_error") == 1
    assert counted(bot, "unknown", "unknown") == 1
