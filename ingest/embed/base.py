"""The embedder protocol and what every embedder shares: `Embedder`, `WindowVectors`,
`DelegatingEmbedder`. Apart from `ingest.embed` (the factory) so the concrete embedders
import it without an import loop through the package."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ingest.types import EmbedderIdentity

__all__ = [
    "DelegatingEmbedder",
    "Embedder",
    "LineVector",
    "WindowVectors",
    "lines_alone",
    "lines_of",
]

LineVector = Sequence[float] | npt.NDArray[np.float32]  # a line's vector (`WindowVectors`)


@dataclass(frozen=True)
class WindowVectors:
    """A window's document vector and one a line of its text (`lines_of`), from one pass of
    the model over the whole text (late chunking: each line's token states pooled where they
    stand, so a line is read in its window's context). A line the model did not read (cut at
    its token limit) has None."""

    window: list[float]
    # A line's vector: a float32 array where the model pooled it (a Python list of floats
    # costs eight times its bytes, and a page's lines were the import's peak, RESULTS §15).
    lines: list[LineVector | None]


def lines_of(text: str) -> list[str]:
    """The lines of a window's text as `embed_windows` pools them: split at newlines (a
    message's own line breaks are folded into spaces by the chunker)."""
    return text.split("\n")


async def lines_alone(
    embed_documents: Callable[[Sequence[str]], Awaitable[list[list[float]]]],
    texts: Sequence[str],
) -> list[WindowVectors]:
    """`WindowVectors` of a model that pools no line from a window's pass: each line embedded
    as a document of its own, in the same call as the windows (a line said twice once)."""
    lines = [lines_of(t) for t in texts]
    distinct = list(dict.fromkeys(line for ls in lines for line in ls))
    vectors = await embed_documents([*texts, *distinct])
    by_line = dict(zip(distinct, vectors[len(texts) :], strict=True))
    return [
        WindowVectors(window, [by_line[line] for line in ls])
        for window, ls in zip(vectors[: len(texts)], lines, strict=True)
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

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        """Each window text's document vector and its lines' (`WindowVectors`), in order.
        The writer's call: a window's vector equals `embed_documents`'s for the same text
        (within a model's float noise)."""
        ...

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

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        return await self.inner.embed_windows(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_queries(texts)

    async def close(self) -> None:
        await self.inner.close()
