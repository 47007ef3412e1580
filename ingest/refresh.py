"""`ingest.refresh`: the one writer. Homeserver → scope → events → scrub → windows → store.

For each eligible room it walks `/messages` forward from the room's cursor, one page at a
time. A page's events are applied in order to a `WindowSet`; the changed windows are embedded
(only those whose content hash changed), upserted, superseded points deleted, and only then
is the cursor advanced. A crash anywhere leaves the cursor at the last acknowledged page, and
replaying a page is idempotent (see `ingest.windows`). Rooms that left scope are purged.

One room's failure is that room's: the pass records it (`retry:` meta, the report, the log),
finishes the other rooms and retries it next pass. Only what every room shares (the store,
the embedder, the reader's token, a homeserver that is down) ends the pass.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ingest import lexical
from ingest.chunker import CHUNKER_VERSION, Names, content_hash, window_payload, window_text
from ingest.config import Config
from ingest.embed import Embedder
from ingest.errors import (
    EmbedUnavailable,
    MatrixAuthError,
    MatrixError,
    MatrixUnavailable,
    StoreError,
)
from ingest.events import normalize
from ingest.lexical import LEXICAL_VERSION
from ingest.matrix import Page
from ingest.purges import PurgeLog
from ingest.scope import RoomScope, puppet_in_events
from ingest.scrub import SCRUB_VERSION, scrub
from ingest.store import Collection, PointFilter, PointRecord, Store, generation_name
from ingest.types import (
    Edit,
    EmbedderIdentity,
    EventID,
    Message,
    Redaction,
    Refusal,
    RoomID,
    RoomState,
    Skip,
    SkipReason,
    StoredPoint,
    UserID,
    Verdict,
    Window,
)
from ingest.windows import (
    ChunkParams,
    EditOutcome,
    RevertEdit,
    StoredWindow,
    WindowSet,
    messages_from_payload,
)

log = logging.getLogger("muninn.refresh")

SCHEMA_VERSION = 1
CURSOR_PREFIX = "cursor:"
TOMBSTONE_PREFIX = "tombstone:"
REFUSED_PREFIX = "refused:"  # a room refused by what its timeline showed (a puppet sender)
RETRY_PREFIX = "retry:"  # a room whose last pass failed: why, and how many passes in a row
COMPAT_KEY = "compat"
# A rebuilt generation waits this many passes for a failing room before it switches without
# it (see `Writer._complete_generation`).
SWITCH_AFTER_FAILED_PASSES = 3
ERROR_CHARS = 500  # an error as recorded and reported: scrubbed, and cut to this length

Progress = Callable[[RoomID, int], None]


class RoomSource(Protocol):
    """What the writer reads: the homeserver (`MatrixReader`) or a room export (`ExportReader`)."""

    async def whoami(self) -> UserID: ...
    async def joined_rooms(self) -> list[RoomID]: ...
    async def direct_rooms(self) -> set[RoomID]: ...
    async def room_state(self, room_id: RoomID | str) -> RoomState: ...
    def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]: ...
    async def get_event(self, room_id: RoomID | str, event_id: str) -> dict[str, Any] | None: ...
    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[dict[str, Any]]: ...


def compatibility(identity: EmbedderIdentity) -> dict[str, Any]:
    """What a collection's vectors and payloads depend on; any change builds a new generation."""
    return {
        "schema": SCHEMA_VERSION,
        "embedder": dict(identity.as_record()),
        "chunker": CHUNKER_VERSION,
        "scrub": SCRUB_VERSION,
        "lexical": LEXICAL_VERSION,
    }


