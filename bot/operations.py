"""The CLI's commands, wired to the adapters: one function a command, printing its result.

Adapters are built here (the imperative shell); policy lives in `ingest.refresh` (the one
writer) and `ingest.search` (the one read path).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ingest.config import Config
from ingest.embed import Embedder, make_embedder
from ingest.errors import MatrixNotFound, QueryError, StoreUnavailable
from ingest.export import ExportReader
from ingest.matrix import MatrixReader
from ingest.purges import PurgeLog, purge_log_path
from ingest.refresh import (
    COMPAT_KEY,
    CURSOR_PREFIX,
    REFUSED_PREFIX,
    RefreshReport,
    RoomReport,
    Writer,
)
from ingest.revalidate import LiveCheck
from ingest.rooms import RoomCache
from ingest.scope import RoomScope, decide
from ingest.search import Searcher, SearchQuery, SearchResult
from ingest.store import PointFilter, Store, open_store
from ingest.types import Refusal, RoomID, Verdict

# `muninn import` of a room that scope refuses (a DM, a bridged room): nothing was indexed.
EXIT_REFUSED = 3


def _print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


@asynccontextmanager
async def _adapters(
    cfg: Config, *, embed: bool = True
) -> AsyncIterator[tuple[MatrixReader, Store, Embedder | None]]:
    reader = MatrixReader.from_config(cfg)
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    embedder = make_embedder(cfg.embedder) if embed else None
    try:
        yield reader, store, embedder
    finally:
        if embedder is not None:
            await embedder.close()
        await asyncio.to_thread(store.close)
        await reader.close()


async def resolve_room(reader: MatrixReader, room: str) -> RoomID:
    """A room id as given, or an alias resolved by the homeserver (an error names it)."""
    if room.startswith("!"):
        return RoomID(room)
    if room.startswith("#"):
        found = await reader.resolve_alias(room)
        if found is None:
            raise QueryError("room", f"no room has the alias {room}")
        return found
    raise QueryError("room", f"{room!r} is neither a room id (!…) nor an alias (#…)")


def _progress_bar() -> Any:
    if not sys.stderr.isatty():
        return None

    def show(room_id: RoomID, events: int) -> None:
        sys.stderr.write(f"\r\x1b[K{room_id}: {events} events read")
        sys.stderr.flush()

    return show


async def refresh(cfg: Config, *, rooms: Sequence[str] | None, as_json: bool) -> int:
    async with _adapters(cfg) as (reader, store, embedder):
        assert embedder is not None
        only = [await resolve_room(reader, r) for r in rooms] if rooms else None
        purges = PurgeLog(purge_log_path(cfg.index, cfg.base_dir))
        writer = Writer(cfg, reader, store, embedder, purges=purges)
        report = await writer.refresh(only=only, progress=_progress_bar())
    _print_report(report, as_json=as_json)
    return 0


def _print_report(report: RefreshReport, *, as_json: bool) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\n")  # end the progress line
    if as_json:
        _print_json(report.as_json())
    else:
        for r in report.rooms:
            print(_room_line(r))


def _room_line(r: RoomReport) -> str:
    name = r.room_alias or r.room_id
    if r.verdict != "eligible":
        purged = " (purged from the index)" if r.purged_room else ""
        return f"{name}: refused, {r.verdict}: {r.detail}{purged}"
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(r.skipped.items())) or "none"
    return (
        f"{name}: read {r.events_read}, indexed {r.indexed}, edits {r.edits_applied}, "
        f"redactions {r.redactions_applied}, windows +{r.windows_written}/-{r.windows_deleted}, "
        f"skipped: {skipped}"
    )


async def search(
    cfg: Config,
    *,
    texts: Sequence[str],
    rooms: Sequence[str] | None,
    senders: Sequence[str] | None,
    after: int | None,
    before: int | None,
    limit: int,
    as_json: bool,
) -> int:
    # Refuse a malformed query before taking the store (one process per path) or loading the
    # model: while `muninn run` holds the store, a bad --limit must say so, not "held".
    SearchQuery.build(texts, after_ts=after, before_ts=before, limit=limit)
    filters: dict[str, Any] = {"senders": senders, "after": after, "before": before}
    try:
        async with _adapters(cfg) as (reader, store, embedder):
            room_ids = [await resolve_room(reader, r) for r in rooms] if rooms else None
            query = SearchQuery.build(
                texts,
                room_ids=room_ids,
                senders=senders,
                after_ts=after,
                before_ts=before,
                limit=limit,
            )
            scope = RoomScope.from_config(cfg.scope, cfg.homeserver.server_name)
            searcher = Searcher(
                store,
                embedder,
                server_name=cfg.homeserver.server_name,
                live_check=LiveCheck(reader, RoomCache(reader, scope)),
                purges=PurgeLog(purge_log_path(cfg.index, cfg.base_dir)),
            )
            result = await searcher.search(query)
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        result = await _search_the_service(cfg, held, texts, rooms, limit=limit, **filters)
    if as_json:
        _print_json(result.as_json())
        return 0
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not result.hits:
        print("no hits")
    for hit in result.hits:
        best = next(m for m in hit.messages if m["event_id"] == hit.best_event_id)
        when = datetime.fromtimestamp(int(best["ts"]) / 1000, UTC).strftime("%Y-%m-%d %H:%M")
        body = " ".join(str(best["body"]).split())
        excerpt = body if len(body) <= 100 else body[:99] + "…"
        print(
            f"{hit.room_alias or hit.room_id}  {when}  {best['sender']}\n  {excerpt}\n"
            f"  {hit.permalink}"
        )
    print(
        f"retrievers: {', '.join(result.retrievers)}; dropped stale: {result.dropped_stale}",
        file=sys.stderr,
    )
    return 0


HELD = "held by another process"


async def _search_the_service(
    cfg: Config,
    held: StoreUnavailable,
    texts: Sequence[str],
    rooms: Sequence[str] | None,
    **body: Any,
) -> SearchResult:
    """`muninn run` holds the embedded store: ask its loopback search endpoint instead."""
    from bot.http_api import post_search, result_from_json, service_url

    if cfg.metrics.port is None:
        raise StoreUnavailable(
            f"{held}. To search while `muninn run` holds the store, give the service a "
            "loopback port (metrics: {port: 9464} in the config) and restart it: "
            "`muninn search` then asks it"
        ) from None
    reader = MatrixReader.from_config(cfg)
    try:
        room_ids = [await resolve_room(reader, r) for r in rooms] if rooms else None
    finally:
        await reader.close()
    try:
        doc = await post_search(
            service_url(cfg.metrics), {"texts": list(texts), "room_ids": room_ids, **body}
        )
    except StoreUnavailable as e:
        raise StoreUnavailable(f"{held}; {e}") from None
    return result_from_json(doc)


async def status(cfg: Config, *, as_json: bool) -> int:
    async with _adapters(cfg, embed=False) as (reader, store, _):
        me = await reader.whoami()
        joined = await reader.joined_rooms()
        direct = await reader.direct_rooms()
        active = await asyncio.to_thread(store.active)
        col = None
        if active is not None:
            col = await asyncio.to_thread(store.open, active, dense_dim=None, create=False)
        cursors = await asyncio.to_thread(col.list_meta, CURSOR_PREFIX) if col else {}
        refused = await asyncio.to_thread(col.list_meta, REFUSED_PREFIX) if col else {}
        compat = await asyncio.to_thread(col.get_meta, COMPAT_KEY) if col else None
        rooms: list[dict[str, Any]] = []
        now = int(time.time() * 1000)
        for room_id in sorted(joined):
            try:
                state = await reader.room_state(room_id)
            except MatrixNotFound:
                continue
            verdict = decide(
                state, direct_rooms=direct, scope=cfg.scope, server_name=cfg.homeserver.server_name
            )
            marker = refused.get(REFUSED_PREFIX + room_id)
            if verdict.eligible and marker is not None:
                # The writer refused it by what its timeline showed (a puppet sender).
                verdict = Verdict(room_id, Refusal.BRIDGED, str(marker.get("detail", "")))
            cursor = cursors.get(CURSOR_PREFIX + room_id)
            points = (
                await asyncio.to_thread(col.count, PointFilter(room_ids=(room_id,))) if col else 0
            )
            rooms.append(
                {
                    "room_id": room_id,
                    "room_alias": state.canonical_alias,
                    "name": state.name,
                    "verdict": "eligible" if verdict.eligible else str(verdict.reason),
                    "detail": verdict.detail,
                    "indexed": cursor is not None,
                    "points": points,
                    "cursor": cursor.get("token") if cursor else None,
                    "lag_seconds": (now - int(cursor["updated_ms"])) / 1000 if cursor else None,
                }
            )
        total = await asyncio.to_thread(col.count) if col else 0
        doc = {
            "reader": me,
            "generation": active,
            "versions": compat,
            "points": total,
            "rooms": rooms,
        }
    if as_json:
        _print_json(doc)
        return 0
    print(f"reader {me}; generation {active}; {total} points")
    for r in rooms:
        shown = r["verdict"] if r["verdict"] != "eligible" else f"indexed, {r['points']} points"
        print(f"  {r['room_alias'] or r['room_id']}: {shown} {r['detail']}".rstrip())
    return 0


async def purge(cfg: Config, *, room: str, from_ts: int, to_ts: int, as_json: bool) -> int:
    from bot.http_api import purge_document

    if to_ts < from_ts:
        raise QueryError("to", "is before --from")
    try:
        async with _adapters(cfg) as (reader, store, embedder):
            assert embedder is not None
            room_id = await resolve_room(reader, room)
            purges = PurgeLog(purge_log_path(cfg.index, cfg.base_dir))
            writer = Writer(cfg, reader, store, embedder, purges=purges)
            doc = purge_document(await writer.add_tombstone(room_id, from_ts, to_ts))
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        doc = await _purge_through_the_service(cfg, held, room, from_ts, to_ts)
    if as_json:
        _print_json(doc)
    else:
        print(
            f"purge tombstone written for {doc['room_id']} [{doc['from_ts']}, {doc['to_ts']}]; "
            "the next refresh applies it"
        )
    return 0


async def _purge_through_the_service(
    cfg: Config, held: StoreUnavailable, room: str, from_ts: int, to_ts: int
) -> dict[str, Any]:
    """`muninn run` holds the embedded store: its writer records the purge (loopback endpoint)."""
    from bot.http_api import post_purge, service_url

    if cfg.metrics.port is None:
        raise StoreUnavailable(
            f"{held}. To purge while `muninn run` holds the store, give the service a "
            "loopback port (metrics: {port: 9464} in the config) and restart it: "
            "`muninn purge` then asks it"
        ) from None
    reader = MatrixReader.from_config(cfg)
    try:
        room_id = await resolve_room(reader, room)
    finally:
        await reader.close()
    body = {"room_id": room_id, "from_ts": from_ts, "to_ts": to_ts}
    try:
        return await post_purge(service_url(cfg.metrics), body)
    except StoreUnavailable as e:
        raise StoreUnavailable(f"{held}; {e}") from None


async def import_export(cfg: Config, *, path: Path, as_json: bool) -> int:
    """Index a room export through the same pipeline and rules as a refresh."""
    user_id = cfg.reader.user_id if cfg.reader else f"@muninn:{cfg.homeserver.server_name}"
    source = await asyncio.to_thread(ExportReader.from_file, path, user_id=user_id)
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    embedder = make_embedder(cfg.embedder)
    try:
        writer = Writer(cfg, source, store, embedder)
        report = await writer.refresh(only=[source.room_id], progress=_progress_bar())
    finally:
        await embedder.close()
        await asyncio.to_thread(store.close)
    _print_report(report, as_json=as_json)
    refused = [r for r in report.rooms if r.verdict != "eligible"]
    return EXIT_REFUSED if refused else 0
