"""`muninn refresh`, `muninn purge` and `muninn import`: the commands that run the one writer."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.chat.commands.dates import shown
from bot.chat.replies.words import plural
from bot.config import ServiceConfig
from bot.operations.common import (
    HELD,
    adapters,
    cli_reader,
    print_json,
    resolve_room,
    service_token,
)
from bot.operations.progress import Whereabouts, progress_display
from bot.service import wiring
from ingest.embed import make_embedder
from ingest.errors import MatrixError, QueryError, StoreUnavailable
from ingest.index.facts import read_facts
from ingest.index.records import (
    EXPORT_PREFIX,
    export_record,
)
from ingest.index.refresh import Writer
from ingest.index.reports import RefreshReport, RoomReport
from ingest.matrix import MatrixReader
from ingest.matrix.export import ExportReader
from ingest.rules.events import normalize
from ingest.store import AsyncStore, open_async
from ingest.types import Message, RoomID

# `muninn import` of a room that scope refuses (a DM, a bridged room): nothing was indexed.
EXIT_REFUSED = 3


async def refresh(cfg: ServiceConfig, *, rooms: Sequence[str] | None, as_json: bool) -> int:
    async with adapters(cfg) as (reader, store, embedder):
        assert embedder is not None
        only = [await resolve_room(reader, r) for r in rooms] if rooms else None
        writer = wiring.writer(cfg, reader, store, embedder)
        report = await _pass(writer, only)
    _print_report(report, as_json=as_json)
    if report.failed:
        # The other rooms are done; exit non-zero so that a cron job notices the rest.
        names = ", ".join(r.room_id for r in report.failed)
        print(
            f"muninn: {plural(len(report.failed), 'room')} failed, retried next pass: {names}",
            file=sys.stderr,
        )
        return 1
    return 0


async def _pass(
    writer: Writer, only: Sequence[RoomID] | None, total_events: int | None = None
) -> RefreshReport:
    """One writer pass with its progress line; interrupted (Ctrl-C), it says how far it got
    before `bot.cli.main` says that nothing is lost and how to go on."""
    where = Whereabouts()
    try:
        with progress_display(total_events) as progress:
            return await writer.refresh(only=only, progress=where.noting(progress))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(f"muninn: {where.stopped()}", file=sys.stderr)
        raise


def _print_report(report: RefreshReport, *, as_json: bool) -> None:
    if as_json:
        print_json(report.as_json())
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
    # "now N points" is what `muninn status` counts; a window is written again as messages
    # join it, so the writes are more (issue 44: `windows +153` beside `150 points`).
    held = "" if r.points is None else f"now {plural(r.points, 'point')} "
    writes = f"{plural(r.windows_written, 'window write')}, {plural(r.windows_deleted, 'delete')}"
    return (
        f"{name}: read {r.events_read}, indexed {r.indexed}, edits {r.edits_applied}, "
        f"redactions {r.redactions_applied}, {held}({writes}), skipped: {skipped}"
    )


# `purge --dry-run` reads at most this many of the room's newest events to count the range.
PURGE_COUNT_BOUND = 20_000


async def purge(
    cfg: ServiceConfig,
    *,
    room: str,
    from_ts: int,
    to_ts: int,
    as_json: bool,
    dry_run: bool = False,
    confirm: bool = True,
) -> int:
    """Record a purge tombstone; `dry_run` only counts the messages the range covers, and on a
    terminal (`confirm`, no --json) the count is shown and the operator asked first: a purge
    is permanent (issue 36 item 4). A range that ends in the future ends now; a range with no
    message the index holds or would hold writes nothing (issue 44)."""
    from bot.service.http_api import purge_document

    to_ts = _until_now(from_ts, to_ts)
    reader = cli_reader(cfg)
    try:
        room_id = await resolve_room(reader, room)
        counted, whole = await _counted(reader, room_id, from_ts, to_ts, cfg.bot.prefix, dry_run)
    finally:
        await reader.close()
    named = room if room == room_id else f"{room} ({room_id})"
    span = f"{named} from {shown(from_ts)} to {shown(to_ts)}"
    how_many = (
        "the messages"
        if counted is None
        else ("" if whole else "at least ") + plural(counted, "message")
    )
    nothing = counted == 0 and whole
    if dry_run:
        if as_json:
            print_json(
                {
                    "room_id": room_id,
                    "from_ts": from_ts,
                    "to_ts": to_ts,
                    "messages": counted,
                    "counted_all": whole,
                    "dry_run": True,
                }
            )
        else:
            what = (
                f"nothing to purge in {span}" if nothing else f"would purge {how_many} of {span}"
            )
            print(f"{what}; dry run: nothing written")
        return 0
    if nothing:
        if as_json:
            print_json({"room_id": room_id, "from_ts": from_ts, "to_ts": to_ts, "key": None})
        else:
            print(
                f"nothing to purge: no message of {span} is indexed or would be; nothing written"
            )
        return 0
    if confirm and not as_json and sys.stdin.isatty():
        # The loop runs this command alone: blocking on the operator's answer holds nothing.
        answer = input(f"purge {how_many} of {span} from the index for good? [y/N] ")  # noqa: ASYNC250
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing purged")
            return 1
    try:
        async with adapters(cfg) as (reader, store, embedder):
            assert embedder is not None
            writer = wiring.writer(cfg, reader, store, embedder)
            doc = purge_document(await writer.add_tombstone(room_id, from_ts, to_ts))
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        doc = await _purge_through_the_service(cfg, held, room_id, from_ts, to_ts)
    if as_json:
        print_json(doc)
    else:
        print(
            f"purge tombstone written for {named} from {shown(doc['from_ts'])} to "
            f"{shown(doc['to_ts'])} ({how_many}); the next refresh applies it"
        )
    return 0


def _until_now(from_ts: int, to_ts: int) -> int:
    """`--to`, or now when it is later: a tombstone reaching into the future would keep the
    messages still to be sent in it out of the index for good (issue 44: `--to tomorrow`)."""
    now = int(time.time() * 1000)
    if to_ts < from_ts:
        raise QueryError("to", "is before --from")
    if from_ts > now:
        raise QueryError("from", f"is later than now ({shown(now)}): nothing was sent in it yet")
    if to_ts <= now:
        return to_ts
    print(
        f"note: --to {shown(to_ts)} is in the future; the purge ends now, {shown(now)} (a purge "
        "covers what was sent, never what is still to come)",
        file=sys.stderr,
    )
    return now


async def _counted(
    reader: MatrixReader, room_id: RoomID, from_ts: int, to_ts: int, prefix: str, dry_run: bool
) -> tuple[int | None, bool]:
    """`messages_in_range`; a purge (not a dry run) goes on without the count, saying so."""
    try:
        return await messages_in_range(reader, room_id, from_ts, to_ts, command_prefix=prefix)
    except MatrixError as e:
        if dry_run:
            raise
        print(f"muninn: cannot count the range's messages: {e}", file=sys.stderr)
        return None, False


async def messages_in_range(
    reader: MatrixReader, room_id: RoomID, from_ts: int, to_ts: int, *, command_prefix: str
) -> tuple[int, bool]:
    """The messages sent in [from_ts, to_ts] that the index holds or would hold (rule 9's
    `normalize`: not Muninn's own replies, notices, commands, edits or redacted ones), read
    back from the newest up to `PURGE_COUNT_BOUND` events, and whether the read reached back
    past `from_ts`."""
    events = await reader.latest(room_id, PURGE_COUNT_BOUND)
    own = frozenset({reader.user_id})
    count = 0
    for event in events:
        said = normalize(event, own_user_ids=own, command_prefix=command_prefix, room_id=room_id)
        count += isinstance(said, Message) and from_ts <= said.ts <= to_ts
    oldest = min((int(e.get("origin_server_ts", 0)) for e in events), default=0)
    return count, len(events) < PURGE_COUNT_BOUND or oldest < from_ts


async def _purge_through_the_service(
    cfg: ServiceConfig, held: StoreUnavailable, room: str, from_ts: int, to_ts: int
) -> dict[str, Any]:
    """`muninn run` holds the embedded store: its writer records the purge (loopback endpoint)."""
    from bot.service.http_api import post_purge, service_url

    token = service_token(cfg, held, "purge")
    reader = cli_reader(cfg)
    try:
        room_id = await resolve_room(reader, room)
    finally:
        await reader.close()
    body = {"room_id": room_id, "from_ts": from_ts, "to_ts": to_ts}
    try:
        return await post_purge(service_url(cfg.metrics), token, body)
    except StoreUnavailable as e:
        raise StoreUnavailable(f"{held}; {e}") from None


async def _refuse_an_import_a_pass_would_purge(
    cfg: ServiceConfig, store: AsyncStore, room_id: RoomID
) -> None:
    """An export of a room the reader has not joined, into a store homeserver passes write:
    the next `muninn refresh`/`run` would purge it ("not_joined") — refused, naming the recipe."""
    facts = await store.run(read_facts)
    written = [r for r in facts.homeserver_rooms if r != room_id]
    if not written:
        return  # an empty store or an archive of exports: no homeserver pass writes here
    reader = cli_reader(cfg)
    try:
        joined = room_id in await reader.joined_rooms()
    except MatrixError:
        joined = False  # cannot tell: the pass would purge it unless the reader is in it
    finally:
        await reader.close()
    if joined:
        return
    raise QueryError(
        "import",
        f"this store's index is written by homeserver passes ({len(written)} room(s) read from "
        f"{cfg.homeserver.url}), and the reader has not joined {room_id}: the next `muninn "
        "refresh` or `muninn run` would purge the import again. Import into an archive store "
        "instead: a config of its own with its own index.store.path (deploy/README.md, "
        "'Import an old room')",
    )


async def import_export(cfg: ServiceConfig, *, path: Path, as_json: bool) -> int:
    """Index a room export through the same pipeline and rules as a refresh."""
    user_id = cfg.reader.user_id if cfg.reader else f"@muninn:{cfg.homeserver.server_name}"
    source = await ExportReader.load(path, user_id=user_id)
    store = await open_async(cfg.index, cfg.base_dir)
    try:
        await _refuse_an_import_a_pass_would_purge(cfg, store, source.room_id)
    except BaseException:
        await store.close()
        raise
    embedder = make_embedder(cfg.embedder)
    try:
        writer = wiring.writer(cfg, source, store.sync, embedder)
        # The file is counted: the line has a bar and the time left.
        report = await _pass(writer, [source.room_id], len(source.events))
        if all(r.verdict == "eligible" for r in report.rooms):
            # What `muninn search` revalidates this room's hits against (not the homeserver,
            # where the reader may never have been in the room).
            col = await writer.opened()
            key, record = EXPORT_PREFIX + source.room_id, export_record(path)
            await col.put_meta(key, record)
    finally:
        await embedder.close()
        await store.close()
    _print_report(report, as_json=as_json)
    refused = [r for r in report.rooms if r.verdict != "eligible"]
    return EXIT_REFUSED if refused else 0
