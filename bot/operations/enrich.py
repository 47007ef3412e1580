"""What a search document adds to the read path's hits, read from the homeserver now: which
searched rooms the index has not caught up with (`indexing`, `bot.operations.freshness`) and,
asked for, each hit's conversation (`context`, `bot.operations.context`), both at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence

from bot.config import ServiceConfig
from bot.operations.context import Showing, with_context
from bot.operations.freshness import Indexed, indexing
from bot.service import wiring
from ingest.errors import MatrixError
from ingest.index.records import Tombstone
from ingest.matrix import MatrixReader
from ingest.matrix.rooms import RoomCache
from ingest.search.hits import Behind, SearchResult

__all__ = ["enriched"]


async def enriched(
    cfg: ServiceConfig,
    reader: MatrixReader,
    result: SearchResult,
    rooms: Sequence[str] | None,
    context: int,
    indexed: Indexed,
    stones: Sequence[Tombstone],
) -> SearchResult:
    """`result` saying which searched `rooms` (None: every room) the index has not caught up
    with (`indexing`), and with `context` > 0 each hit's best message carrying the messages
    around it, read now as MCP's `context` tool reads them (`bot.operations.context`)."""
    cache = RoomCache(reader, await wiring.room_scope_now(cfg, reader))  # no command room
    showing = Showing(reader.user_id, cfg.bot.prefix, stones, cfg.homeserver.server_name)
    now = int(time.time() * 1000)
    fresh = asyncio.ensure_future(_fresh(indexing(reader, cache, indexed, rooms, now)))
    try:
        out = await with_context(reader, cache, result, context, showing)  # meanwhile
    except BaseException:
        fresh.cancel()
        raise
    out.indexing, unknown = await fresh
    if unknown is not None:  # the hits stand (revalidated); only their rooms' freshness not
        out.warnings.append(f"which searched rooms are not read yet is not known: {unknown}")
    return out


async def _fresh(
    judged: Awaitable[list[Behind]],
) -> tuple[list[Behind], MatrixError | None]:
    """`indexing`'s answer, or [] and why the homeserver could not give it."""
    try:
        return await judged, None
    except MatrixError as e:
        return [], e