@dataclass
class RoomReport:
    """What one refresh did to one room (the `muninn refresh --json` per-room record)."""

    room_id: RoomID
    room_alias: str | None = None
    verdict: str = "eligible"
    detail: str = ""
    events_read: int = 0
    indexed: int = 0
    edits_applied: int = 0
    redactions_applied: int = 0
    purged_messages: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    windows_written: int = 0
    windows_deleted: int = 0
    windows_embedded: int = 0
    purged_room: bool = False
    error: str | None = None  # this pass failed the room; the next pass retries it
    failed_passes: int = 0  # full passes in a row that failed the room (at least 1 if failed)

    def as_json(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "room_alias": self.room_alias,
            "verdict": self.verdict,
            "detail": self.detail,
            "events_read": self.events_read,
            "indexed": self.indexed,
            "edits_applied": self.edits_applied,
            "redactions_applied": self.redactions_applied,
            "purged_messages": self.purged_messages,
            "skipped": dict(sorted(self.skipped.items())),
            "windows_written": self.windows_written,
            "windows_deleted": self.windows_deleted,
            "windows_embedded": self.windows_embedded,
            "purged_room": self.purged_room,
            "error": self.error,
            "failed_passes": self.failed_passes,
        }


@dataclass
class RefreshReport:
    generation: str
    rooms: list[RoomReport] = field(default_factory=list)
    activated: bool = False
    switch_held: str | None = None  # why a complete rebuilt generation did not switch yet

    @property
    def failed(self) -> list[RoomReport]:
        return [r for r in self.rooms if r.error is not None]

    def as_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "activated": self.activated,
            "switch_held": self.switch_held,
            "rooms": [r.as_json() for r in self.rooms],
        }


@dataclass(frozen=True)
class Tombstone:
    room_id: RoomID
    from_ts: int
    to_ts: int

    @property
    def key(self) -> str:
        return f"{TOMBSTONE_PREFIX}{self.room_id}:{self.from_ts}:{self.to_ts}"

    def covers(self, ts: int) -> bool:
        return self.from_ts <= ts <= self.to_ts

    def record(self) -> dict[str, Any]:
        return {"room_id": self.room_id, "from_ts": self.from_ts, "to_ts": self.to_ts}


class CollectionLookup:
    """`WindowLookup` over one room's points in a collection."""

    def __init__(self, collection: Collection, room_id: RoomID) -> None:
        self.collection = collection
        self.room_id = room_id

    def stored(self, point: StoredPoint) -> StoredWindow:
        root = point.payload.get("thread_root")
        return StoredWindow(
            point_id=str(point.id),
            messages=messages_from_payload(self.room_id, point.payload),
            thread_root=EventID(root) if root else None,
            content_hash=point.payload.get("content_hash"),
        )

    def windows_of_events(self, event_ids: Sequence[EventID]) -> list[StoredWindow]:
        flt = PointFilter(room_ids=(self.room_id,), event_ids=tuple(event_ids))
        return [self.stored(p) for p in self.collection.scroll(flt)]

    def window_by_id(self, point_id: str) -> StoredWindow | None:
        found = self.collection.retrieve([point_id])
        return self.stored(found[0]) if found else None


