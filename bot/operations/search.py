"""`muninn search`: the one read path from the shell, or through the running service."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bot.config import ServiceConfig
from bot.operations.common import (
    HELD,
    adapters,
    cli_reader,
    cli_users,
    print_json,
    resolve_room,
    service_token,
)
from bot.operations.context import MAX_BESIDE, event_ref, showing_for, with_context
from bot.operations.enrich import enriched
from bot.operations.freshness import Indexed
from bot.operations.pins import recorded_purges
from bot.operations.replies import Narrowing, replies
from bot.operations.search_text import indexing_lines, result_text
from bot.operations.status import store_facts
from bot.service import wiring
from bot.service.http_api.wire import filter_fields
from ingest.embed import Embedder
from ingest.errors import MatrixUnavailable, MuninnError, QueryError, StoreUnavailable
from ingest.index.records import CURSOR_PREFIX, EXPORT_PREFIX, exported_rooms
from ingest.matrix import MatrixReader, Retry
from ingest.matrix.rooms import RoomCache
from ingest.search.filters import HAS_KINDS, MessageFilter
from ingest.search.hits import SearchResult
from ingest.search.notices import EMPTY_INDEX
from ingest.search.query import MATCHES, SORTS, SearchQuery
from ingest.search.revalidate import LiveCheck, SourcedCheck, export_check
from ingest.store import AsyncStore, Store
from ingest.types import RoomID

# `muninn search` revalidates every hit; a homeserver that cannot be reached fails the search
# within ~3 s, naming it (two tries 0.5 s apart, 1 s to connect), instead of ~8 s of retries.
# A homeserver that accepts the connection but hangs is given REVALIDATE_TIMEOUT a request.
REVALIDATE_RETRY = Retry(attempts=2, backoff=0.5, max_backoff=0.5)
REVALIDATE_CONNECT = 1.0
REVALIDATE_TIMEOUT = 10.0


def search_filter_flags(parser: argparse.ArgumentParser) -> None:
    """`muninn search`'s flags for the chat operators (`ingest.search.filters`), same meaning."""
    add = parser.add_argument
    add(
        "--exclude",
        action="append",
        default=[],
        metavar="WORDS",
        help="-word: leave out hits with it",
    )
    add(
        "--exclude-sender",
        action="append",
        default=[],
        metavar="S",
        help="-from: (@user:server, or @user / user on this homeserver)",
    )
    add("--has-link", action="store_true", help="has:link: only messages with a URL")
    add(
        "--has",
        action="append",
        default=[],
        choices=HAS_KINDS,
        metavar="KIND",
        help=f"has:KIND ({', '.join(HAS_KINDS)}; repeatable: messages with any of them)",
    )
    threads = parser.add_mutually_exclusive_group()
    threads.add_argument(
        "--in-thread", dest="in_thread", action="store_const", const=True, help="is:thread"
    )
    threads.add_argument(
        "--outside-threads", dest="in_thread", action="store_const", const=False, help="-is:thread"
    )
    add("--mentions", action="append", default=[], metavar="S", help="mentions: (as --sender)")
    add("--sort", choices=SORTS, default="relevance", help="sort:recent: newest first")
    add("--offset", type=int, default=0, help="hits to pass over: the next_offset of a page")
    add(
        "--match",
        choices=MATCHES,
        default="meaning",
        help="words: the words alone (no model), each message listed holds every word of a "
        "TEXT (any case, or a word* prefix's words)",
    )
    add(
        "--context",
        type=_beside,
        default=0,
        metavar="N",
        help=f"with each result, up to N (0-{MAX_BESIDE}) messages before and after it, read "
        "from the homeserver now (--json: the message's context: {before, after})",
    )
    add(
        "--reply-to",
        metavar="EVENT",
        help="the messages replying to EVENT and its thread (a matrix.to permalink, or $id "
        "with one --room), read from the homeserver now; TEXT optional: the replies holding "
        "its words",
    )


def _beside(text: str) -> int:
    """`--context N`: 0 to `MAX_BESIDE` messages either side."""
    value = int(text) if text.isdigit() else -1
    if not 0 <= value <= MAX_BESIDE:
        raise argparse.ArgumentTypeError(f"takes 0 to {MAX_BESIDE} messages, not {text!r}")
    return value


def search_filter_args(args: argparse.Namespace, server_name: str) -> dict[str, Any]:
    """The parsed flags as `search`'s keyword arguments; users short or full, as in chat."""
    flt = MessageFilter.build(
        exclude_words=args.exclude,
        exclude_senders=cli_users(args.exclude_sender, server_name, "--exclude-sender") or (),
        has_link=args.has_link,
        has=args.has,
        in_thread=args.in_thread,
        mentions=cli_users(args.mentions, server_name, "--mentions") or (),
    )
    return {
        "senders": cli_users(args.sender, server_name, "--sender"),
        "flt": flt,
        "sort": args.sort,
        "offset": args.offset,
        "match": args.match,
        "context": args.context,
        "reply_to": args.reply_to,
    }


