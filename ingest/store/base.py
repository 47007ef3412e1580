"""The collection logic both store adapters share, written once over a few engine primitives
(`CollectionBase`): validation, the chat/meta split, filters, the schema record and the point
tally (`ingest.store.integrity`). Generation bookkeeping is `ingest.store.storebase`; the
contract they implement, `ingest.store.contract`.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ingest.errors import CompatibilityError, DiskFull
from ingest.store.contract import (
    CHAT,
    DENSE,
    LEXICAL,
    META,
    PointFilter,
    PointRecord,
    Raw,
    Scored,
    Term,
    canonical_id,
    check_sparse,
    filter_terms,
    json_clean,
    meta_id,
)
from ingest.store.integrity import INTEGRITY_KEY, SAMPLE, Tally, count_damage, vector_damage
from ingest.types import SparseVector, StoredPoint

# The adapter's own records (schema version and dense dimension; the point tally of
# `ingest.store.integrity`); not visible through list_meta.
_INTERNAL = "store"
_SCHEMA_KEY = "schema"
# 2: the generation keeps a point tally from its creation, so a missing one is damage.
SCHEMA_VERSION = 2
_TALLIED_SINCE = 2


# ---------------------------------------------------------------- shared collection logic


class CollectionBase(ABC):
    """Validation, the chat/meta split and filters, written once over a few engine primitives."""

    def __init__(self, name: str, dense_dim: int | None) -> None:
        self._name = name
        # None until the schema record is read: opening an existing generation for reading
        # adopts the dimension it was built with.
        self._dense_dim: int = dense_dim if dense_dim is not None else 0
        self._schema_version = SCHEMA_VERSION
        # Known at open (`check_integrity`): the chat points held, kept by every write. None
        # while the generation is damaged: nothing written to it can make it whole again.
        self._tally: Tally | None = None
        self._damage: str | None = None
        self._write_lock = threading.Lock()
        self._removed_text = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def damage(self) -> str | None:
        """Why this generation no longer holds what its writer wrote (None: it does)."""
        return self._damage

    @property
    def dense_dim(self) -> int:
        return self._dense_dim

    # -- engine primitives (each called inside `self._guard(op)`)

    @abstractmethod
    def _guard(self, op: str) -> AbstractContextManager[None]: ...
    @abstractmethod
    def _upsert_chat(
        self, points: Sequence[PointRecord], payloads: list[dict[str, Any]]
    ) -> None: ...
    @abstractmethod
    def _upsert_bare(self, point_id: str, payload: dict[str, Any]) -> None: ...
    @abstractmethod
    def _delete(self, ids: list[str]) -> None: ...
    @abstractmethod
    def _retrieve(self, ids: list[str]) -> list[Raw]: ...
    @abstractmethod
    def _scroll(self, corpus: str, terms: list[Term], batch: int) -> Iterator[Raw]: ...
    @abstractmethod
    def _count(self, corpus: str, terms: list[Term]) -> int: ...
    @abstractmethod
    def _search(self, using: str, vector: Any, terms: list[Term], limit: int) -> list[Scored]: ...

    def _before_write(self) -> None:
        """Raise `DiskFull` when a write now could not be stored safely (rule 13c)."""
        return None  # a server keeps its own disk

    def _dense_sample(self, n: int) -> list[list[float]]:
        """Up to `n` stored dense vectors of chat points, picked anywhere (none: not checked)."""
        return []

    @abstractmethod
    def flush(self) -> None:
        """Make every acknowledged write durable."""

    @abstractmethod
    def optimize(self) -> None:
        """Let the engine merge segments and build indexes, where it does not do so itself."""

    def forget_removed(self) -> None:
        """Text was taken out (a redaction, an edit, a purge): the close of this generation
        rewrites whatever files of the engine still hold it (rule 13b)."""
        self._removed_text = True

    # -- chat points

    def upsert(self, points: Sequence[PointRecord]) -> None:
        """Insert or replace by id; returns once the engine acknowledged (rule 10)."""
        if not points:
            return
        for p in points:
            if len(p.dense) != self._dense_dim:
                raise CompatibilityError(
                    f"{self._name}: point {p.id} has a {len(p.dense)}-d dense vector, "
                    f"the generation holds {self._dense_dim}-d"
                )
        payloads = [
            {**json_clean(p.payload, f"point {p.id} payload"), "corpus": CHAT} for p in points
        ]
        ids = [canonical_id(p.id) for p in points]
        with self._guard("upsert"):
            self._tallied(ids, True, lambda: self._upsert_chat(points, payloads))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            wanted = [canonical_id(i) for i in ids]
            with self._guard("delete"):
                self._tallied(wanted, False, lambda: self._delete(wanted))

    def _tallied(self, ids: list[str], adding: bool, write: Callable[[], None]) -> None:
        """Write, keeping the tally: the change is recorded as pending first, so a process
        killed between the write and its tally leaves a tally that explains either side."""
        self._before_write()
        with self._write_lock:
            if self._tally is None:
                write()
                return
            held = {pid for pid, payload in self._retrieve(ids) if payload.get("corpus") == CHAT}
            change = len(set(ids)) - len(held) if adding else -len(held)
            if change:
                self._put_raw(_INTERNAL, INTEGRITY_KEY, Tally(self._tally.points, change).record())
            write()
            self._tally = Tally(self._tally.points + change)
            if change:
                self._put_raw(_INTERNAL, INTEGRITY_KEY, self._tally.record())

    def retrieve(self, ids: Sequence[str]) -> list[StoredPoint]:
        """The chat points among `ids`, in the order asked; missing ids are left out."""
        if not ids:
            return []
        wanted = [canonical_id(i) for i in ids]
        with self._guard("retrieve"):
            found = {pid: payload for pid, payload in self._retrieve(wanted)}
        return [
            StoredPoint(id=pid, payload=found[pid])
            for pid in dict.fromkeys(wanted)
            if pid in found and found[pid].get("corpus") == CHAT
        ]

    def scroll(self, flt: PointFilter | None = None, batch: int = 256) -> Iterator[StoredPoint]:
        """Every matching chat point, fetched `batch` at a time, in point id order."""
        if flt is not None and flt.matches_nothing():
            return
        with self._guard("scroll"):
            for pid, payload in self._scroll(CHAT, filter_terms(flt), max(1, batch)):
                yield StoredPoint(id=pid, payload=payload)

    def count(self, flt: PointFilter | None = None) -> int:
        if flt is not None and flt.matches_nothing():
            return 0
        with self._guard("count"):
            return self._count(CHAT, filter_terms(flt))

    def dense_search(
        self, vector: Sequence[float], flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]:
        """Nearest chat points by cosine similarity, best first."""
        return self.dense_searches([vector], flt, limit)[0]

    def dense_searches(
        self, vectors: Sequence[Sequence[float]], flt: PointFilter | None, limit: int
    ) -> list[list[StoredPoint]]:
        """`dense_search` of each vector, in one call (a pair's two lists: one thread hop,
        the engine holding the GIL for each anyway)."""
        for vector in vectors:
            if len(vector) != self._dense_dim:
                raise CompatibilityError(
                    f"{self._name}: query is {len(vector)}-d, the generation holds "
                    f"{self._dense_dim}-d"
                )
        return [self._scored(DENSE, [float(x) for x in v], flt, limit) for v in vectors]

    def sparse_search(
        self, vector: SparseVector, flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]:
        """Chat points sharing query terms, by Σ query weight × document TF weight × IDF."""
        check_sparse(vector)
        if not vector.indices:
            return []
        return self._scored(LEXICAL, vector, flt, limit)

    def _scored(
        self, using: str, vector: Any, flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]:
        if limit <= 0 or (flt is not None and flt.matches_nothing()):
            return []
        with self._guard(f"{using} search"):
            hits = self._search(using, vector, filter_terms(flt), limit)
        return [StoredPoint(id=pid, payload=payload, score=score) for pid, payload, score in hits]

    # -- meta entries

    def get_meta(self, key: str) -> dict[str, Any] | None:
        return self._get_entry(META, key)

    def put_meta(self, key: str, value: Mapping[str, Any]) -> None:
        self._put_entry(META, key, value)

    def delete_meta(self, key: str) -> None:
        with self._guard("delete meta"):
            self._before_write()
            self._delete([meta_id(key)])

    def list_meta(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every meta entry whose key starts with `prefix`, by key."""
        with self._guard("list meta"):
            rows = list(self._scroll(META, [], 256))
        out = {str(p["key"]): dict(p["value"]) for _, p in rows if "key" in p and "value" in p}
        return {k: out[k] for k in sorted(out) if k.startswith(prefix)}

    def _get_entry(self, corpus: str, key: str) -> dict[str, Any] | None:
        with self._guard("get meta"):
            return self._get_raw(corpus, key)

    def _get_raw(self, corpus: str, key: str) -> dict[str, Any] | None:
        for _, payload in self._retrieve([meta_id(key, corpus)]):
            if payload.get("corpus") == corpus and payload.get("key") == key:
                return dict(payload["value"])
        return None

    def _put_entry(self, corpus: str, key: str, value: Mapping[str, Any]) -> None:
        clean = json_clean(value, f"meta {key!r}")
        with self._guard("put meta"):
            self._before_write()
            self._put_raw(corpus, key, clean)

    def _put_raw(self, corpus: str, key: str, value: Mapping[str, Any]) -> None:
        self._upsert_bare(meta_id(key, corpus), {"corpus": corpus, "key": key, "value": value})

    # -- the adapter's own schema record

    def ensure_schema(self, *, create: bool) -> None:
        """Record the dense dimension at creation; on reopen refuse a different one."""
        schema = self._get_entry(_INTERNAL, _SCHEMA_KEY)
        if schema is not None and self._dense_dim == 0:
            self._dense_dim = int(schema.get("dense_dim") or 0)
        if schema is None:
            with self._guard("open"):
                held = self._count(CHAT, []) + self._count(META, [])
            if held or not create:  # written to (or expected to be), yet its first record is gone
                self._damage = f"{self._name}: its schema record is missing (damaged files)"
                return
            # The tally first: a schema record always comes with one (see check_integrity).
            self._put_entry(_INTERNAL, INTEGRITY_KEY, Tally(0).record())
            self._put_entry(
                _INTERNAL, _SCHEMA_KEY, {"version": SCHEMA_VERSION, "dense_dim": self._dense_dim}
            )
            return
        self._schema_version = int(schema.get("version") or 1)
        if schema.get("dense_dim") != self._dense_dim:
            raise CompatibilityError(
                f"{self._name}: holds {schema.get('dense_dim')}-d dense vectors, "
                f"{self._dense_dim}-d were asked for"
            )

    def check_integrity(self) -> None:
        """At open: compare the engine's count with the tally, and a sample of the vectors
        (`ingest.store.integrity`); a disagreement is `damage`, reported, never repaired here."""
        if self._damage is not None:
            return
        with self._guard("integrity check"):
            counted = self._count(CHAT, [])
            tally = Tally.from_record(self._get_raw(_INTERNAL, INTEGRITY_KEY))
            tallied = self._schema_version >= _TALLIED_SINCE
            damage = count_damage(tally, counted, tallied=tallied)
            if damage is None:
                damage = vector_damage(self._dense_sample(SAMPLE))
            if damage is not None:
                self._damage = f"{self._name}: {damage}"
                return
            self._tally = Tally(counted)
            with contextlib.suppress(DiskFull):  # read on a full disk: the next open settles it
                self._settle(tally, tallied)

    def _settle(self, tally: Tally | None, tallied: bool) -> None:
        """An older generation gets its tally now; a write killed mid-way is settled."""
        stale = tally is None or tally.pending != 0
        if self._tally is None or (tallied and not stale):
            return
        self._before_write()
        if stale:
            self._put_raw(_INTERNAL, INTEGRITY_KEY, self._tally.record())
        if not tallied:
            record = {"version": SCHEMA_VERSION, "dense_dim": self._dense_dim}
            self._put_raw(_INTERNAL, _SCHEMA_KEY, record)
            self._schema_version = SCHEMA_VERSION
