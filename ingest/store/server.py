"""A Qdrant server (or cluster) through qdrant-client: a collection per generation.

The collection alias `<collection>` names the active generation, so a switch is one atomic
`update_collection_aliases` call (delete alias + create alias in one request), and any other
Qdrant tool querying `<collection>` reads what Muninn searches. Every write waits for the
server's acknowledgement (`wait=True`): the writer advances a cursor only after that (rule 10).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ingest.errors import CompatibilityError, StoreError, StoreUnavailable
from ingest.store.base import CollectionBase
from ingest.store.contract import (
    CHAT,
    DENSE,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    LEXICAL,
    IntRange,
    PointRecord,
    Raw,
    Scored,
    Term,
)
from ingest.store.storebase import StoreBase

_UPSERT_BATCH = 256  # keeps a request well under the server's 32 MiB default body limit
_UNAVAILABLE_STATUS = {502, 503, 504}


@contextlib.contextmanager
def _guard(where: str, op: str) -> Iterator[None]:
    """Connection trouble → StoreUnavailable naming the server; anything else → StoreError."""
    try:
        yield
    except StoreError:
        raise
    except (ResponseHandlingException, httpx.TransportError, ConnectionError) as e:
        raise StoreUnavailable(f"{where}: {op} failed, server unreachable: {e}") from e
    except UnexpectedResponse as e:
        if e.status_code is None or e.status_code in _UNAVAILABLE_STATUS:
            raise StoreUnavailable(f"{where}: {op} failed: {e}") from e
        raise StoreError(f"{where}: {op} failed: {e}") from e
    except Exception as e:
        raise StoreError(f"{where}: {op} failed: {e}") from e


def _condition(term: Term) -> models.Condition:
    if isinstance(term, IntRange):
        return models.FieldCondition(key=term.key, range=models.Range(gte=term.gte, lte=term.lte))
    match = models.FieldCondition(key=term.key, match=models.MatchAny(any=list(term.values)))
    if not term.or_empty:
        return match
    missing = models.IsEmptyCondition(is_empty=models.PayloadField(key=term.key))
    return models.Filter(should=[missing, match])


def _filter(corpus: str, terms: list[Term]) -> models.Filter:
    corpus_is = models.FieldCondition(key="corpus", match=models.MatchValue(value=corpus))
    return models.Filter(must=[corpus_is, *(_condition(t) for t in terms)])


class ServerCollection(CollectionBase):
    """One Qdrant collection."""

    def __init__(self, name: str, dense_dim: int | None, client: QdrantClient, where: str) -> None:
        super().__init__(name, dense_dim)
        self._client = client
        self._where = where

    def _guard(self, op: str) -> contextlib.AbstractContextManager[None]:
        return _guard(self._where, f"{op} on {self._name}")

    def _upsert_chat(self, points: Sequence[PointRecord], payloads: list[dict[str, Any]]) -> None:
        structs = [
            models.PointStruct(
                id=p.id,
                vector={
                    DENSE: [float(x) for x in p.dense],
                    LEXICAL: models.SparseVector(
                        indices=list(p.sparse.indices), values=list(p.sparse.values)
                    ),
                },
                payload=payload,
            )
            for p, payload in zip(points, payloads, strict=True)
        ]
        for start in range(0, len(structs), _UPSERT_BATCH):
            batch = structs[start : start + _UPSERT_BATCH]
            self._client.upsert(self._name, points=batch, wait=True)

    def _upsert_bare(self, point_id: str, payload: dict[str, Any]) -> None:
        point = models.PointStruct(id=point_id, vector={}, payload=payload)
        self._client.upsert(self._name, points=[point], wait=True)

    def _delete(self, ids: list[str]) -> None:
        selector = models.PointIdsList(points=list(ids))
        self._client.delete(self._name, points_selector=selector, wait=True)

    def _retrieve(self, ids: list[str]) -> list[Raw]:
        records = self._client.retrieve(self._name, ids, with_payload=True, with_vectors=False)
        return [(str(r.id), dict(r.payload or {})) for r in records]

    def _scroll(self, corpus: str, terms: list[Term], batch: int) -> Iterator[Raw]:
        offset: Any = None
        flt = _filter(corpus, terms)
        while True:
            records, offset = self._client.scroll(
                self._name,
                scroll_filter=flt,
                limit=batch,
                offset=offset,
                with_payload=True,
                with_vectors=False,
            )
            for r in records:
                yield str(r.id), dict(r.payload or {})
            if offset is None:
                return

    def _count(self, corpus: str, terms: list[Term]) -> int:
        result = self._client.count(self._name, count_filter=_filter(corpus, terms), exact=True)
        return int(result.count)

    def _search(self, using: str, vector: Any, terms: list[Term], limit: int) -> list[Scored]:
        if using == LEXICAL:
            vector = models.SparseVector(indices=list(vector.indices), values=list(vector.values))
        response = self._client.query_points(
            self._name,
            query=vector,
            using=using,
            query_filter=_filter(CHAT, terms),
            limit=limit,
            with_payload=True,
            with_vectors=False,
        )
        return [(str(h.id), dict(h.payload or {}), float(h.score)) for h in response.points]

    def flush(self) -> None:
        """Nothing to do: every write already waited for the server."""

    def optimize(self) -> None:
        """Nothing to do: the server optimizes in the background."""


class ServerStore(StoreBase):
    """Generations as server collections; the alias `<collection>` is the active pointer."""

    def __init__(self, client: QdrantClient, collection: str, where: str) -> None:
        super().__init__(collection)
        self._client = client
        self._where = where

    @classmethod
    def connect(cls, url: str, collection: str, api_key: str | None = None) -> ServerStore:
        """A store on a server; no request is made until the first operation."""
        with _guard(url, "connect"):
            # check_compatibility would make a request (and only warn) at construction.
            client = QdrantClient(url=url, api_key=api_key, check_compatibility=False, timeout=30)
        return cls(client, collection, f"qdrant at {url}")

    @property
    def location(self) -> str:
        return self._where

    def generations(self) -> list[str]:
        with _guard(self._where, "list collections"):
            names = [c.name for c in self._client.get_collections().collections]
        return sorted(n for n in names if n.startswith(f"{self.collection}-"))

    def active(self) -> str | None:
        with _guard(self._where, "read aliases"):
            aliases = self._client.get_aliases().aliases
        return next((a.collection_name for a in aliases if a.alias_name == self.collection), None)

    def _open_generation(
        self, generation: str, dense_dim: int | None, create: bool
    ) -> CollectionBase:
        with _guard(self._where, f"open {generation}"):
            if self._client.collection_exists(generation):
                if dense_dim is not None:
                    self._check_dim(generation, dense_dim)
            elif create and dense_dim is not None:
                self._create(generation, dense_dim)
            else:
                raise StoreError(f"{self._where}: no generation {generation!r}")
        coll = ServerCollection(generation, dense_dim, self._client, self._where)
        coll.ensure_schema(create=create)
        coll.check_integrity()
        return coll

    def _check_dim(self, generation: str, dense_dim: int) -> None:
        vectors = self._client.get_collection(generation).config.params.vectors
        params = vectors.get(DENSE) if isinstance(vectors, dict) else None
        if params is None or params.size != dense_dim:
            have = "no 'dense' vector" if params is None else f"{params.size}-d dense vectors"
            raise CompatibilityError(f"{generation}: holds {have}, {dense_dim}-d were asked for")

    def _create(self, generation: str, dense_dim: int) -> None:
        self._client.create_collection(
            generation,
            vectors_config={
                DENSE: models.VectorParams(size=dense_dim, distance=models.Distance.COSINE)
            },
            sparse_vectors_config={
                LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
        )
        fields = [(f, models.PayloadSchemaType.KEYWORD) for f in KEYWORD_FIELDS]
        fields += [(f, models.PayloadSchemaType.INTEGER) for f in INTEGER_FIELDS]
        with warnings.catch_warnings():
            # Local mode (tests) warns that payload indexes have no effect there; that is known.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            for field, schema in fields:
                self._client.create_payload_index(generation, field, schema, wait=True)

    def _set_active(self, generation: str) -> None:
        with _guard(self._where, f"activate {generation}"):
            self._client.update_collection_aliases(
                change_aliases_operations=[
                    # "Delete alias if exists" + create, applied by the server as one change.
                    models.DeleteAliasOperation(
                        delete_alias=models.DeleteAlias(alias_name=self.collection)
                    ),
                    models.CreateAliasOperation(
                        create_alias=models.CreateAlias(
                            collection_name=generation, alias_name=self.collection
                        )
                    ),
                ]
            )

    def _remove(self, generation: str, was_active: bool) -> None:
        with _guard(self._where, f"drop {generation}"):
            if was_active:
                delete = models.DeleteAlias(alias_name=self.collection)
                self._client.update_collection_aliases(
                    change_aliases_operations=[models.DeleteAliasOperation(delete_alias=delete)]
                )
            self._client.delete_collection(generation)

    def _rename(self, generation: str, new_name: str, was_active: bool) -> None:
        # A server collection has no rename; its files are the server's to keep whole.
        raise StoreError(
            f"{self._where}: {generation} is damaged and a server collection cannot be set "
            "aside: drop it (the next refresh rebuilds it)"
        )

    def _close_collection(self, coll: CollectionBase, *, compact: bool) -> None:
        """Collections share the store's client; nothing is held per collection."""

    def _shutdown(self) -> None:
        with _guard(self._where, "close"):
            self._client.close()