async def find(
    cfg: ServiceConfig,
    *,
    texts: Sequence[str],
    rooms: Sequence[str] | None,
    senders: Sequence[str] | None,
    after: int | None,
    before: int | None,
    limit: int,
    flt: MessageFilter | None = None,
    sort: str = "relevance",
    offset: int = 0,
    embedder: Embedder | None = None,
    close_only: bool = False,
    match: str = "meaning",
    context: int = 0,
) -> SearchResult:
    """The read path as `muninn search` takes it: from the store, or from the running
    service's listener while `muninn run` holds the embedded store. `embedder`: a caller's
    own, kept across searches (`muninn mcp`), instead of one loaded for this search.
    `close_only`: a person's view (rule 22c), what the text of `muninn search` prints.
    The result says which searched rooms the index has not caught up with (`indexing`) and,
    `context` > 0, carries each hit's conversation (`enriched`)."""
    # Refuse a malformed query before taking the store (one process per path) or loading the
    # model: while `muninn run` holds the store, a bad --limit must say so, not "held".
    shape: dict[str, Any] = {
        "filter": flt,
        "sort": sort,
        "offset": offset,
        "close_only": close_only,
        "match": match,
    }
    SearchQuery.build(texts, after_ts=after, before_ts=before, limit=limit, **shape)
    filters: dict[str, Any] = {
        "senders": senders,
        "after": after,
        "before": before,
        **filter_fields(flt or MessageFilter(), sort, offset),
        "close_only": close_only,
        "match": match,
    }
    try:
        async with adapters(cfg, embedder=embedder) as (reader, store, embedder):
            fail_fast(reader)
            room_ids = [await resolve_room(reader, r) for r in rooms] if rooms else None
            await reach_the_homeserver(cfg, reader, store, room_ids)
            query = SearchQuery.build(
                texts,
                room_ids=room_ids,
                senders=senders,
                after_ts=after,
                before_ts=before,
                limit=limit,
                **shape,
            )
            live = await revalidation(cfg, reader, store)
            searcher = wiring.searcher(cfg, store, embedder, live_check=live)
            result = await searcher.search(query)
            if EMPTY_INDEX in result.warnings:
                return result
            indexed = await AsyncStore(store).run(Indexed.of_store)
            stones = await searcher.tombstones()
            return await enriched(cfg, reader, result, room_ids, context, indexed, stones)
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        result = await _search_the_service(cfg, held, texts, rooms, limit=limit, **filters)
    reader = cli_reader(cfg)
    try:
        fail_fast(reader)
        room_ids = [await resolve_room(reader, r) for r in rooms] if rooms else None
        indexed = Indexed.of_facts(await store_facts(cfg))
        stones = await recorded_purges(cfg)
        return await enriched(cfg, reader, result, room_ids, context, indexed, stones)
    finally:
        await reader.close()


async def find_replies(
    cfg: ServiceConfig,
    *,
    reply_to: str,
    rooms: Sequence[str] | None,
    context: int,
    asked: Narrowing,
) -> SearchResult:
    """`muninn search --reply-to EVENT`: the replies to it and its thread (`replies`)."""
    ref = event_ref(reply_to, "--reply-to")
    if ref.room is None and len(rooms or ()) != 1:
        raise QueryError("--room", "a bare event id needs its one room (or give the permalink)")
    given = ref.room or (rooms or [""])[0]
    reader = cli_reader(cfg)
    try:
        fail_fast(reader)
        room_id = await resolve_room(reader, given)
        showing = await showing_for(cfg, reader)
        cache = RoomCache(reader, await wiring.room_scope_now(cfg, reader))
        found = await replies(reader, cache, room_id, given, ref.event_id, showing, asked)
        return await with_context(reader, cache, found, context, showing)
    finally:
        await reader.close()


async def search(
    cfg: ServiceConfig, *, as_json: bool, reply_to: str | None = None, **query: Any
) -> int:
    """`muninn search`: `find`'s answer printed, as JSON (§4.3) or as lines (a person's view:
    the close matches, or the nearest said to be, rule 22c); with `reply_to`, the replies to
    that message and its thread (`find_replies`)."""
    if reply_to is not None:
        keys = ("texts", "senders", "after", "before", "flt", "limit", "offset", "sort")
        asked = Narrowing(**{k: v for k, v in query.items() if k in keys and v is not None})
        rooms, context = query.get("rooms"), query.get("context", 0)
        result = await find_replies(
            cfg, reply_to=reply_to, rooms=rooms, context=context, asked=asked
        )
    else:
        result = await find(cfg, close_only=not as_json, **query)
    if as_json:  # a script reads the empty store in `warnings` (§4.3), as it always has
        print_json(result.as_json())
        return 0
    if EMPTY_INDEX in result.warnings:
        raise NothingIndexed(_store_named(cfg))
    for w in [*result.warnings, *indexing_lines(result.indexing or ())]:
        print(f"warning: {w}", file=sys.stderr)
    print(result_text(result, cfg.homeserver.server_name), end="")
    retrievers = ", ".join(result.retrievers) or "the homeserver"
    print(f"retrievers: {retrievers}; dropped stale: {result.dropped_stale}", file=sys.stderr)
    if result.next_offset is not None:
        weaker = " (weaker matches)" if result.weaker_next else ""
        print(f"more{weaker}: --offset {result.next_offset}", file=sys.stderr)
    return 0


