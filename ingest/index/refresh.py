"""`ingest.index.refresh`: the one writer. Homeserver → scope → events → scrub → windows → store.

For each eligible room it walks `/messages` forward from the room's cursor, one page at a
time. A page's events are applied in order to a `WindowSet`; the changed windows are embedded
(only those whose content hash changed), upserted, superseded points deleted, and only then
is the cursor advanced. A crash anywhere leaves the cursor at the last acknowledged page, and
replaying a page is idempotent (see `ingest.index.windows`). Rooms that left scope are purged.

One room's failure is that room's: the pass records it (`retry:` meta, the report, the log),
finishes the other rooms and retries it next pass. Only what every room shares (the store,
the embedder, the reader's token, a homeserver that is down) ends the pass. The paths that
take a room out of a pass are `ingest.index.refusals`; the report records, `ingest.index.reports`;
an operator's purge applied to the room's windows, `ingest.index.tombstones`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ingest.config import Config
from ingest.embed import Embedder
from ingest.errors import (
    EmbedUnavailable,
    MatrixAuthError,
    MatrixUnavailable,
    StoreError,
)
from ingest.index.chunker import Names
from ingest.index.generations import Generations
from ingest.index.pages import apply_events
from ingest.index.points import CollectionLookup, commit_changes
from ingest.index.records import (
    CURSOR_PREFIX,
    REFUSED_PREFIX,
    RETRY_PREFIX,
    Tombstone,
    cursor_mark,
    cursor_record,
    puppet_refusal,
)
from ingest.index.refusals import purge_room, refuse_bridged, room_failed
from ingest.index.reports import RefreshReport, RoomReport
from ingest.index.tombstones import apply_tombstones, forget_removed, mark_applied, room_stones
from ingest.index.walkbounds import bounded_walk, healing_walk
from ingest.index.windows import ChunkParams, WindowSet
from ingest.matrix import ClientEvent, Page
from ingest.matrix.rooms import with_command_room
from ingest.rules.scope import RoomScope, puppet_in_events
from ingest.store import AsyncCollection, Collection, PointFilter, Store
from ingest.store.purges import PurgeLog
from ingest.types import (
    Refusal,
    RoomID,
    RoomState,
    UserID,
    Verdict,
)

log = logging.getLogger("muninn.index")


@dataclass(frozen=True)
class Tick:
    """Where a pass stands, as a room begins (`pages` 0) and after each of its pages: room
    `room` of `rooms`, `events` read in it."""

    room_id: RoomID
    room_alias: str | None
    room: int  # from 1
    rooms: int
    events: int
    pages: int = 0  # the room's pages written so far in this pass


Progress = Callable[[Tick], None]


def _numbered(progress: Progress | None, room: int, rooms: int) -> Progress | None:
    """`progress`, with the room's place in the pass filled in."""
    if progress is None:
        return None
    return lambda tick: progress(replace(tick, room=room, rooms=rooms))


class RoomSource(Protocol):
    """What the writer reads: the homeserver (`MatrixReader`) or a room export (`ExportReader`)."""

    async def whoami(self) -> UserID: ...
    async def joined_rooms(self) -> list[RoomID]: ...
    async def direct_rooms(self) -> set[RoomID]: ...
    async def resolve_alias(self, alias: str) -> RoomID | None: ...
    async def room_state(self, room_id: RoomID | str) -> RoomState: ...
    def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]: ...
    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None: ...
    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[ClientEvent]: ...


