"""The generation bookkeeping both store adapters share (`StoreBase`): names, one handle per
generation, activation, drops, setting a damaged one aside, closing. The collection half is
`ingest.store.base`; the contract, `ingest.store.contract`.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod

from ingest.errors import CompatibilityError, StoreError
from ingest.store.base import CollectionBase
from ingest.store.contract import DAMAGED, check_name


class StoreBase(ABC):
    """Generation bookkeeping both adapters share: names, one handle per generation, closing."""

    def __init__(self, collection: str) -> None:
        self.collection = check_name(collection, "collection")
        self._open: dict[str, CollectionBase] = {}
        self._lock = threading.RLock()
        self._closed = False

    @property
    @abstractmethod
    def location(self) -> str: ...
    @abstractmethod
    def generations(self) -> list[str]: ...
    @abstractmethod
    def active(self) -> str | None: ...
    @abstractmethod
    def _open_generation(
        self, generation: str, dense_dim: int | None, create: bool
    ) -> CollectionBase: ...
    @abstractmethod
    def _set_active(self, generation: str) -> None: ...
    @abstractmethod
    def _remove(self, generation: str, was_active: bool) -> None: ...
    @abstractmethod
    def _rename(self, generation: str, new_name: str, was_active: bool) -> None: ...
    @abstractmethod
    def _close_collection(self, coll: CollectionBase, *, compact: bool) -> None:
        """Release `coll`; `compact` when it stays (a close), not when it is being dropped."""

    @abstractmethod
    def _shutdown(self) -> None: ...

    def check_generation(self, generation: str) -> str:
        check_name(generation, "generation")
        if not generation.startswith(f"{self.collection}-"):
            raise StoreError(f"generation {generation!r} is not named {self.collection}-…")
        return generation

    def open(self, generation: str, *, dense_dim: int | None, create: bool) -> CollectionBase:
        """The generation's collection (one shared handle); `create` makes it if missing."""
        self.check_generation(generation)
        if dense_dim is None and create:
            raise StoreError(f"{generation}: creating a generation needs its dense dimension")
        with self._lock:
            self._check_open()
            coll = self._open.get(generation)
            if coll is None:
                coll = self._open_generation(generation, dense_dim, create)
                self._open[generation] = coll
            elif dense_dim is not None and coll.dense_dim != dense_dim:
                raise CompatibilityError(
                    f"{generation}: holds {coll.dense_dim}-d vectors, {dense_dim}-d were asked for"
                )
            return coll

    def activate(self, generation: str) -> None:
        """Point searches at `generation` in one atomic step."""
        self.check_generation(generation)
        with self._lock:
            self._check_open()
            if generation not in self.generations():
                raise StoreError(f"{self.location}: no generation {generation!r} to activate")
            self._set_active(generation)

    def drop(self, generation: str) -> None:
        """Delete a generation and everything in it; dropping the active one clears `active()`."""
        self.check_generation(generation)
        with self._lock:
            self._check_open()
            coll = self._open.pop(generation, None)
            if coll is not None:
                self._close_collection(coll, compact=False)
            if generation in self.generations():
                self._remove(generation, was_active=self.active() == generation)

    def check_space(self) -> None:
        """Raise `DiskFull` while the store could not write safely (rule 13c)."""
        return None  # a server keeps its own disk

    def set_aside(self, generation: str) -> str:
        """Rename a damaged generation out of its name's way (`<generation>-damaged-<time>`),
        so that the same versions build it anew beside it; searches keep reading it, if it
        was the active one, until the rebuild switches in and drops it. The new name."""
        self.check_generation(generation)
        new_name = f"{generation}{DAMAGED}{int(time.time())}"
        with self._lock:
            self._check_open()
            coll = self._open.pop(generation, None)
            if coll is not None:
                self._close_collection(coll, compact=False)
            self._rename(generation, new_name, was_active=self.active() == generation)
        return new_name

    def close(self) -> None:
        """Flush and release every open generation; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                for coll in self._open.values():
                    self._close_collection(coll, compact=True)
            finally:
                self._open.clear()
                self._shutdown()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.location}: the store is closed")
