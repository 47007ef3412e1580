"""The store contract: records, filters, protocols, and the logic both adapters share.

A *generation* is one physical collection (a qdrant-edge shard directory, or a Qdrant server
collection) holding chat points (a `dense` and a `lexical` vector) and meta points (no vectors).
Searches, scroll and count see chat points only; meta lives beside them so that deleting a
generation resets vectors, cursors and tombstones together (docs/ARCHITECTURE.md §1).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ingest.errors import CompatibilityError, StoreError
from ingest.types import SparseVector, StoredPoint

DENSE = "dense"  # cosine, dimension fixed per generation
LEXICAL = "lexical"  # BM25 term-frequency weights from the caller; the engine applies IDF
CHAT = "chat"
META = "meta"
# The adapter's own record (schema version, dense dimension); not visible through list_meta.
_INTERNAL = "store"
_SCHEMA_KEY = "schema"
SCHEMA_VERSION = 1

KEYWORD_FIELDS = ("corpus", "room_id", "event_ids", "senders", "thread_root", "content_hash")
INTEGER_FIELDS = ("first_ts", "last_ts")

# Fixed forever: meta point ids are derived from it, so changing it orphans every meta entry.
_META_NAMESPACE = uuid.UUID("6f1c7a52-3d0e-4b8e-9a57-0d6c1f2b9e41")
_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class PointRecord:
    """One chat point as the writer upserts it; `payload` is the §4 chat payload."""

    id: str  # a UUID string (point ids are deterministic uuid5s, docs/ARCHITECTURE.md §3 rule 11)
    dense: Sequence[float]
    sparse: SparseVector
    payload: Mapping[str, Any]

    def __post_init__(self) -> None:
        canonical_id(self.id)
        check_sparse(self.sparse)
        corpus = self.payload.get("corpus", CHAT)
        if corpus != CHAT:
            raise ValueError(f"point {self.id}: payload corpus must be {CHAT!r}, got {corpus!r}")


@dataclass(frozen=True)
class PointFilter:
    """Conditions on chat points; every given field must hold (AND), None means "any".

    An empty tuple matches nothing (no room is visible, no sender asked for): it never widens.
    """

    room_ids: tuple[str, ...] | None = None
    senders: tuple[str, ...] | None = None  # any of the window's senders
    after_ts: int | None = None  # the window overlaps [after_ts, …): last_ts >= after_ts
    before_ts: int | None = None  # the window overlaps (…, before_ts]: first_ts <= before_ts
    event_ids: tuple[str, ...] | None = None  # windows holding any of these events
    # Timelines: a thread root's event id, or None for the main timeline.
    thread_roots: tuple[str | None, ...] | None = None
    content_hashes: tuple[str, ...] | None = None

    def matches_nothing(self) -> bool:
        groups = (self.room_ids, self.senders, self.event_ids, self.thread_roots)
        if any(g is not None and len(g) == 0 for g in (*groups, self.content_hashes)):
            return True
        return (
            self.after_ts is not None
            and self.before_ts is not None
            and self.after_ts > self.before_ts
        )


@dataclass(frozen=True)
class AnyOf:
    """The field (a value or a list of values) holds one of `values`."""

    key: str
    values: tuple[str, ...]
    or_empty: bool = False  # also match a missing or null field


@dataclass(frozen=True)
class IntRange:
    key: str
    gte: int | None = None
    lte: int | None = None


Term = AnyOf | IntRange


def filter_terms(flt: PointFilter | None) -> list[Term]:
    """Translate a filter into engine-neutral terms; each adapter maps them one to one."""
    if flt is None:
        return []
    terms: list[Term] = []
    for key, values in (
        ("room_id", flt.room_ids),
        ("senders", flt.senders),
        ("event_ids", flt.event_ids),
        ("content_hash", flt.content_hashes),
    ):
        if values is not None:
            terms.append(AnyOf(key, tuple(values)))
    if flt.thread_roots is not None:
        roots = tuple(r for r in flt.thread_roots if r is not None)
        terms.append(AnyOf("thread_root", roots, or_empty=None in flt.thread_roots))
    if flt.after_ts is not None:
        terms.append(IntRange("last_ts", gte=flt.after_ts))
    if flt.before_ts is not None:
        terms.append(IntRange("first_ts", lte=flt.before_ts))
    return terms


# ---------------------------------------------------------------- helpers


def canonical_id(point_id: str) -> str:
    """The lowercase hyphenated form both engines return; ValueError if not a UUID."""
    try:
        return str(uuid.UUID(point_id))
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f"point id must be a UUID string, got {point_id!r}") from e


def check_sparse(vector: SparseVector) -> None:
    """Refuse what Qdrant server rejects (duplicate indices) and qdrant-edge silently keeps."""
    if len(vector.indices) != len(vector.values):
        raise ValueError("sparse vector: indices and values differ in length")
    if len(set(vector.indices)) != len(vector.indices):
        raise ValueError("sparse vector: duplicate indices")
    if any(i < 0 for i in vector.indices) or not all(math.isfinite(v) for v in vector.values):
        raise ValueError("sparse vector: indices must be >= 0 and values finite")


def json_clean(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A plain-JSON copy, so both engines return the same shapes (tuples come back as lists)."""
    try:
        out = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} is not plain JSON: {e}") from e
    if not isinstance(out, dict):
        raise ValueError(f"{what} must be a mapping")
    return out


def meta_id(key: str, corpus: str = META) -> str:
    """Deterministic point id of a meta entry, so put_meta overwrites instead of duplicating."""
    return str(uuid.uuid5(_META_NAMESPACE, f"{corpus}\x00{key}"))


