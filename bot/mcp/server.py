"""`muninn mcp`: the read commands as Model Context Protocol tools on stdio
(docs/ARCHITECTURE.md §4.7), on the reference SDK's `MCPServer` (no protocol of our own).

Each tool declares its arguments once, with their bounds, and the SDK publishes them as the
tool's JSON schema; a call outside them, of another type (`true` for a number, `"5"` for 5) or
with an argument the tool does not take is refused in the schema's words (`bot.mcp.arguments`).
A refusal the read path makes (an unknown room, a bad date) is a tool error naming the argument
(`ToolError`: `room: …`, without the SDK's "Error executing tool" before it), and the server
goes on serving, on a bounded stdio transport (`bot.mcp.stdio`);
nothing here writes to stdout, which is the protocol's.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Annotated, Any, Literal, TypeVar, cast, get_args

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, Tool, ToolAnnotations
from pydantic import Field

from bot.chat.commands.records import MAX_ROOMS
from bot.config import ServiceConfig
from bot.mcp.arguments import Strict
from bot.mcp.lookups import Lookups, Reading, listed, named
from bot.mcp.records import Board, Context, RoomList, SearchDocument
from bot.mcp.service import refuse_the_write_token
from bot.mcp.stdio import serve_stdio
from bot.operations.context import MAX_AROUND, MAX_BESIDE
from bot.service.http_api.wire import MAX_IDS
from ingest.embed import make_embedder
from ingest.errors import MuninnError, QueryError
from ingest.search.filters import HAS_KINDS, MAX_EXCLUSIONS, MAX_MENTIONS, MessageFilter
from ingest.search.query import MAX_LIMIT, MAX_OFFSET, MAX_TEXT_BYTES, MAX_TEXTS

__all__ = ["build_server", "serve"]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
MAX_ID = 255  # characters of a Matrix id (room, alias, user, event): the spec's bound in bytes
MAX_REF = 2048  # a permalink: matrix.to, a room, an event and its via= servers
MAX_DATE = 64
MAX_ERROR = 2000  # characters of a refusal: a read path's message never carries a whole input
DATE = (
    "a time in the chat's date grammar: 7d, 12h, 2w, today, yesterday, 2026, 2026-11, "
    "2026-11-01, 2026-11-01T16:34 (UTC); a span means its first moment"
)
USERS = "users: @user:server, or @user / user on this homeserver"

Text = Annotated[str, Field(max_length=MAX_TEXT_BYTES)]
RoomText = Annotated[str, Field(max_length=MAX_ID)]
User = Annotated[str, Field(max_length=MAX_ID)]
Texts = Annotated[
    Text | Annotated[list[Text], Field(min_length=1, max_length=MAX_TEXTS)] | None,
    Field(
        description="what to look for, in words; several texts are searched together (1-8); "
        "with reply_to, optional: the replies holding its words"
    ),
]
InRooms = Annotated[
    RoomText | Annotated[list[RoomText], Field(max_length=MAX_ROOMS)] | None,
    Field(description="only these rooms (at most 8): ids (!…) or aliases (#dev is this server's)"),
]
Users = Annotated[
    User | Annotated[list[User], Field(max_length=MAX_IDS)] | None, Field(description=USERS)
]
NotUsers = Annotated[
    User | Annotated[list[User], Field(max_length=MAX_EXCLUSIONS)] | None,
    Field(description="leave out messages of these " + USERS),
]
Mentions = Annotated[
    User | Annotated[list[User], Field(max_length=MAX_MENTIONS)] | None,
    Field(description="only messages mentioning these " + USERS),
]
After = Annotated[
    str | None, Field(max_length=MAX_DATE, description="only messages at or after " + DATE)
]
Before = Annotated[
    str | None, Field(max_length=MAX_DATE, description="only messages at or before " + DATE)
]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="hits a page")]
Cursor = Annotated[
    int | None,
    Field(
        ge=0,
        le=MAX_OFFSET,
        description="the next_offset of the previous page, with the same other arguments",
    ),
]
Words = Annotated[
    list[Text] | None,
    Field(max_length=MAX_EXCLUSIONS, description="leave out hits with any of these words"),
]
HasLink = Annotated[bool, Field(description='only messages with a URL (as has: "link")')]
Kind = Literal["link", "file", "image", "video", "audio"]
assert get_args(Kind) == HAS_KINDS  # the filter's kinds (`ingest.search.filters`), one list
Has = Annotated[
    Kind | Annotated[list[Kind], Field(max_length=len(HAS_KINDS))] | None,
    Field(
        description="only messages with any of these: a link (a URL in the text), or a file, "
        "image, video or audio clip (msgtype m.file, m.image, m.video, m.audio; its body is "
        "its filename and caption)"
    ),
]
Beside = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_BESIDE,
        description="messages before and after each hit's best message to read with it, as "
        "the context tool reads them: the message's context: {before, after}, oldest first",
    ),
]
Match = Annotated[
    Literal["meaning", "words"],
    Field(
        description="meaning: by meaning and words, ranked; words: by the words alone (no "
        "model), each message listed holding every word of a query text (any case, an "
        "identifier's part, or a word* prefix's words), for names, part numbers, errors"
    ),
]
ReplyTo = Annotated[
    str | None,
    Field(
        max_length=MAX_REF,
        description="instead of the index: the messages replying to this message and its "
        "thread, read from the homeserver now, in the order sent (a permalink, or an event "
        "id ($…) with one room)",
    ),
]
InThread = Annotated[bool | None, Field(description="true: only in threads; false: only outside")]
Sort = Annotated[Literal["relevance", "recent"], Field(description="recent: newest first")]
Event = Annotated[
    str,
    Field(
        max_length=MAX_REF,
        description="a hit's permalink (https://matrix.to/#/…) or an event id ($…)",
    ),
]
EventRoom = Annotated[
    str | None,
    Field(max_length=MAX_ID, description="the event's room (id or alias), for a bare event id"),
]
Around = Annotated[int, Field(ge=0, le=MAX_AROUND, description="messages on that side of it")]
Room = Annotated[
    str,
    Field(max_length=MAX_ID, description="the room: id (!…) or alias (#dev is this server's)"),
]

Fn = TypeVar("Fn", bound=Callable[..., Any])


class ToolServer(MCPServer):
    """The SDK's server, each tool's arguments checked strictly before the SDK reads them."""

    def __init__(self, name: str, *, version: str, instructions: str) -> None:
        super().__init__(name, version=version, instructions=instructions)
        self.strict: dict[str, Strict] = {}

    def read_only(self, fn: Fn) -> Fn:
        """Declare `fn` a read-only tool: its docstring, dedented, describes it."""
        self.strict[fn.__name__] = Strict.of(fn)
        description = inspect.cleandoc(fn.__doc__ or "")
        self.add_tool(fn, description=description, annotations=READ_ONLY)
        return fn

    async def list_tools(self) -> list[Tool]:
        return [
            t.model_copy(update={"input_schema": self.strict[t.name].schema})
            if t.name in self.strict
            else t
            for t in await super().list_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        strict = self.strict.get(name)
        if strict is not None and (why := strict.check(arguments)) is not None:
            raise ToolError(why)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as e:  # a tool's own refusal, without the SDK's "Error executing …"
            if isinstance(e.__cause__, ToolError):
                raise ToolError(str(e.__cause__)) from None
            raise


async def answer(call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """A tool's document; a MuninnError is a tool error with its cause, in the tool's words."""
    try:
        return await call
    except QueryError as e:
        raise ToolError(_bounded(str(named(e)))) from None
    except MuninnError as e:
        raise ToolError(_bounded(str(e))) from None


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 1] + "…"


def build_server(lookups: Lookups) -> MCPServer:
    """The four tools over `lookups`; every MuninnError becomes a tool error with its cause."""
    server = ToolServer(
        "muninn",
        version=version("muninn-matrix"),
        instructions=(
            "Search a Matrix community's rooms: `search` finds messages (each hit with a "
            "matrix.to permalink; `context: N` reads the conversation with each, `reply_to` "
            "lists the answers to one message), `context` reads the conversation around one, "
            "`pins` a room's pinboard, `rooms` what can be searched."
        ),
    )

    @server.read_only
    async def search(
        query: Texts = None,
        room: InRooms = None,
        sender: Users = None,
        after: After = None,
        before: Before = None,
        limit: Limit = 5,
        cursor: Cursor = None,
        exclude: Words = None,
        exclude_sender: NotUsers = None,
        has_link: HasLink = False,
        in_thread: InThread = None,
        mentions: Mentions = None,
        sort: Sort = "relevance",
        has: Has = None,
        context: Beside = 0,
        match: Match = "meaning",
        reply_to: ReplyTo = None,
    ) -> SearchDocument:
        """Search the community's indexed rooms: the `muninn search --json` document, each hit
        with its room, messages (event id, sender, ms time, body, msgtype), score and a
        matrix.to permalink to the best-matching message; `next_offset` is the cursor of the
        next page (null on the last); `indexing` lists the searched rooms the index has not
        caught up with (never read, or behind the homeserver: their newest messages are not
        searched; empty when all are current). Every hit is checked against the homeserver
        first: a redacted, purged or since-edited message is never shown. `has` keeps links,
        files, images, videos or audio clips; `context: N` reads each hit's conversation
        with it; `match: "words"` the words alone; `reply_to` the answers to one message."""

        async def call() -> dict[str, Any]:
            if query is None and reply_to is None:
                raise QueryError("query", "required: what to look for (or give reply_to)")
            flt = MessageFilter.build(
                exclude_words=listed(exclude),
                exclude_senders=lookups.users(exclude_sender, "exclude_sender"),
                has_link=has_link,
                has=listed(has),
                in_thread=in_thread,
                mentions=lookups.users(mentions, "mentions"),
            )
            senders = lookups.users(sender, "sender")
            when = (after, before)
            read = Reading(match, context, reply_to)
            return await lookups.search(
                listed(query), listed(room), senders, when, limit, cursor, flt, sort, read
            )

        return cast(SearchDocument, await answer(call()))

    @server.read_only
    async def context(
        event: Event, room: EventRoom = None, before: Around = 5, after: Around = 5
    ) -> Context:
        """The conversation around one message, oldest first: `{room_id, room_alias, event_id,
        messages: [{event_id, sender, ts, body, msgtype, permalink}]}`, read from the
        homeserver now, as each message reads after its author's edits; redacted, purged,
        notices, commands and encrypted messages are never shown."""
        return cast(Context, await answer(lookups.context(event, room, before, after)))

    @server.read_only
    async def pins(
        room: Room,
    ) -> Board:
        """The room's pinboard as `muninn pins --json` prints it: `{room_id, room_label,
        board_size, scanned, bound, pins: [{target, label, note, pinned_by, pinned_ts,
        marker_id, sender, ts, body, permalink}]}`, most recently pinned first."""
        return cast(Board, await answer(lookups.pins(room)))

    @server.read_only
    async def rooms() -> RoomList:
        """The rooms that can be searched: `{rooms: [{room_id, room_alias, name, indexed,
        points, indexed_ts, lag_seconds, unknown}], warnings}`; `lag_seconds` is how long ago
        the index last read the room (null: not indexed yet). With the homeserver down, the
        rooms the index holds, each naming in `unknown` the fields only the homeserver knows
        (`room_alias`, `name`), and a warning saying so."""
        return cast(RoomList, await answer(lookups.rooms()))

    return server


async def serve(cfg: ServiceConfig) -> int:
    """Serve the tools on stdin/stdout until the host closes them."""
    refuse_the_write_token(cfg)  # the listener's purge authority: this process holds none
    embedder = make_embedder(cfg.embedder)  # kept across calls; a local model unloads idle
    try:
        await serve_stdio(build_server(Lookups(cfg, embedder)))
    finally:
        await embedder.close()
    return 0
