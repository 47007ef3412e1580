"""`bench.loco`'s data: the cached candidate lists of `bench.candidates`, and the first stage of
the read path (dense and lexical lists, the lexical floor, RRF) replayed exactly as
`ingest.search` does it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import Hit, Scores
from ingest import rank
from ingest.fusion import rrf
from ingest.search import LEXICAL_FLOOR

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LIMIT = 50
Found = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Part:
    """One of the texts `bench.split` cut a question into, with its own lists."""

    text: str
    vector: tuple[float, ...]
    dense: Found
    lexical_nostop: Found


@dataclass(frozen=True)
class Question:
    conv: int
    text: str
    category: int
    evidence: tuple[str, ...]
    dense: Found
    lexical: Found
    lexical_nostop: Found
    vector: tuple[float, ...] = ()
    parts: tuple[Part, ...] = ()


@dataclass(frozen=True)
class Data:
    questions: tuple[Question, ...]
    windows: tuple[Mapping[str, Sequence[tuple[str, str, str]]], ...]  # per conv: (dia, snd, body)
    names: tuple[str, ...]
    # Per conv, when the cache holds them (`bench.candidates`): each message's own vector by
    # turn id, each window's (first_ts, last_ts), what embedding messages costs.
    message_vectors: tuple[Mapping[str, np.ndarray], ...] = ()
    spans: tuple[Mapping[str, tuple[int, int]], ...] = ()
    costs: tuple[Mapping[str, float], ...] = ()
    # Per conv, when the cache holds them: each window's own vector by window id.
    window_vectors: tuple[Mapping[str, np.ndarray], ...] = ()


def load(path: Path) -> Data:
    doc = json.loads(path.read_text(encoding="utf-8"))
    qs: list[Question] = []
    windows = []
    names = []
    vectors, spans, costs, wvs = [], [], [], []
    for c, conv in enumerate(doc["conversations"]):
        names.append(str(conv["sample_id"]))
        windows.append({pid: [tuple(m) for m in msgs] for pid, msgs in conv["windows"].items()})
        vectors.append({d: np.asarray(v) for d, v in conv.get("message_vectors", {}).items()})
        spans.append({p: (int(a), int(b)) for p, (a, b) in conv.get("spans", {}).items()})
        costs.append(conv.get("cost", {}))
        wvs.append({p: np.asarray(v) for p, v in conv.get("window_vectors", {}).items()})
        for q in conv["questions"]:
            qs.append(
                Question(
                    c,
                    q["text"],
                    int(q["category"]),
                    tuple(q["evidence"]),
                    _found(q["dense"]),
                    _found(q["lexical"]),
                    _found(q["lexical_nostop"]),
                    vector=tuple(q.get("vector", ())),
                    parts=tuple(
                        Part(
                            p["text"],
                            tuple(p["vector"]),
                            _found(p["dense"]),
                            _found(p["lexical_nostop"]),
                        )
                        for p in q.get("parts", ())
                    ),
                )
            )
    return Data(
        tuple(qs),
        tuple(windows),
        tuple(names),
        tuple(vectors),
        tuple(spans),
        tuple(costs),
        tuple(wvs),
    )


def _found(rows: Sequence[Sequence[Any]]) -> Found:
    return tuple((str(p), float(s)) for p, s in rows)


# ---------------------------------------------------------------- the read path, replayed


@dataclass(frozen=True)
class Stage1:
    k: int = 60
    n: int = 20
    nostop: bool = False
    dense: float = 1.0
    lexical: float = 1.0


def floored(found: Found, floor: float) -> Found:
    if not found or floor <= 0:
        return found
    cut = found[0][1] * floor
    return tuple(x for x in found if x[1] >= cut)


def lists(q: Question, s: Stage1) -> tuple[Found, Found]:
    lex = q.lexical_nostop if s.nostop else q.lexical
    fusing = s.dense > 0
    return q.dense[: s.n], floored(lex[: s.n], LEXICAL_FLOOR if fusing else 0.0)


def fused(q: Question, s: Stage1) -> list[str]:
    d, lx = lists(q, s)
    ranked = rrf(
        {("dense", q.text): [p for p, _ in d], ("lexical", q.text): [p for p, _ in lx]},
        k=s.k,
        weights={"dense": s.dense, "lexical": s.lexical},
    )
    return [p for p, _ in ranked]


def hits(data: Data, q: Question, ranked: Sequence[str]) -> list[Hit]:
    w = data.windows[q.conv]
    return [Hit(tuple((dia, len(body)) for dia, _, body in w[p])) for p in ranked[:LIMIT]]


def scores(data: Data, qs: Sequence[Question], ranked: Sequence[Sequence[str]]) -> Scores:
    s = Scores()
    for q, r in zip(qs, ranked, strict=True):
        s.add(hits(data, q, r), q.evidence)
    return s


def spans(data: Data, q: Question, pool: Sequence[str]) -> dict[str, rank.Span]:
    """The pool's time spans (one timeline a conversation), where the cache holds them."""
    known = data.spans[q.conv] if data.spans else {}
    return {p: (data.names[q.conv], *known[p]) for p in pool if p in known}
