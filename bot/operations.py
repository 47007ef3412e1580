"""The CLI's commands, wired to the adapters: one function a command, printing its result.

Adapters are built here (the imperative shell); policy lives in `ingest.refresh` (the one
writer) and `ingest.search` (the one read path).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.commands import PinsCommand
from bot.pins import BoardReader
from bot.replies import ReplyTo, pins_reply
from bot.roomlog import RoomLog, within_text
from bot.visibility import ANYONE
from ingest.config import Config
from ingest.embed import Embedder, make_embedder
from ingest.errors import MatrixForbidden, MatrixNotFound, QueryError, StoreUnavailable
from ingest.export import (
    ExportReader,
    export_check,
    export_record,
    exported_rooms,
)
from ingest.matrix import MatrixReader, Retry
from ingest.purges import PurgeLog, purge_log_path
from ingest.records import (
    COMPAT_KEY,
    CURSOR_PREFIX,
    EXPORT_PREFIX,
    REFUSED_PREFIX,
    RETRY_PREFIX,
    TOMBSTONE_PREFIX,
)
from ingest.refresh import RefreshReport, RoomReport, Writer
from ingest.revalidate import LiveCheck, SourcedCheck
from ingest.rooms import RoomCache
from ingest.scope import RoomScope, decide, puppet_in_events
from ingest.search import Searcher, SearchQuery, SearchResult
from ingest.store import PointFilter, Store, open_store
from ingest.types import Refusal, RoomID, Verdict

# `muninn import` of a room that scope refuses (a DM, a bridged room): nothing was indexed.
EXIT_REFUSED = 3
# `muninn search` revalidates every hit; a homeserver that cannot be reached fails the search
# within ~3 s, naming it (two tries 0.5 s apart, 1 s to connect), instead of ~8 s of retries.
# A homeserver that accepts the connection but hangs is given REVALIDATE_TIMEOUT a request.
REVALIDATE_RETRY = Retry(attempts=2, backoff=0.5, max_backoff=0.5)
REVALIDATE_CONNECT = 1.0
REVALIDATE_TIMEOUT = 10.0


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
    if report.failed:
        # The other rooms are done; exit non-zero so that a cron job notices the rest.
        names = ", ".join(r.room_id for r in report.failed)
        print(
            f"muninn: {len(report.failed)} room(s) failed, retried next pass: {names}",
            file=sys.stderr,
        )
        return 1
    return 0


def _print_report(report: RefreshReport, *, as_json: bool) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\n")  # end the progress line
    if as_json:
        _print_json(report.as_json())
    else:
        for r in report.rooms:
            print(_room_line(r))
        if report.switch_held:
            print(f"generation {report.generation} not switched in yet: {report.switch_held}")


def _room_line(r: RoomReport) -> str:
    name = r.room_alias or r.room_id
    if r.error is not None:
        return (
            f"{name}: FAILED ({r.failed_passes} pass(es) in a row), retried next pass: {r.error}"
        )
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
            fail_fast(reader)
            room_ids = [await resolve_room(reader, r) for r in rooms] if rooms else None
            query = SearchQuery.build(
                texts,
                room_ids=room_ids,
                senders=senders,
                after_ts=after,
                before_ts=before,
                limit=limit,
            )
            searcher = Searcher(
                store,
                embedder,
                server_name=cfg.homeserver.server_name,
                live_check=await revalidation(cfg, reader, store),
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


def fail_fast(reader: MatrixReader) -> None:
    """The CLI's search asks the homeserver only to revalidate: fail soon, naming it."""
    reader.retry = REVALIDATE_RETRY
    reader.connect_timeout = REVALIDATE_CONNECT
    reader.timeout = REVALIDATE_TIMEOUT