def add_tombstone(collection: Collection, room_id: RoomID, from_ts: int, to_ts: int) -> Tombstone:
    """Record an operator's purge; the next refresh applies it and never re-indexes its events."""
    if to_ts < from_ts:
        raise ValueError(f"purge range ends ({to_ts}) before it starts ({from_ts})")
    stone = Tombstone(room_id, from_ts, to_ts)
    collection.put_meta(
        stone.key, {**stone.record(), "created_ms": int(time.time() * 1000), "applied": False}
    )
    return stone


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
    ) -> None:
        self.cfg = cfg
        # Where readers find the purges without the store (`ingest.purges`); None: store only.
        self.purges = purges
        self.reader = reader
        self.store = store
        self.embedder = embedder
        # Known after `open()` probes the embedder (an Ollama model's dimension needs an answer).
        self.compat: dict[str, Any] = {}
        self.generation = ""
        self.collection: Collection | None = None
        self._previous: str | None = None
        self._refusals_logged: set[tuple[str, str]] = set()
        self._scope = RoomScope.from_config(cfg.scope, cfg.homeserver.server_name)
        self._own: frozenset[str] = frozenset()

    # ------------------------------------------------------------ generations

    async def open(self) -> Collection:
        """Open (or create) this process's generation; activate it at once if none is active."""
        if self.collection is not None:
            return self.collection
        identity = await self.embedder.probe()
        self.compat = compatibility(identity)
        self.generation = generation_name(self.cfg.index.collection, self.compat)
        active = await asyncio.to_thread(self.store.active)
        col = await asyncio.to_thread(
            self.store.open, self.generation, dense_dim=identity.dimension, create=True
        )
        if await asyncio.to_thread(col.get_meta, COMPAT_KEY) is None:
            await asyncio.to_thread(col.put_meta, COMPAT_KEY, {**self.compat, "complete": False})
        if active is None:
            await asyncio.to_thread(self.store.activate, self.generation)
        elif active != self.generation:
            # Never mix vector spaces: build beside the active one, switch when complete.
            log.warning(
                "index %s was built with other versions; building %s beside it",
                active,
                self.generation,
            )
            self._previous = active
            await self._carry_records(active, col)
        await self._copy_purges_to_the_file(col)
        self.collection = col
        return col

    async def _copy_purges_to_the_file(self, col: Collection) -> None:
        """The purge file and the store hold the same purges: those recorded only in the store
        (before the file existed) join the file, and those only in the file (a store lost or
        rebuilt from nothing) join the store, so its refresh never re-indexes them."""
        if self.purges is None:
            return
        filed = {
            Tombstone(RoomID(s["room_id"]), s["from_ts"], s["to_ts"])
            for s in await asyncio.to_thread(self.purges.read)
        }
        stored = {
            Tombstone(RoomID(v["room_id"]), int(v["from_ts"]), int(v["to_ts"]))
            for v in (await asyncio.to_thread(col.list_meta, TOMBSTONE_PREFIX)).values()
        }
        for stone in sorted(stored - filed, key=lambda s: s.key):
            await asyncio.to_thread(self.purges.append, stone.record())
        for stone in sorted(filed - stored, key=lambda s: s.key):
            await asyncio.to_thread(add_tombstone, col, stone.room_id, stone.from_ts, stone.to_ts)

    async def add_tombstone(self, room_id: RoomID, from_ts: int, to_ts: int) -> Tombstone:
        """Record an operator's purge in every generation a search may read, durably.

        The writer's own generation gets the tombstone its next refresh of the room applies
        (points deleted, events never re-indexed). While that generation is being built beside
        an older active one, searches still read the active one, so the tombstone goes there
        too, at once: search's revalidation drops every hit it covers until the switch drops
        that generation whole. The active one's points are left as they are: this writer may
        not embed for it (another embedder identity), and deleting its windows without
        re-chunking would lose their unpurged neighbours. Its copy stays `applied: False`, so
        should that generation ever be written again (the rebuild abandoned), its writer
        applies it like any other.
        """
        if to_ts < from_ts:
            raise ValueError(f"purge range ends ({to_ts}) before it starts ({from_ts})")
        if self.purges is not None:
            # First: from here on every reply hides the range, even with the store down.
            record = Tombstone(room_id, from_ts, to_ts).record()
            await asyncio.to_thread(self.purges.append, record)
        col = await self.open()
        stone = await asyncio.to_thread(add_tombstone, col, room_id, from_ts, to_ts)
        await asyncio.to_thread(col.flush)
        active = await asyncio.to_thread(self.store.active)
        if active is not None and active != self.generation:
            try:
                await asyncio.to_thread(self._add_tombstone_to, active, stone)
            except StoreError:
                if await asyncio.to_thread(self.store.active) == active:
                    raise
                return stone  # the build switched meanwhile and dropped `active`: moot
            log.info(
                "purge of %s [%d, %d] recorded in %s (building) and %s (active)",
                room_id,
                from_ts,
                to_ts,
                self.generation,
                active,
            )
        return stone

    def _add_tombstone_to(self, generation: str, stone: Tombstone) -> None:
        col = self.store.open(generation, dense_dim=None, create=False)
        add_tombstone(col, stone.room_id, stone.from_ts, stone.to_ts)
        col.flush()

    async def _carry_records(self, previous: str, col: Collection) -> None:
        """An operator's purges and the puppet refusals outlive a rebuild: copy them to the new
        one (purges not yet applied there)."""
        old = await asyncio.to_thread(self.store.open, previous, dense_dim=None, create=False)
        for prefix, reset in ((TOMBSTONE_PREFIX, {"applied": False}), (REFUSED_PREFIX, {})):
            for key, value in (await asyncio.to_thread(old.list_meta, prefix)).items():
                if await asyncio.to_thread(col.get_meta, key) is None:
                    await asyncio.to_thread(col.put_meta, key, {**value, **reset})

    async def _complete_generation(self, report: RefreshReport) -> None:
        """End a full pass; switch a rebuilt generation in unless a room failed too recently.

        A room that failed this pass is missing content in a rebuilt generation (its pages
        after the failure, or all of them). The active one still serves that room, so a fault
        that clears by the next pass holds the switch. One that persists for
        `SWITCH_AFTER_FAILED_PASSES` passes does not hold it for ever: every other room would
        keep being served by rules the rebuild exists to replace (an older scrub leaves
        secrets searchable). The switch then goes ahead, never silently: the room's `retry:`
        record moves in with the generation (status shows it, each pass retries it) and the
        report and the log name it.
        """
        col = await self.open()
        active = await asyncio.to_thread(self.store.active)
        recent = [r for r in report.failed if r.failed_passes < SWITCH_AFTER_FAILED_PASSES]
        if active != self.generation and recent:
            report.switch_held = (
                f"{len(recent)} room(s) failed this pass "
                f"({', '.join(r.room_id for r in recent)}); "
                f"{active} serves them until they succeed or fail "
                f"{SWITCH_AFTER_FAILED_PASSES} passes in a row"
            )
            log.warning("not switching to %s yet: %s", self.generation, report.switch_held)
            await asyncio.to_thread(col.flush)
            return
        await asyncio.to_thread(col.put_meta, COMPAT_KEY, {**self.compat, "complete": True})
        await asyncio.to_thread(col.flush)
        if active != self.generation:
            await asyncio.to_thread(self.store.activate, self.generation)
            report.activated = True
            if report.failed:
                log.warning(
                    "switched to %s with %d room(s) failing for %d passes, their content "
                    "incomplete and retried every pass: %s",
                    self.generation,
                    len(report.failed),
                    SWITCH_AFTER_FAILED_PASSES,
                    ", ".join(r.room_id for r in report.failed),
                )
            if self._previous is not None:
                await asyncio.to_thread(self.store.drop, self._previous)
                self._previous = None

    # ------------------------------------------------------------ the pass

    async def refresh(
        self, only: Sequence[RoomID] | None = None, progress: Progress | None = None
    ) -> RefreshReport:
        """One writer pass over every joined room (or `only` these), purging what left scope."""
        col = await self.open()
        report = RefreshReport(generation=self.generation)
        self._own = frozenset({await self.reader.whoami()})
        joined = set(await self.reader.joined_rooms())
        direct = await self.reader.direct_rooms()
        indexed = set((await asyncio.to_thread(col.list_meta, CURSOR_PREFIX)).keys())
        indexed_rooms = {RoomID(k.removeprefix(CURSOR_PREFIX)) for k in indexed}
        retries = await asyncio.to_thread(col.list_meta, RETRY_PREFIX)
        failing = {RoomID(k.removeprefix(RETRY_PREFIX)) for k in retries}
        targets = sorted(set(only) if only is not None else joined | indexed_rooms | failing)
        for room_id in targets:
            try:
                room_report = await self._refresh_target(
                    col, room_id, joined, direct, indexed_rooms, progress
                )
            except Exception as e:
                if isinstance(e, StoreError | EmbedUnavailable | MatrixAuthError):
                    raise  # shared by every room: the pass cannot go on
                if isinstance(e, MatrixUnavailable):
                    await self.reader.whoami()  # raises too if the homeserver itself is down
                room_report = await self._room_failed(col, room_id, e, retries, only is None)
            else:
                if room_id in failing:
                    await asyncio.to_thread(col.delete_meta, RETRY_PREFIX + room_id)
                    log.info("room %s refreshed again after failing", room_id)
            report.rooms.append(room_report)
        if only is None:
            await self._complete_generation(report)
        else:
            await asyncio.to_thread(col.flush)
        return report

    async def _refresh_target(
        self,
        col: Collection,
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
                await self._purge_room(col, room_id, room_report)
            return room_report
        assert state is not None
        marker = await self._puppet_marker(col, room_id)
        if marker is not None:
            # A puppet spoke here once (history does not change): refused without a read.
            refused = RoomReport(room_id, verdict=str(Refusal.BRIDGED), detail=marker["detail"])
            if room_id in indexed_rooms:  # the purge after the marker was cut short
                await self._purge_room(col, room_id, refused)
            return refused
        return await self.refresh_room(col, state, progress)

    async def _room_failed(
        self,
        col: Collection,
        room_id: RoomID,
        error: Exception,
        retries: Mapping[str, Mapping[str, Any]],
        full: bool,
    ) -> RoomReport:
        """Record a room's failure where status and the next pass find it; its report.

        Only full passes count (they decide a rebuild's switch): the live stream wakes a busy
        room's own refresh every few seconds, and a blip would otherwise count as persistent.
        """
        # Scrubbed and cut: an error may quote an event of the room.
        text = scrub(f"{type(error).__name__}: {error}")[:ERROR_CHARS]
        before = retries.get(RETRY_PREFIX + room_id) or {}
        now = int(time.time() * 1000)
        failed = int(before.get("failed_passes", 0))
        failed += 1 if full or failed == 0 else 0
        record = {
            "room_id": room_id,
            "error": text,
            "failed_passes": failed,
            "since_ms": int(before.get("since_ms", now)),
            "last_ms": now,
        }
        await asyncio.to_thread(col.put_meta, RETRY_PREFIX + room_id, record)
        log.warning(
            "room %s failed (%d pass(es) in a row), retried next pass: %s",
            room_id,
            failed,
            text,
            exc_info=not isinstance(error, MatrixError),
            extra={"room_id": room_id},
        )
        return RoomReport(room_id, error=text, failed_passes=failed)

    async def _puppet_marker(self, col: Collection, room_id: RoomID) -> dict[str, Any] | None:
        marker = await asyncio.to_thread(col.get_meta, REFUSED_PREFIX + room_id)
        if marker is not None and self._scope.is_puppet(str(marker.get("user_id"))):
            return dict(marker)
        return None

    async def refused_by_puppet(self, room_id: RoomID) -> str | None:
        """The bridge puppet whose message got this room refused for good, or None.

        The refusal outlives the puppet's message scrolling out of any bounded read, and the
        process: the bot asks here so that a restart does not forget it. Asked of the active
        generation (every marker is recorded there too) and of this writer's if it is open,
        without opening it: that needs the embedder, and a bot whose embedder is down must
        still know which rooms it may answer in.
        """
        for col in await self._readable_generations():
            marker = await self._puppet_marker(col, room_id)
            if marker is not None:
                return str(marker["user_id"])
        return None

    async def _readable_generations(self) -> list[Collection]:
        """This writer's generation if it is open, and the active one (if another, or if this
        writer's is not open yet: `open` may be half way)."""
        cols = [self.collection] if self.collection is not None else []
        active = await asyncio.to_thread(self.store.active)
        if active is not None and (self.collection is None or active != self.generation):
            try:
                cols.append(
                    await asyncio.to_thread(self.store.open, active, dense_dim=None, create=False)
                )
            except StoreError:
                if await asyncio.to_thread(self.store.active) == active:
                    raise  # a switch meanwhile dropped it: the writer's own holds the record
        return cols

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

    async def _purge_room(self, col: Collection, room_id: RoomID, report: RoomReport) -> None:
        """Delete every point and the cursor of a room that left scope."""
        ids = await asyncio.to_thread(
            lambda: [p.id for p in col.scroll(PointFilter(room_ids=(room_id,)))]
        )
        await asyncio.to_thread(col.delete, ids)
        await asyncio.to_thread(col.delete_meta, CURSOR_PREFIX + room_id)
        report.windows_deleted += len(ids)
        report.purged_room = True
        log.warning(
            "purged room %s from the index (%s): %d windows", room_id, report.verdict, len(ids)
        )

    # ------------------------------------------------------------ one room

    async def refresh_room(
        self, col: Collection, state: RoomState, progress: Progress | None = None
    ) -> RoomReport:
        """Walk one eligible room from its cursor to the end of its timeline."""
        room_id = state.room_id
        report = RoomReport(room_id, room_alias=state.canonical_alias)
        names = dict(state.display_names)
        cursor = await asyncio.to_thread(col.get_meta, CURSOR_PREFIX + room_id)
        token: str | None = (cursor or {}).get("token")
        tails: dict[str, str] = dict((cursor or {}).get("tails") or {})
        stones = await self._tombstones(col, room_id)
        pending_stones = [s for s, applied in stones if not applied]
        if pending_stones:
            tails = await self._apply_tombstones(col, state, pending_stones, tails, names, report)
            await self._save_cursor(col, room_id, token, tails)
            for stone in pending_stones:
                await asyncio.to_thread(
                    col.put_meta, stone.key, {**stone.record(), "applied": True}
                )
        every_stone = [s for s, _ in stones]
        if cursor is None:
            # Before the first upsert: a room holding points always has a cursor, so a room
            # that leaves scope after a crash in its first page is still found and purged.
            await self._save_cursor(col, room_id, token, tails)
        async for page in self.reader.walk(room_id, token, self.cfg.refresh.page_size):
            report.events_read += len(page.events)
            puppet = puppet_in_events(page.events, self._scope)
            if puppet is not None:
                await self._refuse_bridged(col, room_id, puppet, report)
                return report
            ws = WindowSet(room_id, CollectionLookup(col, room_id), self._params(), tails)
            await self._apply_events(ws, page.events, every_stone, report)
            await self._commit(col, ws, state, names, report)
            token, tails = page.end or token, ws.tails
            # Only now, with the page's points acknowledged, does the cursor move past it.
            await self._save_cursor(col, room_id, token, tails)
            if progress is not None:
                progress(room_id, report.events_read)
        return report

    async def _refuse_bridged(
        self, col: Collection, room_id: RoomID, puppet: str, report: RoomReport
    ) -> None:
        """Rule 4 by sender: purge what this walk indexed and remember the refusal."""
        report.verdict = str(Refusal.BRIDGED)
        report.detail = f"bridged: sender {puppet} is in a bridge puppet namespace"
        marker = {"user_id": puppet, "detail": report.detail}
        await asyncio.to_thread(col.put_meta, REFUSED_PREFIX + room_id, marker)
        log.warning("refusing room %s: %s", room_id, report.detail)
        await self._purge_room(col, room_id, report)
        # The active generation too, while this one is built beside it: readers ask there.
        # Not at the cost of the purge above, nor of the pass: this one carries it over.
        for other in await self._readable_generations():
            if other is not col:
                try:
                    await asyncio.to_thread(other.put_meta, REFUSED_PREFIX + room_id, marker)
                except StoreError as e:
                    log.warning("refusal of %s not recorded in %s: %s", room_id, other.name, e)

    async def _save_cursor(
        self, col: Collection, room_id: RoomID, token: str | None, tails: Mapping[str, str]
    ) -> None:
        record = {"token": token, "tails": dict(tails), "updated_ms": int(time.time() * 1000)}
        await asyncio.to_thread(col.put_meta, CURSOR_PREFIX + room_id, record)

    def _params(self) -> ChunkParams:
        return ChunkParams(self.cfg.chunker.gap_seconds, self.cfg.chunker.max_bytes)

    async def _apply_events(
        self,
        ws: WindowSet,
        events: Sequence[Mapping[str, Any]],
        stones: Sequence[Tombstone],
        report: RoomReport,
    ) -> None:
        items = [
            normalize(e, own_user_ids=self._own, command_prefix=self.cfg.bot.prefix)
            for e in events
        ]
        ws.prefetch(_referenced_ids(items))
        for item in items:
            if isinstance(item, Skip):
                report.skipped[str(item.reason)] += 1
            elif isinstance(item, Message):
                if any(s.covers(item.ts) for s in stones):
                    report.skipped[str(SkipReason.PURGED)] += 1
                elif ws.add_message(_scrubbed(item)):
                    report.indexed += 1
                else:
                    report.skipped[str(SkipReason.DUPLICATE)] += 1
            elif isinstance(item, Edit):
                outcome = ws.apply_edit(item, scrub(item.new_body))
                if outcome == EditOutcome.APPLIED:
                    report.edits_applied += 1
                elif outcome == EditOutcome.UNKNOWN_TARGET and item.withdrawn is not None:
                    # A bot editing its own notice: neither is indexed, neither is invalid.
                    report.skipped[str(item.withdrawn)] += 1
                elif outcome != EditOutcome.NOT_NEWER:
                    report.skipped[str(SkipReason.INVALID_EDIT)] += 1
            elif isinstance(item, Redaction):
                result = ws.redact(item)
                if isinstance(result, RevertEdit):
                    ws.set_message(result.target, await self._reread(ws.room_id, result, stones))
                if result:
                    report.redactions_applied += 1

    async def _reread(
        self, room_id: RoomID, revert: RevertEdit, stones: Sequence[Tombstone]
    ) -> Message | None:
        """A redacted edit was the applied one: rebuild the message from the homeserver."""
        original = await self.reader.get_event(room_id, revert.target)
        if original is None:
            return None
        msg = normalize(original, own_user_ids=self._own, command_prefix=self.cfg.bot.prefix)
        if not isinstance(msg, Message) or any(s.covers(msg.ts) for s in stones):
            return None
        best: Edit | None = None
        for raw in await self.reader.relations(room_id, revert.target, "m.replace"):
            edit = normalize(raw, own_user_ids=self._own, command_prefix=self.cfg.bot.prefix)
            if (
                isinstance(edit, Edit)
                and edit.sender == msg.sender
                and (best is None or (edit.ts, edit.event_id) > (best.ts, best.event_id))
            ):
                best = edit
        msg = _scrubbed(msg)
        if best is None:
            return msg
        return Message(
            event_id=msg.event_id,
            room_id=msg.room_id,
            sender=msg.sender,
            ts=msg.ts,
            body=scrub(best.new_body),
            thread_root=msg.thread_root,
            msgtype=msg.msgtype,
            edit_event_id=best.event_id,
            edit_ts=best.ts,
        )

    async def _commit(
        self,
        col: Collection,
        ws: WindowSet,
        state: RoomState,
        names: Names,
        report: RoomReport,
    ) -> None:
        """Embed what changed, upsert, then delete superseded points (the cursor comes after)."""
        upserts, deletes = ws.changes()
        pending: list[tuple[str, dict[str, Any], str]] = []
        for pid, (thread_root, messages) in upserts.items():
            window = Window(state.room_id, thread_root, messages, state.canonical_alias)
            payload = build_payload(window, names, self.compat, self.cfg.chunker.max_bytes)
            if payload["content_hash"] != ws.stored_hash(pid):
                # The dense side reads the (cut) embedded text; the lexical side every word.
                pending.append((pid, payload, window_text(window, names)))
        if pending:
            vectors = await self.embedder.embed_documents([p["text"] for _, p, _ in pending])
            points = [
                PointRecord(id=pid, dense=dense, sparse=lexical.document_vector(full), payload=p)
                for (pid, p, full), dense in zip(pending, vectors, strict=True)
            ]
            await asyncio.to_thread(col.upsert, points)
            report.windows_written += len(points)
            report.windows_embedded += len(points)
        if deletes:
            await asyncio.to_thread(col.delete, deletes)
            report.windows_deleted += len(deletes)

    # ------------------------------------------------------------ purge tombstones

    async def _tombstones(self, col: Collection, room_id: RoomID) -> list[tuple[Tombstone, bool]]:
        found = await asyncio.to_thread(col.list_meta, f"{TOMBSTONE_PREFIX}{room_id}:")
        return [
            (Tombstone(room_id, int(v["from_ts"]), int(v["to_ts"])), bool(v.get("applied")))
            for v in found.values()
            if v.get("room_id") == room_id
        ]

    async def _apply_tombstones(
        self,
        col: Collection,
        state: RoomState,
        stones: Sequence[Tombstone],
        tails: dict[str, str],
        names: Names,
        report: RoomReport,
    ) -> dict[str, str]:
        """Delete what new tombstones cover; they stay, so those events are never re-indexed."""
        lookup = CollectionLookup(col, state.room_id)
        for stone in stones:
            flt = PointFilter(
                room_ids=(state.room_id,), after_ts=stone.from_ts, before_ts=stone.to_ts
            )
            windows = await asyncio.to_thread(_scroll_windows, lookup, flt)
            ws = WindowSet(state.room_id, lookup, self._params(), tails)
            report.purged_messages += ws.purge(windows, stone.from_ts, stone.to_ts)
            await self._commit(col, ws, state, names, report)
            tails = ws.tails
        return tails


def _scroll_windows(lookup: CollectionLookup, flt: PointFilter) -> list[StoredWindow]:
    return [lookup.stored(p) for p in lookup.collection.scroll(flt)]


def _scrubbed(message: Message) -> Message:
    body = scrub(message.body)
    if body == message.body:
        return message
    return Message(
        event_id=message.event_id,
        room_id=message.room_id,
        sender=message.sender,
        ts=message.ts,
        body=body,
        thread_root=message.thread_root,
        msgtype=message.msgtype,
    )


def _referenced_ids(items: Sequence[object]) -> list[EventID]:
    """Every event id a page's items look up, so the store is asked once a page."""
    ids: list[EventID] = []
    for item in items:
        if isinstance(item, Message):
            ids.append(item.event_id)
        elif isinstance(item, Edit):
            ids.append(item.target)
        elif isinstance(item, Redaction):
            ids.append(item.redacts)
    return ids


def build_payload(
    window: Window, names: Names, compat: Mapping[str, Any], max_bytes: int
) -> dict[str, Any]:
    """The §4 payload of a window, with applied edits recorded so redactions can find them."""
    edit_ids = [m.edit_event_id for m in window.messages if m.edit_event_id is not None]
    versions = {
        "chunker": compat["chunker"],
        "scrub": compat["scrub"],
        "lexical": compat["lexical"],
        "embedder": compat["embedder"]["model"],
    }
    payload = window_payload(
        window, names=names, versions=versions, max_bytes=max_bytes, extra_event_ids=edit_ids
    )
    for raw, m in zip(payload["messages"], window.messages, strict=True):
        if m.edit_event_id is not None:
            raw["edit_event_id"] = m.edit_event_id
            raw["edit_ts"] = m.edit_ts
    # The writer skips a window whose hash is unchanged, so the hash must cover the whole point:
    # the embedded text is cut to max_bytes, while the lexical vector reads every word and the
    # payload keeps every body and applied edit id. Hashing the cut text alone left an edit past
    # the cut (and its old words) unwritten.
    whole = {k: v for k, v in payload.items() if k != "content_hash"}
    payload["content_hash"] = content_hash(
        json.dumps(whole, sort_keys=True, default=str), versions
    )
    return payload


__all__ = [
    "RefreshReport",
    "RoomReport",
    "Tombstone",
    "Writer",
    "add_tombstone",
    "build_payload",
    "compatibility",
]
