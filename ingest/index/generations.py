"""`ingest.index.generations`: the writer's generation of the index, and the switch to it.

Opens (or creates) the generation this process's compatibility record names, builds it beside
an older active one, carries the records that outlive a rebuild (purges, puppet refusals) over,
records a purge in every generation a search may read, and switches a complete one in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from ingest.embed import Embedder
from ingest.errors import StoreError
from ingest.index.records import (
    COMPAT_KEY,
    REFUSED_PREFIX,
    TOMBSTONE_PREFIX,
    Tombstone,
    add_tombstone,
    compatibility,
    puppet_refusal,
)
from ingest.rules.stamps import utc_minute
from ingest.store import (
    AsyncCollection,
    AsyncPurges,
    AsyncStore,
    Collection,
    Store,
    generation_name,
)
from ingest.store.purges import PurgeLog
from ingest.types import RoomID

log = logging.getLogger("muninn.index")

# A rebuilt generation waits this many passes for a failing room before it switches without
# it (see `Generations.complete`).
SWITCH_AFTER_FAILED_PASSES = 3


class FailedRoom(Protocol):
    """A room the pass failed (a `RoomReport` with an error)."""

    @property
    def room_id(self) -> RoomID: ...
    @property
    def failed_passes(self) -> int: ...


@dataclass(frozen=True)
class Switch:
    """How a full pass ended its generation: switched in now, or why not yet."""

    activated: bool = False
    held: str | None = None


class Generations:
    """The generation one writer writes, and the active one searches read until the switch."""

    def __init__(
        self, store: Store, embedder: Embedder, collection: str, purges: PurgeLog | None
    ) -> None:
        self.store = AsyncStore(store)
        self.embedder = embedder
        self.collection_name = collection
        # Where readers find the purges without the store (`ingest.store.purges`); None: store
        # only.
        self.purges = AsyncPurges(purges) if purges is not None else None
        # Known after `open()` probes the embedder (an Ollama model's dimension needs an answer).
        self.compat: dict[str, Any] = {}
        self.generation = ""
        # Synchronous, as tests and bench use it (a faulty one may be put in its place);
        # `opened()` is the same collection, awaited.
        self.collection: Collection | None = None
        self._previous: str | None = None

    async def opened(self) -> AsyncCollection:
        """`open()`, behind the store's async facade."""
        return AsyncCollection(await self.open())

    async def open(self) -> Collection:
        """Open (or create) this process's generation; activate it at once if none is active."""
        if self.collection is not None:
            return self.collection
        identity = await self.embedder.probe()
        self.compat = compatibility(identity)
        self.generation = generation_name(self.collection_name, self.compat)
        active = await self.store.active()
        col = await self.store.open(self.generation, dense_dim=identity.dimension, create=True)
        if col.damage is not None:
            col, active = await self._rebuild_damaged(col.damage, active, identity.dimension)
        if await col.get_meta(COMPAT_KEY) is None:
            await col.put_meta(COMPAT_KEY, {**self.compat, "complete": False})
        if active is None:
            await self.store.activate(self.generation)
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
        self.collection = col.sync
        return col.sync

    async def _rebuild_damaged(
        self, damage: str, active: str | None, dense_dim: int
    ) -> tuple[AsyncCollection, str | None]:
        """This writer's generation is damaged (rule 13a): build it anew from the homeserver.

        Active, it is set aside under another name and searches keep reading what is left of
        it until the rebuild switches in and drops it (status and /healthz say it is damaged
        meanwhile); being built, it is dropped. Its purges and refusals are carried over."""
        if active == self.generation:
            active = await self.store.set_aside(self.generation)
            log.error("%s; searches read it as %s until its rebuild switches in", damage, active)
        else:
            await self.store.drop(self.generation)
            log.error("%s; rebuilding it", damage)
        col = await self.store.open(self.generation, dense_dim=dense_dim, create=True)
        return col, active

    async def _copy_purges_to_the_file(self, col: AsyncCollection) -> None:
        """The purge file and the store hold the same purges: those recorded only in the store
        (before the file existed) join the file, and those only in the file (a store lost or
        rebuilt from nothing) join the store, so its refresh never re-indexes them."""
        if self.purges is None:
            return
        filed = {Tombstone.from_meta(s) for s in await self.purges.read()}
        stored = {Tombstone.from_meta(v) for v in (await col.list_meta(TOMBSTONE_PREFIX)).values()}
        for stone in sorted(stored - filed, key=lambda s: s.key):
            await self.purges.append(stone.as_meta())
        for stone in sorted(filed - stored, key=lambda s: s.key):
            await col.run(
                partial(
                    add_tombstone, room_id=stone.room_id, from_ts=stone.from_ts, to_ts=stone.to_ts
                )
            )

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
            record = Tombstone(room_id, from_ts, to_ts).as_meta()
            await self.purges.append(record)
        col = await self.opened()
        stone = await col.run(lambda c: add_tombstone(c, room_id, from_ts, to_ts))
        await col.flush()
        active = await self.store.active()
        if active is not None and active != self.generation:
            try:
                await self.store.run(lambda store: _add_tombstone_to(store, active, stone))
            except StoreError:
                if await self.store.active() == active:
                    raise
                return stone  # the build switched meanwhile and dropped `active`: moot
            log.info(
                "purge of %s from %s to %s UTC recorded in %s (building) and %s (active)",
                room_id,
                utc_minute(from_ts),
                utc_minute(to_ts),
                self.generation,
                active,
            )
        return stone

    async def _carry_records(self, previous: str, col: AsyncCollection) -> None:
        """An operator's purges and the puppet refusals outlive a rebuild: copy them to the new
        one (purges not yet applied there)."""
        old = await self.store.open(previous, dense_dim=None, create=False)
        for prefix, reset in ((TOMBSTONE_PREFIX, {"applied": False}), (REFUSED_PREFIX, {})):
            for key, value in (await old.list_meta(prefix)).items():
                if await col.get_meta(key) is None:
                    await col.put_meta(key, {**value, **reset})

    async def complete(self, failed: Sequence[FailedRoom]) -> Switch:
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
        col = await self.opened()
        active = await self.store.active()
        recent = [r for r in failed if r.failed_passes < SWITCH_AFTER_FAILED_PASSES]
        if active != self.generation and recent:
            held = (
                f"{len(recent)} room(s) failed this pass "
                f"({', '.join(r.room_id for r in recent)}); "
                f"{active} serves them until they succeed or fail "
                f"{SWITCH_AFTER_FAILED_PASSES} passes in a row"
            )
            log.warning("not switching to %s yet: %s", self.generation, held)
            await col.flush()
            return Switch(held=held)
        await col.put_meta(COMPAT_KEY, {**self.compat, "complete": True})
        await col.flush()
        if active != self.generation:
            await self.store.activate(self.generation)
            # The moment a rebuild ends: searches (and chat's rebuild notice) change here.
            log.warning(
                "switched to %s: searches read it from now on (was %s)", self.generation, active
            )
            if failed:
                log.warning(
                    "switched to %s with %d room(s) failing for %d passes, their content "
                    "incomplete and retried every pass: %s",
                    self.generation,
                    len(failed),
                    SWITCH_AFTER_FAILED_PASSES,
                    ", ".join(r.room_id for r in failed),
                )
            if self._previous is not None:
                await self.store.drop(self._previous)
                self._previous = None
            return Switch(activated=True)
        return Switch()

    async def readable(self) -> list[AsyncCollection]:
        """This writer's generation if it is open, and the active one (if another, or if this
        writer's is not open yet: `open` may be half way)."""
        cols = [AsyncCollection(self.collection)] if self.collection is not None else []
        active = await self.store.active()
        if active is not None and (self.collection is None or active != self.generation):
            try:
                cols.append(await self.store.open(active, dense_dim=None, create=False))
            except StoreError:
                if await self.store.active() == active:
                    raise  # a switch meanwhile dropped it: the writer's own holds the record
        return cols

    async def copy_refusal(
        self, col: AsyncCollection, room_id: RoomID, marker: dict[str, Any]
    ) -> None:
        """A puppet refusal just recorded in `col` goes to the active generation too, while
        this one is built beside it: readers ask there. Not at the cost of the purge that
        follows it, nor of the pass: this one carries it over."""
        for other in await self.readable():
            if other.sync is not col.sync:
                try:
                    await other.put_meta(REFUSED_PREFIX + room_id, marker)
                except StoreError as e:
                    log.warning("refusal of %s not recorded in %s: %s", room_id, other.name, e)

    async def refused_by_puppet(
        self, room_id: RoomID, is_puppet: Callable[[str], bool]
    ) -> str | None:
        """The bridge puppet whose message got this room refused for good, or None.

        The refusal outlives the puppet's message scrolling out of any bounded read, and the
        process: the bot asks here so that a restart does not forget it. Asked of the active
        generation (every marker is recorded there too) and of this writer's if it is open,
        without opening it: that needs the embedder, and a bot whose embedder is down must
        still know which rooms it may answer in.
        """
        for col in await self.readable():
            record = await col.get_meta(REFUSED_PREFIX + room_id)
            marker = puppet_refusal(record, is_puppet)
            if marker is not None:
                return str(marker["user_id"])
        return None


def _add_tombstone_to(store: Store, generation: str, stone: Tombstone) -> None:
    """One unit in one thread hop: open `generation`, record `stone` there, flush."""
    col = store.open(generation, dense_dim=None, create=False)
    add_tombstone(col, stone.room_id, stone.from_ts, stone.to_ts)
    col.flush()


__all__ = ["SWITCH_AFTER_FAILED_PASSES", "FailedRoom", "Generations", "Switch"]