class NothingIndexed(MuninnError):
    """`muninn search` of a store no pass has written: nothing to search, and how to index."""

    def __init__(self, store: str) -> None:
        super().__init__(
            f"nothing is indexed yet: the store {store} holds no index. `muninn refresh` "
            "indexes the rooms the reader has joined (a running `muninn run` does at its "
            "first pass), `muninn import FILE` a room export; `muninn status` shows what the "
            "store holds"
        )


def _store_named(cfg: ServiceConfig) -> str:
    """The store as the operator configured it: its directory, or the Qdrant server's URL."""
    store = cfg.index.store
    if store.url is not None:
        return store.url
    return str(cfg.base_dir / (store.path or "data/qdrant"))


def fail_fast(reader: MatrixReader) -> None:
    """The CLI's search asks the homeserver only to revalidate: fail soon, naming it."""
    reader.retry = REVALIDATE_RETRY
    reader.connect_timeout = REVALIDATE_CONNECT
    reader.timeout = REVALIDATE_TIMEOUT


def built_from(store: Store) -> tuple[set[RoomID], dict[RoomID, Path]]:
    """The active generation's rooms built from the homeserver, and those built from an
    export by `muninn import` (still their record) with the export's path."""
    active = store.active()
    if active is None:
        return set(), {}
    col = store.open(active, dense_dim=None, create=False)
    cursors = col.list_meta(CURSOR_PREFIX)
    exports = col.list_meta(EXPORT_PREFIX)
    exported = exported_rooms(exports, cursors, cursor_prefix=CURSOR_PREFIX) if exports else {}
    rooms = {RoomID(k.removeprefix(CURSOR_PREFIX)) for k in cursors} - set(exported)
    return rooms, exported


async def reach_the_homeserver(
    cfg: ServiceConfig, reader: MatrixReader, store: Store, room_ids: Sequence[str] | None
) -> None:
    """Before the model loads (seconds), one request: hits of rooms read from the homeserver
    are confirmed against it, so when it cannot answer the search fails at once, naming it
    (issue 36: ~7 s, naming room ids). A search of imported rooms only needs no homeserver."""
    rooms, exported = await AsyncStore(store).run(built_from)
    if not rooms and not exported:
        # Nothing is indexed yet (`search` says so), but a token the homeserver refuses is
        # the cause to name first: a refresh would fail on it too (issue 44).
        with contextlib.suppress(MatrixUnavailable):
            await reader.whoami()
        return
    if room_ids is not None:
        rooms &= set(room_ids)
    if not rooms:
        return
    try:
        await reader.whoami()
    except MatrixUnavailable as e:
        raise MatrixUnavailable(
            f"the homeserver {cfg.homeserver.url} is unreachable ({e}). Hits are confirmed "
            "against it before they are shown, so none is; rooms indexed by `muninn import` "
            "are searched without it (--room)"
        ) from None


async def revalidation(cfg: ServiceConfig, reader: MatrixReader, store: Store) -> SourcedCheck:
    """Each room's hits checked against what it was built from: rooms `muninn import` indexed
    (and no refresh has since read from the homeserver) against their export, the rest against
    the homeserver. An operator can index and search an old room's export with no homeserver."""
    scope = wiring.room_scope(cfg)  # no request: the homeserver may be down (imports)

    def loader(path: Path) -> Callable[[], Awaitable[LiveCheck]]:
        return lambda: export_check(path, user_id=reader.user_id, scope=scope)

    _, exports = await AsyncStore(store).run(built_from)
    live = LiveCheck(reader, RoomCache(reader, scope))
    return SourcedCheck(live, {room: loader(path) for room, path in exports.items()})


async def _search_the_service(
    cfg: ServiceConfig,
    held: StoreUnavailable,
    texts: Sequence[str],
    rooms: Sequence[str] | None,
    **body: Any,
) -> SearchResult:
    """`muninn run` holds the embedded store: ask its loopback search endpoint instead."""
    from bot.service.http_api import post_search, result_from_json, service_url

    token = service_token(cfg, held, "search")
    reader = cli_reader(cfg)
    try:
        room_ids = [await resolve_room(reader, r) for r in rooms] if rooms else None
    finally:
        await reader.close()
    try:
        doc = await post_search(
            service_url(cfg.metrics), token, {"texts": list(texts), "room_ids": room_ids, **body}
        )
    except StoreUnavailable as e:
        raise StoreUnavailable(f"{held}; {e}") from None
    return result_from_json(doc)
