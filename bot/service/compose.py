"""The composition root of `muninn run`: one function builds the running parts from the config.

`build` wires the writer, the room verdicts, the searcher, the command handler, the command
pool and the refresh scheduler, each given only what it uses; `bot.service.run.Service` runs them
(the queue and dispatcher, the live stream, the listener) and stops them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.chat.command_room import CommandRoomPolicy
from bot.chat.commands.incoming import Incoming
from bot.chat.handlers import CommandHandler
from bot.chat.ports import HomeserverParts
from bot.chat.sender import BotClient
from bot.config import ServiceConfig
from bot.service import wiring
from bot.service.inflight import CommandPool
from bot.service.metrics import ServiceMetrics, counting_store
from bot.service.scheduler import RefreshScheduler
from ingest.embed import Embedder
from ingest.errors import MatrixError
from ingest.index import walkbounds
from ingest.index.refresh import Writer
from ingest.index.reports import RefreshReport
from ingest.matrix.rooms import RoomCache
from ingest.search import Searcher
from ingest.search.revalidate import LiveCheck
from ingest.store import Store
from ingest.types import Refusal, RoomID

__all__ = ["Parts", "build"]

log = logging.getLogger("muninn.service")


@dataclass(frozen=True)
class Parts:
    """What `muninn run` runs, built from the config by `build`."""

    bot_user_id: str
    store: Store  # counting its errors (`counting_store`)
    writer: Writer
    rooms: RoomCache
    searcher: Searcher
    handler: CommandHandler
    commands: CommandPool
    scheduler: RefreshScheduler


async def build(
    cfg: ServiceConfig,
    client: BotClient,
    store: Store,
    embedder: Embedder,
    metrics: ServiceMetrics,
    *,
    bot_user_id: str,
    full_at_start: bool,
    timed_out: Callable[[Incoming], Awaitable[None]],
) -> Parts:
    """The parts, from the config and the open store; asks the homeserver which room is the
    command room (and says at once when it will not be served)."""
    counted = counting_store(store, metrics.store_errors)
    writer = wiring.writer(cfg, client, counted, embedder)
    command_room = await _resolve_command_room(cfg, client)
    # The command room is left out of the index (unless opted in), so `in:` it is refused too.
    scope = wiring.room_scope(cfg).with_command_room_id(command_room)
    rooms = RoomCache(client, scope, remembered_puppet=writer.refused_by_puppet)
    # Hits are revalidated with the same room verdicts the event path uses, dropped on
    # any state event: a room bridged a second ago shows nothing.
    live = LiveCheck(client, rooms)
    searcher = wiring.searcher(cfg, counted, embedder, live_check=live)
    handler = CommandHandler(
        cfg,
        HomeserverParts.of(client),
        searcher,
        rooms,
        bot_user_id=bot_user_id,
        command_room=command_room,
        metrics=metrics.chat,
    )
    commands = CommandPool(
        cfg.bot.max_concurrent_commands,
        cfg.bot.command_timeout_seconds,
        handler.handle,
        timed_out,
    )
    await _check_command_room(handler.command_room, rooms, handler.command_policy)

    async def refresh(only: Sequence[RoomID] | None) -> RefreshReport:
        try:
            with walkbounds.room_time(walkbounds.WALK_PASS_SECONDS):  # no room holds the rest
                report = await writer.refresh(only=only)
        except Exception:
            metrics.refresh_failures.labels(kind="full" if only is None else "rooms").inc()
            raise
        metrics.record_refresh(report, full=only is None)
        return report  # its rooms left behind are woken again (`RefreshScheduler`)

    scheduler = RefreshScheduler(
        refresh,
        debounce=cfg.refresh.debounce_seconds,
        interval=cfg.refresh.interval_seconds,
        full_at_start=full_at_start,
    )
    return Parts(bot_user_id, counted, writer, rooms, searcher, handler, commands, scheduler)


async def _resolve_command_room(cfg: ServiceConfig, client: BotClient) -> RoomID | None:
    room = cfg.bot.command_room
    if room is None:
        return None
    if room.startswith("!"):
        return RoomID(room)
    try:
        return await client.resolve_alias(room)
    except MatrixError:  # tried again in the background (`CommandRoomAlias.run`)
        return None


async def _check_command_room(
    room_id: RoomID | None, rooms: RoomCache, policy: CommandRoomPolicy
) -> None:
    """Say at start, not at the first command, that the command room will not be served."""
    if room_id is None:
        return
    try:
        verdict = policy.serves_room(await rooms.get(room_id))
    except MatrixError as e:  # checked again on every command there
        log.warning("cannot check the command room %s yet: %s", room_id, e)
        return
    if verdict.reason is Refusal.NOT_JOINED:
        log.warning("the command room %s is not joined yet; invite the bot", room_id)
    elif verdict.reason is not None:
        log.error(
            "not serving the command room %s: %s (%s)", room_id, verdict.reason, verdict.detail
        )