class Writer:
    """The one writer: owns chunks, vectors, cursors and the application of purge tombstones."""

    def __init__(
        self,
        cfg: Config,
        reader: RoomSource,
        store: Store,
        embedder: Embedder,
        *,
        purges: PurgeLog | None = None,
        command_prefix: str = "!",
        command_room: str | None = None,
    ) -> None:
        """`command_prefix`: the bot's, whose commands are never indexed (rule 9);
        `command_room`: the room `bot.command_room` names (id or alias), left out of the index
        (rule 2); None: none, or the operator indexes it (`bot.index_command_room`)."""
        self.cfg = cfg
        self.command_prefix = command_prefix
        self.reader = reader
        self.store = store
        self.embedder = embedder
        self.generations = Generations(store, embedder, cfg.index.collection, purges)
        self._refusals_logged: set[tuple[str, str]] = set()
        self._rules = RoomScope.from_config(
            cfg.scope, cfg.homeserver.server_name, command_room=command_room
        )
        self._scope = self._rules  # and the id the command room's alias names, once asked
        self._command_room, self._command_asked = command_room, False
        self._own: frozenset[str] = frozenset()

    # ------------------------------------------------------------ the generation

    @property
    def generation(self) -> str:
        """The name of the generation this writer writes (known after `open()`)."""
        return self.generations.generation

    @property
    def collection(self) -> Collection | None:
        return self.generations.collection

    @collection.setter
    def collection(self, col: Collection | None) -> None:
        self.generations.collection = col  # tests put a faulty collection in its place

    @property
    def compat(self) -> dict[str, Any]:
        return self.generations.compat

    async def open(self) -> Collection:
        """Open (or create) this process's generation (`Generations.open`)."""
        return await self.generations.open()

    async def opened(self) -> AsyncCollection:
        """`open()`, behind the store's async facade."""
        return await self.generations.opened()

    async def add_tombstone(self, room_id: RoomID, from_ts: int, to_ts: int) -> Tombstone:
        """Record an operator's purge in every generation a search may read (`Generations`)."""
        return await self.generations.add_tombstone(room_id, from_ts, to_ts)

    # ------------------------------------------------------------ the pass

    async def refresh(
        self, only: Sequence[RoomID] | None = None, progress: Progress | None = None
    ) -> RefreshReport:
        """One writer pass over every joined room (or `only` these), purging what left scope."""
        col = await self.generations.opened()
        report = RefreshReport(generation=self.generation)
        self._own = frozenset({await self.reader.whoami()})
        if only is None or not self._command_asked:  # an alias may move: asked every full pass
            self._scope = await with_command_room(self._rules, self.reader, self._command_room)
            self._command_asked = True
        joined = set(await self.reader.joined_rooms())
        direct = await self.reader.direct_rooms()
        indexed = set((await col.list_meta(CURSOR_PREFIX)).keys())
        indexed_rooms = {RoomID(k.removeprefix(CURSOR_PREFIX)) for k in indexed}
        retries = await col.list_meta(RETRY_PREFIX)
        failing = {RoomID(k.removeprefix(RETRY_PREFIX)) for k in retries}
        targets = sorted(set(only) if only is not None else joined | indexed_rooms | failing)
        for k, room_id in enumerate(targets, start=1):
            at = _numbered(progress, k, len(targets))
            if at is not None:  # named from its start: its state and first page take seconds
                at(Tick(room_id, None, k, len(targets), 0))
            try:
                room_report = await self._refresh_target(
                    col, room_id, joined, direct, indexed_rooms, at
                )
            except Exception as e:
                if isinstance(e, StoreError | EmbedUnavailable | MatrixAuthError):
                    raise  # shared by every room: the pass cannot go on
                if isinstance(e, MatrixUnavailable):
                    await self.reader.whoami()  # raises too if the homeserver itself is down
                room_report = await room_failed(col, room_id, e, retries, only is None)
            else:
                if room_id in failing:
                    await col.delete_meta(RETRY_PREFIX + room_id)
                    log.info("room %s refreshed again after failing", room_id)
            report.rooms.append(room_report)
        if only is None:
            switch = await self.generations.complete(report.failed)
            report.activated, report.switch_held = switch.activated, switch.held
        else:
            await col.flush()
        return report

    async def _refresh_target(
        self,
        col: AsyncCollection,
        room_id: RoomID,
        joined: set[RoomID],
        direct: set[RoomID],
        indexed_rooms: set[RoomID],
        progress: Progress | None,
    ) -> RoomReport:
        """One room of the pass: refused (and purged if indexed), or refreshed."""
        state = await self.reader.room_state(room_id) if room_id in joined else None
        verdict = self._verdict(room_id, state, direct)
        if not verdict.eligible:
            room_report = RoomReport(room_id, verdict=str(verdict.reason), detail=verdict.detail)
            if room_id in indexed_rooms:
                await purge_room(col, room_id, room_report)
            return room_report
        assert state is not None
        marker = await self._puppet_marker(col, room_id)
        if marker is not None:
            # A puppet spoke here once (history does not change): refused without a read.
            refused = RoomReport(room_id, verdict=str(Refusal.BRIDGED), detail=marker["detail"])
            if room_id in indexed_rooms:  # the purge after the marker was cut short
                await purge_room(col, room_id, refused)
            return refused
        return await self.refresh_room(col, state, progress)

    async def _puppet_marker(self, col: AsyncCollection, room_id: RoomID) -> dict[str, Any] | None:
        marker = await col.get_meta(REFUSED_PREFIX + room_id)
        return puppet_refusal(marker, self._scope.is_puppet)

    async def refused_by_puppet(self, room_id: RoomID) -> str | None:
        """The bridge puppet whose message got this room refused for good, or None."""
        return await self.generations.refused_by_puppet(room_id, self._scope.is_puppet)

    def _verdict(
        self, room_id: RoomID, state: RoomState | None, direct: set[RoomID] | frozenset[RoomID]
    ) -> Verdict:
        if state is None:
            return Verdict(room_id, Refusal.NOT_JOINED, "the reader is not joined to this room")
        verdict = self._scope.decide(state, direct)
        if not verdict.eligible and (room_id, str(verdict.reason)) not in self._refusals_logged:
            self._refusals_logged.add((room_id, str(verdict.reason)))
            log.warning(
                "refusing room %s: %s (%s)",
                room_id,
                verdict.reason,
                verdict.detail,
                extra={"room_id": room_id, "reason": str(verdict.reason)},
            )
        return verdict

    # ------------------------------------------------------------ one room

    async def refresh_room(
        self, col: AsyncCollection, state: RoomState, progress: Progress | None = None
    ) -> RoomReport:
        """Walk one eligible room from its cursor to the end of its timeline."""
        room_id = state.room_id
        report = RoomReport(room_id, room_alias=state.canonical_alias)
        if progress is not None:
            progress(Tick(room_id, state.canonical_alias, 1, 1, 0))
        names = dict(state.display_names)
        cursor = await col.get_meta(CURSOR_PREFIX + room_id)
        token: str | None = (cursor or {}).get("token")
        tails: dict[str, str] = dict((cursor or {}).get("tails") or {})
        last: str | None = (cursor or {}).get("last_event_id")
        stones = await room_stones(col, room_id)
        pending_stones = [s for s, applied in stones if not applied]
        if pending_stones:
            tails = await apply_tombstones(
                col,
                room_id,
                pending_stones,
                tails,
                self._params(),
                report,
                lambda ws: self._commit(col, ws, state, names, report),
            )
            last = None  # it may name a message the purge covers: the next page sets it again
            await self._save_cursor(col, room_id, token, tails, last)
            forget_removed(col, report)
            await mark_applied(col, pending_stones)
        every_stone = [s for s, _ in stones]
        if cursor is None:
            # Before the first upsert: a room holding points always has a cursor, so a room
            # that leaves scope after a crash in its first page is still found and purged.
            await self._save_cursor(col, room_id, token, tails, last)
        walk = healing_walk(self.reader, room_id, token, self.cfg.refresh.page_size, report)
        pages = 0
        async for page in bounded_walk(walk, report):
            if report.cursor_reset and not pages:  # read again from the room's start
                token, tails, last = None, {}, None
            report.events_read += len(page.events)
            puppet = puppet_in_events(page.events, self._scope)
            if puppet is not None:
                await refuse_bridged(col, self.generations, room_id, puppet, report)
                return report
            ws = WindowSet(room_id, CollectionLookup(col.sync, room_id), self._params(), tails)
            await apply_events(
                ws,
                page.events,
                every_stone,
                report,
                reader=self.reader,
                own_user_ids=self._own,
                command_prefix=self.command_prefix,
            )
            written = report.windows_written
            await self._commit(col, ws, state, names, report)
            token, tails = page.end or token, ws.tails
            last = cursor_mark(page.events, every_stone, last)
            # Only now, with the page's points acknowledged, does the cursor move past it.
            await self._save_cursor(col, room_id, token, tails, last)
            forget_removed(col, report)
            if report.windows_written > written:
                # Not for durability (the WAL has it): qdrant-edge's flush of a long unflushed
                # segment takes memory in proportion, so a backfill flushes as it goes
                # (bench/RESULTS.md §10).
                await col.flush()
            pages += 1
            if progress is not None:
                progress(Tick(room_id, state.canonical_alias, 1, 1, report.events_read, pages))
        # What `muninn status` counts for the room (windows written count rewrites too).
        report.points = await col.count(PointFilter(room_ids=(room_id,)))
        return report

    async def _save_cursor(
        self,
        col: AsyncCollection,
        room_id: RoomID,
        token: str | None,
        tails: Mapping[str, str],
        last_event_id: str | None,
    ) -> None:
        record = cursor_record(token, tails, last_event_id)
        await col.put_meta(CURSOR_PREFIX + room_id, record)

    def _params(self) -> ChunkParams:
        return ChunkParams(self.cfg.chunker.gap_seconds, self.cfg.chunker.max_bytes)

    async def _commit(
        self,
        col: AsyncCollection,
        ws: WindowSet,
        state: RoomState,
        names: Names,
        report: RoomReport,
    ) -> None:
        await commit_changes(
            col,
            ws,
            state,
            names,
            report,
            embedder=self.embedder,
            compat=self.compat,
            max_bytes=self.cfg.chunker.max_bytes,
        )


__all__ = ["RoomSource", "Writer"]
