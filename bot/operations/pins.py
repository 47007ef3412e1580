"""`muninn pins ROOM`: a room's board as the bot folds it."""

from __future__ import annotations

import functools

from bot.chat.commands.records import PinsCommand
from bot.chat.pins import BoardReader
from bot.chat.reads import LogReader, RoomRefused
from bot.chat.replies import PinsView, pins_text
from bot.chat.visibility import ANYONE
from bot.config import ServiceConfig
from bot.operations.common import (
    cli_reader,
    print_json,
    resolve_room,
)
from bot.service import wiring
from ingest.errors import QueryError, StoreUnavailable
from ingest.index.records import TOMBSTONE_PREFIX, Tombstone
from ingest.matrix.rooms import RoomCache
from ingest.rules.scope import RoomScope
from ingest.store import AsyncPurges, open_async


async def pins(cfg: ServiceConfig, *, room: str, as_json: bool) -> int:
    """`muninn pins ROOM`: the room's board as the bot folds it (its `!pins` in the command
    room), from the homeserver's log; purged messages stay hidden. Needs no embedder, and reads
    the purges from their file, so it works beside a running service."""
    view = await board(cfg, room)
    if as_json:
        print_json(view.as_json())
    else:
        print(pins_text(view))
    return 0


async def board(cfg: ServiceConfig, room: str) -> PinsView:
    """The board `muninn pins ROOM` prints (and `muninn mcp`'s `pins` tool returns)."""
    reader = cli_reader(cfg)
    try:
        room_id = await resolve_room(reader, room)
        scope = RoomScope.from_config(cfg.scope, cfg.homeserver.server_name)
        rooms = RoomCache(reader, scope)
        info = await rooms.get(room_id)
        if not info.verdict.eligible:
            raise QueryError(
                "room", f"{room} is refused ({info.verdict.reason}: {info.verdict.detail})"
            )
        logs = LogReader(
            reader,
            reader,
            rooms,
            cfg.bot.transcript_limit,
            purges=functools.partial(recorded_purges, cfg),
        )
        try:
            room_log, stones = await logs.readable(await logs.read_log(room_id))
        except RoomRefused as e:
            raise QueryError(
                "room", f"{room} is refused (bridged: {e.puppet} is a bridge puppet)"
            ) from None
        boards = BoardReader(
            reader.get_event,
            str(await reader.whoami()),
            cfg.bot.prefix,
            cfg.homeserver.server_name,
        )
        view = await boards.view(room_log, stones, info, PinsCommand(), ANYONE, True)
    finally:
        await reader.close()
    return view


async def recorded_purges(cfg: ServiceConfig) -> list[Tombstone]:
    """The purge file's records, and the store's when no service holds it (a running service
    has synced the file with the store when it opened it)."""
    stones = list(
        map(
            Tombstone.from_meta,
            await AsyncPurges(wiring.purge_log(cfg)).read(),
        )
    )
    try:
        store = await open_async(cfg.index, cfg.base_dir)
    except StoreUnavailable:
        return stones
    try:
        active = await store.active()
        if active is not None:
            col = await store.open(active, dense_dim=None, create=False)
            stored = await col.list_meta(TOMBSTONE_PREFIX)
            stones += map(Tombstone.from_meta, stored.values())
    finally:
        await store.close()
    return stones
