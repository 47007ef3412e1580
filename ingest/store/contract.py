"""The store contract: records, filters, names, and the protocols both adapters implement.

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
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ingest.errors import StoreError
from ingest.types import SparseVector, StoredPoint

DENSE = "dense"  # cosine, dimension fixed per generation
LEXICAL = "lexical"  # BM25 term-frequency weights from the caller; the engine applies IDF
CHAT = "chat"
META = "meta"

# The payload indexes: every field a query of the product filters on. `content_hash` is not
# one (the writer reads it from the points it scrolls, nothing filters by it): its index cost
# ~0.5 KB of memory a point (bench/RESULTS.md §10), so a `content_hashes` filter scans.
KEYWORD_FIELDS = ("corpus", "room_id", "event_ids", "senders", "thread_root")
INTEGER_FIELDS = ("first_ts", "last_ts")
RETIRED_INDEXES = ("content_hash",)  # dropped from a generation built with it, at open

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


# A damaged generation set aside keeps its name with this and a time after it (rule 13a).
DAMAGED = "-damaged-"


def generation_name(collection: str, compat: Mapping[str, Any]) -> str:
    """`<collection>-<12 hex>`: the same compatibility record always names the same generation."""
    canonical = json.dumps(compat, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return f"{check_name(collection, 'collection')}-{digest}"


Raw = tuple[str, dict[str, Any]]
Scored = tuple[str, dict[str, Any], float]


# ---------------------------------------------------------------- protocols


class Collection(Protocol):
    """One generation. Synchronous: async callers await `ingest.store.aio.AsyncCollection`."""

    @property
    def name(self) -> str: ...
    @property
    def dense_dim(self) -> int: ...
    @property
    def damage(self) -> str | None:
        """Why the generation no longer holds what was written to it, found at open."""
        ...

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
    def dense_searches(
        self,
        vectors: Sequence[Sequence[float]],
        flt: PointFilter | None,
        limit: int,
    ) -> list[list[StoredPoint]]:
        """`dense_search` of each vector, in one call."""
        ...

    def sparse_search(
        self, vector: SparseVector, flt: PointFilter | None, limit: int
    ) -> list[StoredPoint]: ...
    def get_meta(self, key: str) -> dict[str, Any] | None: ...
    def put_meta(self, key: str, value: Mapping[str, Any]) -> None: ...
    def delete_meta(self, key: str) -> None: ...
    def list_meta(self, prefix: str = "") -> dict[str, dict[str, Any]]: ...
    def flush(self) -> None: ...
    def forget_removed(self) -> None:
        """Text was taken out: the engine's files must not keep it past the next close."""
        ...

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
    def check_space(self) -> None:
        """Raise DiskFull while a write could not be stored safely (embedded store only)."""
        ...

    def set_aside(self, generation: str) -> str:
        """Rename a damaged generation (the active pointer follows it); its new name."""
        ...

    def close(self) -> None: ...
