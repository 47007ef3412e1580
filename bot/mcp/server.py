"""`muninn mcp`: the read commands as Model Context Protocol tools on stdio
(docs/ARCHITECTURE.md §4.7), on the reference SDK's `MCPServer` (no protocol of our own).

Each tool declares its arguments once, with their bounds, and the SDK publishes them as the
tool's JSON schema and refuses a call outside them. A refusal the read path makes (an unknown
room, a bad date) is a tool error naming the argument (`ToolError`), and the server goes on
serving; nothing here writes to stdout, which is the protocol's.
"""

from __future__ import annotations

from collections.abc import Awaitable
from importlib.metadata import version
from typing import Annotated, Any, Literal, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from bot.config import ServiceConfig
from bot.mcp.context import MAX_AROUND
from bot.mcp.lookups import Lookups, listed
from bot.mcp.records import Board, Context, RoomList, SearchDocument
from ingest.embed import make_embedder
from ingest.errors import MuninnError
from ingest.search.filters import MessageFilter
from ingest.search.query import MAX_LIMIT, MAX_OFFSET

__all__ = ["build_server", "serve"]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
DATE = (
    "a time in the chat's date grammar: 7d, 12h, 2w, today, yesterday, 2026, 2026-11, "
    "2026-11-01, 2026-11-01T16:34 (UTC); a span means its first moment"
)
Texts = Annotated[
    str | list[str],
    Field(description="what to look for, in words; several texts are searched together (1-8)"),
]
InRooms = Annotated[
    str | list[str] | None,
    Field(description="only these rooms: ids (!…) or aliases (#dev is this server's)"),
]
Users = Annotated[str | list[str] | None, Field(description="Matrix user ids (@user:server)")]
After = Annotated[str | None, Field(description="only messages at or after " + DATE)]
Before = Annotated[str | None, Field(description="only messages at or before " + DATE)]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="hits a page")]
Cursor = Annotated[
    int | None,
    Field(
        ge=0,
        le=MAX_OFFSET,
        description="the next_offset of the previous page, with the same other arguments",
    ),
]
Words = Annotated[list[str] | None, Field(description="leave out hits with any of these words")]
HasLink = Annotated[bool, Field(description="only messages with a URL")]
InThread = Annotated[bool | None, Field(description="true: only in threads; false: only outside")]
Sort = Annotated[Literal["relevance", "recent"], Field(description="recent: newest first")]
Event = Annotated[
    str, Field(description="a hit's permalink (https://matrix.to/#/…) or an event id ($…)")
]
EventRoom = Annotated[
    str | None, Field(description="the event's room (id or alias), for a bare event id")
]
Around = Annotated[int, Field(ge=0, le=MAX_AROUND, description="messages on that side of it")]
Room = Annotated[str, Field(description="the room: id (!…) or alias (#dev is this server's)")]


def build_server(lookups: Lookups) -> MCPServer:
    """The four tools over `lookups`; every MuninnError becomes a tool error with its cause."""
    server = MCPServer(
        "muninn",
        version=version("muninn-matrix"),
        instructions=(
            "Search a Matrix community's rooms: `search` finds messages (each hit with a "
            "matrix.to permalink), `context` reads the conversation around one, `pins` a "
            "room's pinboard, `rooms` what can be searched."
        ),
    )

    async def answer(call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await call
        except MuninnError as e:
            raise ToolError(str(e)) from None

    @server.tool(annotations=READ_ONLY)
    async def search(
        query: Texts,
        room: InRooms = None,
        sender: Users = None,
        after: After = None,
        before: Before = None,
        limit: Limit = 5,
        cursor: Cursor = None,
        exclude: Words = None,
        exclude_sender: Users = None,
        has_link: HasLink = False,
        in_thread: InThread = None,
        mentions: Users = None,
        sort: Sort = "relevance",
    ) -> SearchDocument:
        """Search the community's indexed rooms: the `muninn search --json` document, each hit
        with its room, messages (event id, sender, ms time, body), score and a matrix.to
        permalink to the best-matching message; `next_offset` is the cursor of the next page
        (null on the last). Every hit is checked against the homeserver first: a redacted,
        purged or since-edited message is never shown."""

        async def call() -> dict[str, Any]:
            flt = MessageFilter.build(
                exclude_words=listed(exclude, "exclude"),
                exclude_senders=listed(exclude_sender, "exclude_sender"),
                has_link=has_link,
                in_thread=in_thread,
                mentions=listed(mentions, "mentions"),
            )
            rooms, senders = listed(room, "room"), listed(sender, "sender")
            when = (after, before)
            return await lookups.search(
                listed(query, "query"), rooms, senders, when, limit, cursor, flt, sort
            )

        return cast(SearchDocument, await answer(call()))

    @server.tool(annotations=READ_ONLY)
    async def context(
        event: Event, room: EventRoom = None, before: Around = 5, after: Around = 5
    ) -> Context:
        """The conversation around one message, oldest first: `{room_id, room_alias, event_id,
        messages: [{event_id, sender, ts, body, permalink}]}`, read from the homeserver now, as
        each message reads after its author's edits; redacted, purged, notices, commands and
        encrypted messages are never shown."""
        return cast(Context, await answer(lookups.context(event, room, before, after)))

    @server.tool(annotations=READ_ONLY)
    async def pins(
        room: Room,
    ) -> Board:
        """The room's pinboard as `muninn pins --json` prints it: `{room_id, room_label,
        board_size, scanned, bound, pins: [{target, label, note, pinned_by, pinned_ts,
        marker_id, sender, ts, body, permalink}]}`, most recently pinned first."""
        return cast(Board, await answer(lookups.pins(room)))

    @server.tool(annotations=READ_ONLY)
    async def rooms() -> RoomList:
        """The rooms that can be searched: `{rooms: [{room_id, room_alias, name, indexed,
        points, indexed_ts, lag_seconds}]}`; `lag_seconds` is how long ago the index last read
        the room (null: not indexed yet)."""
        return cast(RoomList, await answer(lookups.rooms()))

    return server


async def serve(cfg: ServiceConfig) -> int:
    """Serve the tools on stdin/stdout until the host closes them."""
    embedder = make_embedder(cfg.embedder)  # kept across calls; a local model unloads idle
    try:
        await build_server(Lookups(cfg, embedder)).run_stdio_async()
    finally:
        await embedder.close()
    return 0