async def revalidation(cfg: Config, reader: MatrixReader, store: Store) -> SourcedCheck:
    """Each room's hits checked against what it was built from: rooms `muninn import` indexed
    (and no refresh has since read from the homeserver) against their export, the rest against
    the homeserver. An operator can index and search an old room's export with no homeserver."""
    scope = RoomScope.from_config(cfg.scope, cfg.homeserver.server_name)

    def records() -> dict[RoomID, Path]:
        active = store.active()
        if active is None:
            return {}
        col = store.open(active, dense_dim=None, create=False)
        exports = col.list_meta(EXPORT_PREFIX)
        if not exports:
            return {}
        cursors = col.list_meta(CURSOR_PREFIX)
        return exported_rooms(exports, cursors, cursor_prefix=CURSOR_PREFIX)

    def loader(path: Path) -> Callable[[], Awaitable[LiveCheck]]:
        return lambda: export_check(path, user_id=reader.user_id, scope=scope)

    exports = await asyncio.to_thread(records)
    live = LiveCheck(reader, RoomCache(reader, scope))
    return SourcedCheck(live, {room: loader(path) for room, path in exports.items()})


def _service_token(cfg: Config, held: StoreUnavailable, verb: str) -> str:
    """The running service's listener token, for `muninn search`/`purge` while it holds the
    embedded store; the error names how to reach it when it has no listener."""
    from bot.http_api import read_token, token_path

    if cfg.metrics.port is None:
        raise StoreUnavailable(
            f"{held}. To {verb} while `muninn run` holds the store, give the service a "
            "loopback port (metrics: {port: 9464} in the config) and restart it: "
            f"`muninn {verb}` then asks it"
        ) from None
    path = token_path(cfg)
    assert path is not None  # only the embedded store is ever held
    return read_token(path)


async def _search_the_service(
    cfg: Config,
    held: StoreUnavailable,
    texts: Sequence[str],
    rooms: Sequence[str] | None,
    **body: Any,
) -> SearchResult:
    """`muninn run` holds the embedded store: ask its loopback search endpoint instead."""
    from bot.http_api import post_search, result_from_json, service_url

    token = _service_token(cfg, held, "search")
    reader = MatrixReader.from_config(cfg)
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
        retries = await asyncio.to_thread(col.list_meta, RETRY_PREFIX) if col else {}
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
            failing = retries.get(RETRY_PREFIX + room_id) or {}
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
                    "error": failing.get("error"),
                    "failed_passes": int(failing.get("failed_passes", 0)),
                }
            )
        total = await asyncio.to_thread(col.count) if col else 0
        command = await _command_room(cfg, reader, me, direct)
        doc = {
            "reader": me,
            "generation": active,
            "versions": compat,
            "points": total,
            "rooms": rooms,
            "command_room": command,
        }
    if as_json:
        _print_json(doc)
        return 0
    print(f"reader {me}; generation {active}; {total} points")
    for r in rooms:
        shown = r["verdict"] if r["verdict"] != "eligible" else f"indexed, {r['points']} points"
        if r["error"]:
            shown += f"; FAILED {r['failed_passes']} pass(es) in a row, retried: {r['error']}"
        print(f"  {r['room_alias'] or r['room_id']}: {shown} {r['detail']}".rstrip())
    if command is not None:
        served = "served" if command["serving"] else f"NOT served, {command['verdict']}:"
        print(f"command room {command['room']}: {served} {command['detail']}".rstrip())
    return 0