def check_name(name: str, what: str) -> str:
    if not _NAME.match(name):
        raise StoreError(f"{what} {name!r}: only letters, digits, '_' and '-' are allowed")
    return name


def generation_name(collection: str, compat: Mapping[str, Any]) -> str:
    """`<collection>-<12 hex>`: the same compatibility record always names the same generation."""
    canonical = json.dumps(compat, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return f"{check_name(collection, 'collection')}-{digest}"


Raw = tuple[str, dict[str, Any]]
Scored = tuple[str, dict[str, Any], float]


# ---------------------------------------------------------------- protocols


class Collection(Protocol):
    """One generation. Synchronous: async callers run it with `asyncio.to_thread`."""

    @property
    def name(self) -> str: ...
    @property
    def dense_dim(self) -> int: ...
    def upsert(self, points: Sequence[PointRecord]) -> None: ...
    def delete(self, ids: Sequence[str]) -> None: ...
    def retrieve(self, ids: Sequence[str]) -> list[StoredPoint]: ...
    def scroll(
        self, flt: PointFilter | None = None, batch: int = 256
    ) -> Iterator[StoredPoint]: ...
    def count(self, flt: PointFilter | None = None) -> int: ...
    def dense_search(
        self, vector: Sequence[float], flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]: ...
    def sparse_search(
        self, vector: SparseVector, flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]: ...
    def get_meta(self, key: str) -> dict[str, Any] | None: ...
    def put_meta(self, key: str, value: Mapping[str, Any]) -> None: ...
    def delete_meta(self, key: str) -> None: ...
    def list_meta(self, prefix: str = "") -> dict[str, dict[str, Any]]: ...
    def flush(self) -> None: ...
    def optimize(self) -> None:
        """Engine housekeeping (qdrant-edge: minutes at 100k points, GIL held); never implicit."""
        ...


class Store(Protocol):
    """The generations behind one configured collection name, and which one searches read."""

    @property
    def location(self) -> str: ...
    def active(self) -> str | None: ...
    def generations(self) -> list[str]: ...
    def open(self, generation: str, *, dense_dim: int | None, create: bool) -> Collection:
        """A generation's collection; `dense_dim=None` opens an existing one as it was built."""
        ...

    def activate(self, generation: str) -> None: ...
    def drop(self, generation: str) -> None: ...
    def close(self) -> None: ...


# ---------------------------------------------------------------- shared collection logic


class CollectionBase(ABC):
    """Validation, the chat/meta split and filters, written once over a few engine primitives."""

    def __init__(self, name: str, dense_dim: int | None) -> None:
        self._name = name
        # None until the schema record is read: opening an existing generation for reading
        # adopts the dimension it was built with.
        self._dense_dim: int = dense_dim if dense_dim is not None else 0

    @property
    def name(self) -> str:
        return self._name

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

    @abstractmethod
    def flush(self) -> None:
        """Make every acknowledged write durable."""

    @abstractmethod
    def optimize(self) -> None:
        """Let the engine merge segments and build indexes, where it does not do so itself."""

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
        with self._guard("upsert"):
            self._upsert_chat(points, payloads)

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            with self._guard("delete"):
                self._delete([canonical_id(i) for i in ids])

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
        if len(vector) != self._dense_dim:
            raise CompatibilityError(
                f"{self._name}: query is {len(vector)}-d, the generation holds {self._dense_dim}-d"
            )
        return self._scored(DENSE, [float(x) for x in vector], flt, limit)

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
            self._delete([meta_id(key)])

    def list_meta(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every meta entry whose key starts with `prefix`, by key."""
        with self._guard("list meta"):
            rows = list(self._scroll(META, [], 256))
        out = {str(p["key"]): dict(p["value"]) for _, p in rows if "key" in p and "value" in p}
        return {k: out[k] for k in sorted(out) if k.startswith(prefix)}

    def _get_entry(self, corpus: str, key: str) -> dict[str, Any] | None:
        with self._guard("get meta"):
            rows = self._retrieve([meta_id(key, corpus)])
        for _, payload in rows:
            if payload.get("corpus") == corpus and payload.get("key") == key:
                return dict(payload["value"])
        return None

    def _put_entry(self, corpus: str, key: str, value: Mapping[str, Any]) -> None:
        payload = {"corpus": corpus, "key": key, "value": json_clean(value, f"meta {key!r}")}
        with self._guard("put meta"):
            self._upsert_bare(meta_id(key, corpus), payload)

    # -- the adapter's own schema record

    def ensure_schema(self, *, create: bool) -> None:
        """Record the dense dimension at creation; on reopen refuse a different one."""
        schema = self._get_entry(_INTERNAL, _SCHEMA_KEY)
        if schema is not None and self._dense_dim == 0:
            self._dense_dim = int(schema.get("dense_dim") or 0)
        if schema is None:
            if not create:
                raise StoreError(f"{self._name}: generation has no schema record (incomplete?)")
            self._put_entry(
                _INTERNAL, _SCHEMA_KEY, {"version": SCHEMA_VERSION, "dense_dim": self._dense_dim}
            )
            return
        if schema.get("dense_dim") != self._dense_dim:
            raise CompatibilityError(
                f"{self._name}: holds {schema.get('dense_dim')}-d dense vectors, "
                f"{self._dense_dim}-d were asked for"
            )


# ---------------------------------------------------------------- shared store logic


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
    def _close_collection(self, coll: CollectionBase) -> None: ...
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
                self._close_collection(coll)
            if generation in self.generations():
                self._remove(generation, was_active=self.active() == generation)

    def close(self) -> None:
        """Flush and release every open generation; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                for coll in self._open.values():
                    self._close_collection(coll)
            finally:
                self._open.clear()
                self._shutdown()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.location}: the store is closed")
