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
from bot.service import wiring
from bot.service.http_api.wire import filter_fields
from ingest.embed import Embedder
from ingest.errors import MatrixUnavailable, MuninnError, StoreUnavailable
from ingest.index.export import exported_rooms
from ingest.index.records import (
    CURSOR_PREFIX,
    EXPORT_PREFIX,
)
from ingest.matrix import MatrixReader, Retry
from ingest.matrix.rooms import RoomCache
from ingest.rules.media import is_media
from ingest.rules.scope import RoomScope
from ingest.rules.stamps import utc_minute
from ingest.search.filters import HAS_KINDS, MessageFilter
from ingest.search.hits import SearchResult
from ingest.search.matches import in_order
from ingest.search.notices import EMPTY_INDEX
from ingest.search.permalink import permalink
from ingest.search.query import SORTS, SearchQuery
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
) -> SearchResult:
    """The read path as `muninn search` takes it: from the store, or from the running
    service's listener while `muninn run` holds the embedded store. `embedder`: a caller's
    own, kept across searches (`muninn mcp`), instead of one loaded for this search.
    `close_only`: a person's view (rule 22c), what the text of `muninn search` prints."""
    # Refuse a malformed query before taking the store (one process per path) or loading the
    # model: while `muninn run` holds the store, a bad --limit must say so, not "held".
    shape: dict[str, Any] = {
        "filter": flt,
        "sort": sort,
        "offset": offset,
        "close_only": close_only,
    }
    SearchQuery.build(texts, after_ts=after, before_ts=before, limit=limit, **shape)
    filters: dict[str, Any] = {
        "senders": senders,
        "after": after,
        "before": before,
        **filter_fields(flt or MessageFilter(), sort, offset),
        "close_only": close_only,
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
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        result = await _search_the_service(cfg, held, texts, rooms, limit=limit, **filters)
    return result


async def search(cfg: ServiceConfig, *, as_json: bool, **query: Any) -> int:
    """`muninn search`: `find`'s answer printed, as JSON (§4.3) or as lines (a person's view:
    the close matches, or the nearest said to be, rule 22c)."""
    result = await find(cfg, close_only=not as_json, **query)
    if as_json:  # a script reads the empty store in `warnings` (§4.3), as it always has
        print_json(result.as_json())
        return 0
    if EMPTY_INDEX in result.warnings:
        raise NothingIndexed(_store_named(cfg))
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(result_text(result, cfg.homeserver.server_name), end="")
    print(
        f"retrievers: {', '.join(result.retrievers)}; dropped stale: {result.dropped_stale}",
        file=sys.stderr,
    )
    if result.next_offset is not None:
        weaker = " (weaker matches)" if result.weaker_next else ""
        print(f"more{weaker}: --offset {result.next_offset}", file=sys.stderr)
    return 0


def result_text(result: SearchResult, server_name: str) -> str:
    """`muninn search`'s text: a result is a message (rule 22b), each one the page matched with
    its room, time, sender, excerpt (a media message's: `📎 filename — caption`) and link."""
    if not result.hits:
        return "no hits\n"
    out = ["nothing matched closely; the nearest:\n"] if result.nothing_close else []
    if result.weaker and not result.nothing_close:  # the close ones were on earlier pages
        out = ["weaker matches (none of these matched closely):\n"]
    for hit, message in in_order(result):
        body = " ".join(str(message["body"]).split())
        excerpt = body if len(body) <= 100 else body[:99] + "…"
        if is_media(message.get("msgtype")):
            excerpt = f"📎 {excerpt}"
        link = permalink(hit.room_id, str(message["event_id"]), server_name)
        out.append(
            f"{hit.room_alias or hit.room_id}  {utc_minute(message['ts'])}  {message['sender']}"
            f"\n  {excerpt}\n  {link}\n"
        )
    return "".join(out)


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
    scope = RoomScope.from_config(cfg.scope, cfg.homeserver.server_name)

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
