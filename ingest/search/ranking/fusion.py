"""Reciprocal rank fusion (Cormack, Clarke, Büttcher, SIGIR 2009) over any number of ranked lists.

score(id) = Σ over lists of weight(retriever) / (k + rank), rank starting at 1, k = 60.

Lists are keyed by `(retriever, text)`. Two keys naming the same retriever and the same text
(after `text_key` normalisation) are one list: a question asked twice is still one vote per
retriever, so duplicating a text cannot double its weight in the fusion.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence

__all__ = ["DEFAULT_K", "ListKey", "rrf", "text_key"]

DEFAULT_K = 60

ListKey = tuple[str, str]
"""(retriever name, query text), e.g. ("dense", "when did we move the server")."""


def text_key(text: str) -> str:
    """The identity of a query text for de-duplication: NFKC, case-folded, whitespace collapsed.

    Case is folded because both retrievers are case-blind (MiniLM's tokenizer is uncased, the
    lexical index lower-cases), so "Foo" and "foo" fetch the same candidates.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split())


def _collapse(lists: Mapping[ListKey, Sequence[str]]) -> dict[ListKey, Sequence[str]]:
    """Keep the first list for each normalised key (dict order is insertion order)."""
    unique: dict[ListKey, Sequence[str]] = {}
    for (retriever, text), ids in lists.items():
        unique.setdefault((retriever, text_key(text)), ids)
    return unique


def rrf(
    lists: Mapping[ListKey, Sequence[str]],
    k: int = DEFAULT_K,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked id lists into one ranking, best first.

    Args:
        lists: ranked ids per (retriever, text), best first. An id repeated inside one list
            counts once, at its best rank.
        k: the RRF constant; larger flattens the advantage of the top ranks.
        weights: per-retriever multiplier (default 1.0). A weight of 0 drops that retriever.

    Returns:
        (id, score) pairs ordered by score desc, then best rank over all lists asc, then id asc,
        so equal scores always come out in the same order.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    weights = weights or {}
    terms: dict[str, list[float]] = {}
    best_rank: dict[str, int] = {}
    for (retriever, _text), ids in _collapse(lists).items():
        weight = weights.get(retriever, 1.0)
        if weight < 0 or math.isnan(weight):
            raise ValueError(f"weight of {retriever!r} must be >= 0, got {weight}")
        if weight == 0:
            continue
        seen: set[str] = set()
        for rank, point_id in enumerate(ids, start=1):
            if point_id in seen:
                continue
            seen.add(point_id)
            terms.setdefault(point_id, []).append(weight / (k + rank))
            best_rank[point_id] = min(rank, best_rank.get(point_id, rank))
    # fsum is correctly rounded, so a score does not depend on the order lists were given in:
    # two ids with the same contributions get bit-identical scores and fall to the tie-breaks.
    scored = [(point_id, math.fsum(parts)) for point_id, parts in terms.items()]
    scored.sort(key=lambda item: (-item[1], best_rank[item[0]], item[0]))
    return scored
