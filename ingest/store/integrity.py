"""Whether a generation still holds what its writer wrote (docs/ARCHITECTURE.md §3 rule 13a).

A damaged file under the store loses points or vectors without an error from the engine: a
truncated id tracker leaves a handful of points that search, count and the cursors all accept
as the whole index. So the adapter keeps its own tally of chat points beside the cursors (an
internal meta entry, written around every chat upsert and delete) and compares it with the
engine's count at open. A write in flight when the process died leaves the tally's `pending`
set, so either side of that one write is accepted: a kill -9 is not damage.

Vectors are checked by a sample's norms: the cosine store keeps every dense vector at unit
length, so random bytes over the vector file show as norms far from 1 (or not finite). A
sample of `SAMPLE` points costs one scroll at open (milliseconds at 100k points), and finds a
corruption covering a fraction f of the points with probability 1 - (1 - f)^256: 92 % at
f = 1 %, certain for a store smaller than the sample. A digest of every vector would find
any corruption but reads the whole vector file at every open.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

INTEGRITY_KEY = "integrity"
SAMPLE = 256
_NORM_TOLERANCE = 1e-3
_ZERO = 1e-6


@dataclass(frozen=True)
class Tally:
    """The chat points a generation holds; `pending`: the change of one write in flight."""

    points: int
    pending: int = 0

    def record(self) -> dict[str, int]:
        return {"points": self.points, "pending": self.pending}

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> Tally | None:
        if record is None:
            return None
        try:
            return cls(int(record["points"]), int(record.get("pending", 0)))
        except (KeyError, TypeError, ValueError):
            return None

    def explains(self, counted: int) -> bool:
        """Whether the engine's count is this tally, before or after its write in flight."""
        low, high = sorted((self.points, self.points + self.pending))
        return low <= counted <= high


def count_damage(tally: Tally | None, counted: int, *, tallied: bool) -> str | None:
    """Why `counted` chat points contradict the tally (None when they agree).

    `tallied`: the generation was built keeping a tally, so a missing one is damage too (an
    older generation gets one at its first open instead)."""
    if tally is None:
        return "its point tally is missing (damaged)" if tallied else None
    if tally.explains(counted):
        return None
    return f"holds {counted} points where its writer recorded {tally.points} (damaged files)"


def corrupt_vectors(vectors: Iterable[Sequence[float]]) -> int:
    """How many of these stored cosine vectors are not of unit length. A (near) zero vector is
    not counted: the engine stores one as given (it cannot be normalised), so an embedder's
    zero vector would otherwise make every rebuild damaged again."""
    bad = 0
    for v in vectors:
        norm = math.sqrt(math.fsum(x * x for x in v))
        if not math.isfinite(norm) or (norm > _ZERO and abs(norm - 1.0) > _NORM_TOLERANCE):
            bad += 1
    return bad


def vector_damage(vectors: Sequence[Sequence[float]]) -> str | None:
    bad = corrupt_vectors(vectors)
    if not bad:
        return None
    return f"{bad} of {len(vectors)} sampled dense vectors are corrupt (not of unit length)"


__all__ = [
    "INTEGRITY_KEY",
    "SAMPLE",
    "Tally",
    "corrupt_vectors",
    "count_damage",
    "vector_damage",
]
