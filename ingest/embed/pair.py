"""Two bundled embedders as one vector space: MiniLM's vector and e5's, side by side.

Each text is embedded by both models and the two unit vectors are concatenated, each scaled by
1/sqrt(2): the result is a unit vector whose dot product with another is the mean of the two
models' cosines. So the store holds one dense vector a point (768-d) and one list answers a
query, ranked by both models at once, with no change to the store, the fusion or the floor.
MiniLM reads English names and words well, e5 reads meaning across 100 languages; on the
locomo-dev folds the pair beats either alone on every conversation (bench/RESULTS.md §11).

The identity names both models (`all-MiniLM-L6-v2-int8+multilingual-e5-small-q4-ort1`), so a
change of either rebuilds the index. Each model keeps its own idle unload.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ingest.embed.base import Embedder, LineVector, WindowVectors, lines_of
from ingest.rules.language import each_reads_as_english
from ingest.types import EmbedderIdentity

__all__ = ["PART_SCALE", "PairEmbedder", "is_pair", "joined", "parts"]

_SCALE = 1.0 / math.sqrt(2.0)
# A part's score in the store (`parts`) times this is the model's own cosine.
PART_SCALE = 1.0 / _SCALE


def joined(
    first: Sequence[float] | npt.NDArray[np.float32],
    second: Sequence[float] | npt.NDArray[np.float32],
) -> list[float]:
    """Two unit vectors as one: their concatenation scaled so that it is a unit vector too, and
    the dot product of two joined vectors is the mean of their parts' cosines."""
    return [x * _SCALE for x in first] + [x * _SCALE for x in second]


def is_pair(identity: EmbedderIdentity) -> bool:
    """Whether vectors of `identity` are a pair's (two models' vectors side by side)."""
    return identity.provider == "local" and "+" in identity.model


def parts(vector: Sequence[float]) -> tuple[list[float], list[float]]:
    """A pair's query vector as two query vectors, one a model: each keeps its model's half
    (at unit length) and zeroes the other's, so its cosine with a stored pair vector is that
    model's own cosine, scaled by 1/sqrt(2) (`PART_SCALE` undoes it)."""
    half = len(vector) // 2
    zeros = [0.0] * half
    first = [x / _SCALE for x in vector[:half]]
    second = [x / _SCALE for x in vector[half:]]
    return first + zeros, zeros + second


class PairEmbedder:
    """`first` and `second` as one `Embedder` (their dimensions add)."""

    def __init__(self, first: Embedder, second: Embedder) -> None:
        self.first = first
        self.second = second

    @property
    def identity(self) -> EmbedderIdentity:
        return _pair_identity(self.first.identity, self.second.identity)

    async def probe(self) -> EmbedderIdentity:
        return _pair_identity(await self.first.probe(), await self.second.probe())

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        # Both at once: onnxruntime releases the GIL, and a run's threads leave gaps the other
        # model's fill (bench/RESULTS.md §14).
        a, b = await asyncio.gather(
            self.first.embed_documents(texts), self.second.embed_documents(texts)
        )
        return [joined(x, y) for x, y in zip(a, b, strict=True)]

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        """The first model's window and late-chunked lines (`embed_windows`, one pass) beside
        the second's window vector, both at once. The second model's line vectors only where
        a line of the window does not read as English (rule 22e: MiniLM reads other languages
        as noise), each line embedded alone, and the line is both halves; in an English window
        a line is the first model's half alone (the second's would be the window's own
        vector, the same for each line: half the bytes stored for nothing, RESULTS §15)."""
        english = [each_reads_as_english(lines_of(t)) for t in texts]
        foreign = [t for t, e in zip(texts, english, strict=True) if not e]
        a, b, c = await asyncio.gather(
            self.first.embed_windows(texts),
            self.second.embed_documents(texts),
            self.second.embed_windows(foreign) if foreign else _none(),
        )
        alone = iter(c)
        out: list[WindowVectors] = []
        for x, window, e in zip(a, b, english, strict=True):
            lines: list[LineVector | None]
            if e:
                lines = [
                    None if u is None else np.asarray(u, np.float32) * _SCALE for u in x.lines
                ]
            else:
                lines = [
                    joined(u, v) if u is not None and v is not None else None
                    for u, v in zip(x.lines, next(alone).lines, strict=True)
                ]
            out.append(WindowVectors(joined(x.window, window), lines))
        return out

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        # Both at once, as documents are.
        a, b = await asyncio.gather(
            self.first.embed_queries(texts), self.second.embed_queries(texts)
        )
        return [joined(x, y) for x, y in zip(a, b, strict=True)]

    async def close(self) -> None:
        await asyncio.gather(self.first.close(), self.second.close())


async def _none() -> list[WindowVectors]:
    return []


def _pair_identity(a: EmbedderIdentity, b: EmbedderIdentity) -> EmbedderIdentity:
    # The profiles are the parts' own (each model adds its prefixes), recorded side by side.
    return EmbedderIdentity(
        provider=a.provider,
        model=f"{a.model}+{b.model}",
        dimension=a.dimension + b.dimension,
        document_profile=f"{a.document_profile}+{b.document_profile}",
        query_profile=f"{a.query_profile}+{b.query_profile}",
    )
