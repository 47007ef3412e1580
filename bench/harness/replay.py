"""The read path replayed over `bench.retrieval --folds`' candidate cache, for `bench.loco`: the
first stage (dense and lexical lists, the lexical floor, RRF) exactly as `ingest.search` does
it, then the second stage: the features of `ingest.search.ranking.rank` over a question's fused
pool, the logistic ranker and match model fitted on training questions, and ranking with a
floor."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.locomo import Hit, Scores
from ingest.search.ranking import judgment, rank
from ingest.search.ranking.fusion import rrf
from ingest.search.retrieve import LEXICAL_FLOOR

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LIMIT = 50
Found = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Question:
    conv: int
    text: str
    category: int
    evidence: tuple[str, ...]
    dense: Found
    lexical: Found
    lexical_nostop: Found
    dense2: Found = ()  # a pair embedder's second model's list (`ingest.search.retrieve`)
    # the messages each listed window lists, by the product (issue 47) and before it
    quotes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    quotes_before: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Data:
    questions: tuple[Question, ...]
    windows: tuple[Mapping[str, Sequence[tuple[str, str, str]]], ...]  # per conv: (dia, snd, body)
    names: tuple[str, ...]
    # Per conv, when the cache holds them: each window's (first_ts, last_ts).
    spans: tuple[Mapping[str, tuple[int, int]], ...] = ()


def load(path: Path) -> Data:
    doc = json.loads(path.read_text(encoding="utf-8"))
    qs: list[Question] = []
    windows, names, spans = [], [], []
    for c, conv in enumerate(doc["conversations"]):
        names.append(str(conv["sample_id"]))
        windows.append({pid: [tuple(m) for m in msgs] for pid, msgs in conv["windows"].items()})
        spans.append({p: (int(a), int(b)) for p, (a, b) in conv.get("spans", {}).items()})
        qs.extend(
            Question(
                c,
                q["text"],
                int(q["category"]),
                tuple(q["evidence"]),
                _found(q["dense"]),
                _found(q["lexical"]),
                _found(q["lexical_nostop"]),
                _found(q.get("dense2", ())),
                {p: tuple(ids) for p, ids in q.get("quotes", {}).items()},
                {p: tuple(ids) for p, ids in q.get("quotes_before", {}).items()},
            )
            for q in conv["questions"]
        )
    return Data(tuple(qs), tuple(windows), tuple(names), tuple(spans))


def merged(a: Data, b: Data) -> Data:
    """`a`'s conversations, then `b`'s (its questions' `conv` shifted past `a`'s): one pool of
    data, so a lever fitted on `a`'s questions alone can rank `b`'s (`bench.loco --transfer`)."""
    shift = len(a.names)
    moved = tuple(replace(q, conv=q.conv + shift) for q in b.questions)
    spans = (*a.spans, *b.spans) if a.spans and b.spans else ()
    return Data(a.questions + moved, a.windows + b.windows, a.names + b.names, spans)


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


def lists(q: Question, s: Stage1) -> tuple[Found, Found, Found]:
    """The dense, lexical and (a pair's) second dense list as the product fuses them."""
    lex = q.lexical_nostop if s.nostop else q.lexical
    fusing = s.dense > 0
    dense2 = q.dense2[: s.n] if fusing else ()
    return q.dense[: s.n], floored(lex[: s.n], LEXICAL_FLOOR if fusing else 0.0), dense2


def fused(q: Question, s: Stage1) -> list[str]:
    d, lx, d2 = lists(q, s)
    runs = {("dense", q.text): [p for p, _ in d], ("lexical", q.text): [p for p, _ in lx]}
    if d2:
        runs[("dense2", q.text)] = [p for p, _ in d2]
    weights = {"dense": s.dense, "dense2": s.dense, "lexical": s.lexical}
    return [p for p, _ in rrf(runs, k=s.k, weights=weights)]


def hits(data: Data, q: Question, ranked: Sequence[str]) -> list[Hit]:
    w = data.windows[q.conv]
    return [Hit(tuple((dia, len(body)) for dia, _, body in w[p])) for p in ranked[:LIMIT]]


def message_hits(
    data: Data, q: Question, ranked: Sequence[str], before: bool = False
) -> list[Hit]:
    """The messages a person is listed, in order (rule 22b): each ranked window's matches by
    the words, else the one message it quotes (the product's, or `before` issue 47's), each
    a hit of its own; a window the cache has no quote for lists its first message."""
    w = data.windows[q.conv]
    quotes = q.quotes_before if before else q.quotes
    out: list[Hit] = []
    for p in ranked:
        length = {dia: len(body) for dia, _, body in w[p]}
        for dia in quotes.get(p, (w[p][0][0],)):
            out.append(Hit(((dia, length.get(dia, 0)),)))
            if len(out) >= LIMIT:
                return out
    return out


def scores(data: Data, qs: Sequence[Question], ranked: Sequence[Sequence[str]]) -> Scores:
    s = Scores()
    for q, r in zip(qs, ranked, strict=True):
        s.add(hits(data, q, r), q.evidence)
    return s


def spans(data: Data, q: Question, pool: Sequence[str]) -> dict[str, rank.Span]:
    """The pool's time spans (one timeline a conversation), where the cache holds them."""
    known = data.spans[q.conv] if data.spans else {}
    return {p: (data.names[q.conv], *known[p]) for p in pool if p in known}


# ---------------------------------------------------------------- the second stage


def label(data: Data, q: Question, pid: str) -> float:
    ev = set(q.evidence)
    return float(any(dia in ev for dia, _, _ in data.windows[q.conv][pid]))


@cache
def _pool_features(
    data_id: int,
    qi: int,
    s: Stage1,
    stem: int | None,
    length_cap: float,
    english_only: bool,
) -> tuple[list[str], np.ndarray]:
    data = _DATA[data_id]
    q = data.questions[qi]
    pool = fused(q, s)
    d, lx, d2 = lists(q, s)
    w = data.windows[q.conv]
    bodies = {p: [body for _, _, body in w[p]] for p in pool}
    senders = {p: [snd for _, snd, _ in w[p]] for p in pool}
    rows = rank.features(
        q.text,
        pool,
        bodies,
        d,
        lx,
        senders,
        stem=stem,
        spans=spans(data, q, pool),
        dense2=d2,
        length_cap=length_cap,
        english_only=english_only,
    )
    return pool, np.asarray(rows, dtype=float).reshape(len(pool), len(rank.FEATURES))


_DATA: dict[int, Data] = {}


def pool_features(
    data: Data,
    qi: int,
    s: Stage1,
    stem: int | None = rank.STEM,
    length_cap: float = rank.LENGTH_CAP,
    english_only: bool = True,
) -> tuple[list[str], np.ndarray]:
    _DATA[id(data)] = data
    return _pool_features(id(data), qi, s, stem, length_cap, english_only)


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    l2: float = 1e-2,
    iters: int = 50,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Pointwise logistic regression by Newton's method (IRLS); weights [bias, *features].
    `weights`: one per row (soft labels allowed); none is every row at 1."""
    sw = np.ones(len(x)) if weights is None else weights
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    reg = l2 * np.eye(xb.shape[1])
    reg[0, 0] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -60, 60)))
        grad = xb.T @ (sw * (p - y)) + reg @ w
        hess = (xb * (sw * p * (1 - p))[:, None]).T @ xb + reg + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def coefficients(w: np.ndarray, mask: Sequence[bool]) -> dict[str, float]:
    out = {"bias": float(w[0])}
    it = iter(w[1:])
    for f, keep in zip(rank.FEATURES, mask, strict=True):
        out[f] = float(next(it)) if keep else 0.0
    return out


# The features the product's ranker leaves out: the raw cosine (the match model's instead) and
# the lexical score against the list's best (since RANKER_VERSION 3: its rank says it).
PRODUCT_OFF = ("dense", "lexical", "dense2")


@dataclass(frozen=True)
class Ranker:
    stage1: Stage1
    # The product's: every feature but `PRODUCT_OFF`.
    mask: tuple[bool, ...] = tuple(f not in PRODUCT_OFF for f in rank.FEATURES)
    l2: float = 1e-2
    stem: int | None = rank.STEM
    length_cap: float = rank.LENGTH_CAP  # math.inf: ranker v4's uncapped `length`
    english_only: bool = True  # False: ranker v5, MiniLM's rank read in every language
    # a close match's ranker probability reaches the floor too (`RankModel.ranked_floor`)
    ranked_floor: bool = True
    # a text no candidate holds a word of: this bar (None: the calibrated floor, as the
    # replay fits one; the product keeps its old one there, `models.PAIR.wordless_floor`)
    wordless_floor: float | None = None

    def features(self, data: Data, qi: int) -> tuple[list[str], np.ndarray]:
        """Question `qi`'s fused pool and its feature rows, as this ranker reads them."""
        return pool_features(data, qi, self.stage1, self.stem, self.length_cap, self.english_only)

    def train(self, data: Data, qis: Sequence[int]) -> Model:
        """The ranker and the match model (`rank.MATCH_FEATURES`) fitted on `qis`."""
        xs, ys = [], []
        for qi in qis:
            pool, x = self.features(data, qi)
            if not pool:
                continue
            xs.append(x)
            ys.append([label(data, data.questions[qi], p) for p in pool])
        x, y = np.vstack(xs), np.concatenate(ys)
        ranker = coefficients(fit_logistic(x[:, list(self.mask)], y, self.l2), self.mask)
        only = tuple(f in rank.MATCH_FEATURES for f in rank.FEATURES)
        match = coefficients(fit_logistic(x[:, list(only)], y, self.l2), only)
        return Model(ranker, match)

    def rank(
        self, data: Data, qi: int, model: Model, floor: float = 0.0, view: str = "agents"
    ) -> list[str]:
        """The pool in the ranker's order, judged by the match model at `floor` as the
        product's views list it (`ingest.search.ranking.judgment.Judgment`): `agents` every one,
        marked (`--json`, the default; a person's pages too since 7 Dec, close as far as the
        first weaker one), `first` the close ones then the rest (a person's pages until 7 Dec),
        `people` the close ones, else all (a person's view before 4 Dec),
        `cut` the close ones alone (ranker v4's floor)."""
        pool, x = self.features(data, qi)
        if not pool:
            return []
        p = _apply(x, model.ranker)
        m = _apply(x, model.match)
        order = sorted(range(len(pool)), key=lambda i: -p[i])  # stable: fused order on ties
        # A window without an identifier the question names is no close match (issue 46).
        named = judgment.identifiers(data.questions[qi].text)
        w = data.windows[data.questions[qi].conv]
        said = [[b for _, _, b in w[p]] for p in pool]
        says = judgment.says_a_word(data.questions[qi].text, said)
        if not says:  # stems alone match no word
            m = _apply(np.asarray([judgment.stems_unmatched(r) for r in x]), model.match)
        worded = says and bool((x[:, rank.FEATURES.index("best_message")] > 0).any())
        if not worded and self.wordless_floor is not None:
            floor = self.wordless_floor
        ok = [
            m[i] >= floor
            and (not self.ranked_floor or p[i] >= floor)
            and judgment.holds_all([b for _, _, b in w[pool[i]]], named)
            for i in order
        ]
        close = [pool[i] for i, good in zip(order, ok, strict=True) if good]
        rest = [pool[i] for i, good in zip(order, ok, strict=True) if not good]
        if view == "cut":
            return close
        if view == "people":
            return close or rest
        if view == "first":
            return close + rest
        return [pool[i] for i in order]


@dataclass(frozen=True)
class Model:
    ranker: dict[str, float]
    match: dict[str, float]


def _apply(x: np.ndarray, coef: Mapping[str, float]) -> np.ndarray:
    w = np.array([coef.get(f, 0.0) for f in rank.FEATURES])
    z = np.clip(x @ w + coef["bias"], -60, 60)
    return np.asarray(1.0 / (1.0 + np.exp(-z)))