async def _command_room(
    cfg: Config, reader: MatrixReader, me: str, direct: set[RoomID]
) -> dict[str, Any] | None:
    """Whether `bot.command_room` would be served (`RoomScope.serves_commands`), and why not."""
    room = cfg.bot.command_room
    if room is None:
        return None
    doc: dict[str, Any] = {"room": room, "room_id": None, "serving": False}
    try:
        room_id = await resolve_room(reader, room)
        state = await reader.room_state(room_id)
    except QueryError as e:
        return {**doc, "verdict": str(Refusal.NOT_JOINED), "detail": str(e)}
    except (MatrixNotFound, MatrixForbidden):
        return {**doc, "verdict": str(Refusal.NOT_JOINED), "detail": "the bot is not in it"}
    scope = RoomScope.from_config(
        cfg.scope, cfg.homeserver.server_name, cfg.bot.command_room_askers
    )
    verdict = scope.serves_commands(state, direct, {me})
    return {
        **doc,
        "room_id": room_id,
        "serving": verdict.eligible,
        "verdict": "eligible" if verdict.eligible else str(verdict.reason),
        "detail": verdict.detail,
    }


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

    token = _service_token(cfg, held, "purge")
    reader = MatrixReader.from_config(cfg)
    try:
        room_id = await resolve_room(reader, room)
    finally:
        await reader.close()
    body = {"room_id": room_id, "from_ts": from_ts, "to_ts": to_ts}
    try:
        return await post_purge(service_url(cfg.metrics), token, body)
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
        if all(r.verdict == "eligible" for r in report.rooms):
            # What `muninn search` revalidates this room's hits against (not the homeserver,
            # where the reader may never have been in the room).
            col = await writer.open()
            key, record = EXPORT_PREFIX + source.room_id, export_record(path)
            await asyncio.to_thread(col.put_meta, key, record)
    finally:
        await embedder.close()
        await asyncio.to_thread(store.close)
    _print_report(report, as_json=as_json)
    refused = [r for r in report.rooms if r.verdict != "eligible"]
    return EXIT_REFUSED if refused else 0


async def pins(cfg: Config, *, room: str, as_json: bool) -> int:
    """`muninn pins ROOM`: the room's board as the bot folds it (its `!pins` in the command
    room), from the homeserver's log; purged messages stay hidden. Needs no embedder, and reads
    the purges from their file, so it works beside a running service."""
    reader = MatrixReader.from_config(cfg)
    try:
        room_id = await resolve_room(reader, room)
        scope = RoomScope.from_config(
            cfg.scope, cfg.homeserver.server_name, cfg.bot.command_room_askers
        )
        info = await RoomCache(reader, scope).get(room_id)
        if not info.verdict.eligible:
            raise QueryError(
                "room", f"{room} is refused ({info.verdict.reason}: {info.verdict.detail})"
            )
        bound = cfg.bot.transcript_limit
        raw, cut = within_text(await reader.latest(room_id, bound))
        if (puppet := puppet_in_events(raw, scope)) is not None:
            raise QueryError("room", f"{room} is refused (bridged: {puppet} is a bridge puppet)")
        stones = await _recorded_purges(cfg)
        room_log = RoomLog(room_id, raw, bound, cut).without_purged(stones)
        boards = BoardReader(
            reader.get_event,
            str(await reader.whoami()),
            cfg.bot.prefix,
            cfg.homeserver.server_name,
        )
        view = await boards.view(room_log, stones, info, PinsCommand(), ANYONE, True)
    finally:
        await reader.close()
    if as_json:
        _print_json(view.as_json())
    else:
        print(pins_reply(ReplyTo(room_id, "", None), view, filtered=False)["body"])
    return 0


async def _recorded_purges(cfg: Config) -> list[Mapping[str, Any]]:
    """The purge file's records, and the store's when no service holds it (a running service
    has synced the file with the store when it opened it)."""
    stones: list[Mapping[str, Any]] = list(
        await asyncio.to_thread(PurgeLog(purge_log_path(cfg.index, cfg.base_dir)).read)
    )
    try:
        store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    except StoreUnavailable:
        return stones
    try:
        active = await asyncio.to_thread(store.active)
        if active is not None:
            col = await asyncio.to_thread(store.open, active, dense_dim=None, create=False)
            stones += (await asyncio.to_thread(col.list_meta, TOMBSTONE_PREFIX)).values()
    finally:
        await asyncio.to_thread(store.close)
    return stones
