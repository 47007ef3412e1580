"""More second-stage levers, scored leaving one conversation out against the product.

    python -m bench.loco_more --candidates bench/out/candidates-final.json [--out FILE]

Over a cache of `bench.candidates` with window spans (as `bench.loco_extra`), each lever is the
product's ranker (`bench.loco.PRODUCT`, `ingest.rank.FEATURES` but the raw cosine, the relevance
floor) with one change, fitted on two conversations and scored on the third:

- neighbours without the "?": the best coverage (and the first-pass score) of the window right
  before / right after a candidate in its timeline, among the candidates or among every window
  of the conversation (the read path would have to fetch those);
- the pool-relative coverage (against the pool's best) and its rank;
- query-term proximity inside a message (adjacent question terms met close together), a
  BM25-style coverage (term frequency saturated, BM25's IDF);
- a non-linear model: the logistic over the features and their pairwise products, or a small
  gradient-boosted tree ensemble (numpy, depth 2); a listwise softmax; other labels and
  weights; ordering by score per character; sessions diversified;
- candidate depth n = 40 / 50 with the final model.

The rows named "v3 …" are the ranker this kept (`ingest.rank` RANKER_VERSION 3) and what was
tried on top of it, paired against it too (bench/RESULTS.md §1d).

Prints the fold table, the per-category table and each lever's paired difference against the
product per question (mean ± standard error, then each fold).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import loco, loco_data, loco_extra, loco_rank
from bench.output import save
from ingest import lexical, rank

BEST = rank.FEATURES.index("best_message")
# The ranker before this stop's levers (RANKER_VERSION 2): the product's features but the raw
# cosine and best_message_gap (the "cov_gap" row, which this stop kept).
BASE = tuple(f for f in rank.FEATURES if f not in ("dense", "best_message_gap"))
EXTRAS = (
    "prev_pool",  # best_message of the pool predecessor, whatever it ends on
    "next_pool",  # best_message of the pool successor
    "prev_all",  # coverage of the conversation's window right before (pool or not)
    "next_all",  # … right after
    "cov_gap",  # best_message − the pool's best
    "cov_rank",  # 10 / (10 + rank of best_message in the pool)
    "proximity",  # share of the question's adjacent term pairs met within 3 tokens in a message
    "bm25",  # best message's BM25 (k1 1.2, b 0; IDF over the pool), / the pool's best
    "dense_prev",  # the pool predecessor's dense_gap (−1 when none)
    "named_cov",  # best_message over the messages sent by someone the question names
    "named_any",  # 1 if any message is sent by someone the question names
    "fused_rr",  # 10 / (10 + the window's rank in the fused pool)
    "dense_z",  # the cosine's z-score in the pool
    "cov_z",  # best_message's z-score in the pool
)
SECOND = ("nb_score",)  # the best first-pass probability among the pool neighbours
ALL = (*rank.FEATURES, *EXTRAS)


def _stem(t: str) -> str:
    return t[: rank.STEM]


def _coverage(terms: Sequence[str], idf: dict[str, float], bodies: Sequence[str]) -> float:
    total = sum(idf[t] for t in terms) or 1.0
    return max(
        (
            sum(idf[t] for t in terms if t in {_stem(x) for x in lexical.tokens(b)}) / total
            for b in bodies
        ),
        default=0.0,
    )


def _proximity(pairs: Sequence[tuple[str, str]], bodies: Sequence[str]) -> float:
    if not pairs:
        return 0.0
    best = 0.0
    for b in bodies:
        toks = [_stem(x) for x in lexical.tokens(b)]
        where: dict[str, list[int]] = {}
        for i, t in enumerate(toks):
            where.setdefault(t, []).append(i)
        met = 0
        for a, c in pairs:
            pa, pc = where.get(a, []), where.get(c, [])
            if any(abs(i - j) <= 3 for i in pa for j in pc):
                met += 1
        best = max(best, met / len(pairs))
    return best


def _bm25(terms: Sequence[str], idf: dict[str, float], bodies: Sequence[str]) -> float:
    best = 0.0
    for b in bodies:
        toks = [_stem(x) for x in lexical.tokens(b)]
        s = 0.0
        for t in terms:
            tf = toks.count(t)
            s += idf[t] * tf * 2.2 / (tf + 1.2)
        best = max(best, s)
    return best


@functools.cache
def _timeline(data_id: int, conv: int) -> tuple[list[tuple[int, int, str]], list[int]]:
    data = _DATA[data_id]
    line = sorted((a, b, p) for p, (a, b) in data.spans[conv].items())
    return line, [a for a, _, _ in line]


_DATA: dict[int, loco_data.Data] = {}


@functools.cache
def _sessions(data_id: int, conv: int) -> dict[str, int]:
    """Each window's session: windows chained by gaps of at most `rank.NEIGHBOUR_GAP_MS`."""
    line, _ = _timeline(data_id, conv)
    out: dict[str, int] = {}
    sid, end = 0, None
    for a, b, p in line:
        if end is not None and a - end > rank.NEIGHBOUR_GAP_MS:
            sid += 1
        out[p] = sid
        end = b if end is None else max(end, b)
    return out


def _conv_neighbours(data: loco_data.Data, conv: int, pid: str) -> tuple[str | None, str | None]:
    """The conversation's windows right before and right after `pid`, within the gap."""
    _DATA[id(data)] = data
    line, firsts = _timeline(id(data), conv)
    first, last = data.spans[conv][pid]
    i = bisect.bisect_left(firsts, first)
    while i < len(line) and line[i][2] != pid:
        i += 1
    prev = line[i - 1] if i > 0 else None
    nxt = line[i + 1] if i + 1 < len(line) else None
    p = prev[2] if prev and first - prev[1] <= rank.NEIGHBOUR_GAP_MS else None
    n = nxt[2] if nxt and nxt[0] - last <= rank.NEIGHBOUR_GAP_MS else None
    return p, n


@functools.cache
def _rows(data_id: int, qi: int, n: int) -> tuple[list[str], np.ndarray, dict[str, int]]:
    """A question's pool, every column of `ALL` for it, and each window's pool predecessor."""
    data = _DATA[data_id]
    q = data.questions[qi]
    s = loco_data.Stage1(loco.PRODUCT.k, n, True)
    pool = loco_data.fused(q, s)
    if not pool:
        return [], np.zeros((0, len(ALL))), {}
    d, lx = loco_data.lists(q, s)
    w = data.windows[q.conv]
    bodies = {p: [b for _, _, b in w[p]] for p in pool}
    senders = {p: [snd for _, snd, _ in w[p]] for p in pool}
    spans = loco_data.spans(data, q, pool)
    base = np.asarray(rank.features(q.text, pool, bodies, d, lx, senders, spans=spans))
    base = base.reshape(len(pool), len(rank.FEATURES))
    index = {p: i for i, p in enumerate(pool)}
    before = rank.previous(pool, spans)
    extra = np.zeros((len(pool), len(EXTRAS)))
    col = {e: i for i, e in enumerate(EXTRAS)}
    extra[:, col["dense_prev"]] = -1.0
    for p, o in before.items():
        extra[index[p], col["prev_pool"]] = base[index[o], BEST]
        extra[index[p], col["dense_prev"]] = base[index[o], 1]
        extra[index[o], col["next_pool"]] = max(
            extra[index[o], col["next_pool"]], base[index[p], BEST]
        )
    # The same terms and IDF as `rank.features`.
    words = rank.content_terms(q.text) or list(dict.fromkeys(lexical.tokens(q.text)))
    terms = list(dict.fromkeys(_stem(t) for t in words))
    toks = {p: {_stem(t) for b in bodies[p] for t in lexical.tokens(b)} for p in pool}
    npool = len(pool)
    idf = {t: math.log(1.0 + npool / (1 + sum(t in toks[p] for p in pool))) for t in terms}
    df = {t: sum(t in toks[p] for p in pool) for t in terms}
    bm_idf = {t: math.log(1.0 + (npool - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    pairs = list(itertools.pairwise(terms))
    for p in pool:
        i = index[p]
        prev, nxt = _conv_neighbours(data, q.conv, p) if data.spans else (None, None)
        if prev:
            extra[i, col["prev_all"]] = _coverage(terms, idf, [b for _, _, b in w[prev]])
        if nxt:
            extra[i, col["next_all"]] = _coverage(terms, idf, [b for _, _, b in w[nxt]])
        extra[i, col["proximity"]] = _proximity(pairs, bodies[p])
        mine = [
            b
            for b, u in zip(bodies[p], senders[p], strict=True)
            if rank.sender_names(u).intersection(words)
        ]
        extra[i, col["named_cov"]] = _coverage(terms, idf, mine)
        extra[i, col["named_any"]] = float(bool(mine))
        extra[i, col["bm25"]] = _bm25(terms, bm_idf, bodies[p])
    top = extra[:, col["bm25"]].max()
    if top > 0:
        extra[:, col["bm25"]] /= top
    cov = base[:, BEST]
    extra[:, col["cov_gap"]] = cov - cov.max()
    order = np.argsort(-cov, kind="stable")
    ranks = np.empty(len(pool))
    ranks[order] = np.arange(1, len(pool) + 1)
    extra[:, col["cov_rank"]] = rank.RR_K / (rank.RR_K + ranks)
    extra[:, col["fused_rr"]] = rank.RR_K / (rank.RR_K + np.arange(1, len(pool) + 1))
    for name, v in (("dense_z", base[:, 0]), ("cov_z", cov)):
        extra[:, col[name]] = (v - v.mean()) / (v.std() + 1e-6)
    nb = {p: index[o] for p, o in before.items()}
    return pool, np.hstack([base, extra]), nb


def rows(data: loco_data.Data, qi: int, n: int) -> tuple[list[str], np.ndarray, dict[str, int]]:
    _DATA[id(data)] = data
    return _rows(id(data), qi, n)


# ---------------------------------------------------------------- models


class Scorer:
    """A fitted ranker: `score(x, nb_p)` → one score per pool row."""

    def score(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@dataclass
class Logistic(Scorer):
    cols: list[int]
    w: np.ndarray
    pairs: bool = False

    def design(self, x: np.ndarray) -> np.ndarray:
        z = x[:, self.cols]
        if self.pairs:
            k = z.shape[1]
            prods = [z[:, i] * z[:, j] for i in range(k) for j in range(i, k)]
            z = np.column_stack([z, *prods])
        return z

    def score(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.design(x) @ self.w[1:] + self.w[0])


@dataclass
class Boosted(Scorer):
    """Gradient-boosted depth-2 regression trees on the logistic loss (numpy)."""

    cols: list[int]
    base: float
    trees: list[tuple[int, float, int, float, int, float, np.ndarray]]
    rate: float

    @staticmethod
    def fit(
        x: np.ndarray, y: np.ndarray, cols: list[int], rounds: int = 60, rate: float = 0.1
    ) -> Boosted:
        z = x[:, cols]
        p0 = min(max(y.mean(), 1e-6), 1 - 1e-6)
        base = math.log(p0 / (1 - p0))
        f = np.full(len(y), base)
        trees = []
        grid = np.linspace(0.05, 0.95, 16)
        qs = [np.unique(np.quantile(z[:, j], grid)) for j in range(z.shape[1])]
        for _ in range(rounds):
            p = 1 / (1 + np.exp(-f))
            g, h = y - p, p * (1 - p)
            j1, t1 = _split(z, g, h, qs, np.ones(len(y), bool))
            left = z[:, j1] <= t1
            j2, t2 = _split(z, g, h, qs, left)
            j3, t3 = _split(z, g, h, qs, ~left)
            leaf = np.zeros(4)
            ids = _leaf(z, j1, t1, j2, t2, j3, t3)
            for k in range(4):
                m = ids == k
                leaf[k] = g[m].sum() / (h[m].sum() + 1.0) if m.any() else 0.0
            f += rate * leaf[ids]
            trees.append((j1, t1, j2, t2, j3, t3, leaf))
        return Boosted(cols, base, trees, rate)

    def score(self, x: np.ndarray) -> np.ndarray:
        z = x[:, self.cols]
        f = np.full(len(z), self.base)
        for j1, t1, j2, t2, j3, t3, leaf in self.trees:
            f += self.rate * leaf[_leaf(z, j1, t1, j2, t2, j3, t3)]
        return f


def _leaf(z: np.ndarray, j1: int, t1: float, j2: int, t2: float, j3: int, t3: float) -> np.ndarray:
    left = z[:, j1] <= t1
    return np.where(left, np.where(z[:, j2] <= t2, 0, 1), np.where(z[:, j3] <= t3, 2, 3))


def _split(
    z: np.ndarray, g: np.ndarray, h: np.ndarray, qs: list[np.ndarray], m: np.ndarray
) -> tuple[int, float]:
    best, bj, bt = -1.0, 0, math.inf
    gs, hs = g[m], h[m]
    gt, ht = gs.sum(), hs.sum()
    for j, cuts in enumerate(qs):
        col = z[m, j]
        for t in cuts:
            le = col <= t
            gl, hl = gs[le].sum(), hs[le].sum()
            if hl < 5 or ht - hl < 5:
                continue
            gain = gl**2 / (hl + 1) + (gt - gl) ** 2 / (ht - hl + 1)
            if gain > best:
                best, bj, bt = gain, j, float(t)
    return bj, bt


# ---------------------------------------------------------------- levers


@dataclass(frozen=True)
class Config:
    feats: tuple[str, ...] = BASE
    second: bool = False  # + nb_score, the neighbours' first-pass probability
    model: str = "logistic"  # or "pairs", "boosted"
    n: int = loco.PRODUCT.n
    l2: float = 1e-2
    floor_cost: float | None = loco.FLOOR_COST
    share: bool = False  # label: the share of the question's evidence turns the window holds
    per_question: bool = False  # every training question weighs the same in the loss
    alpha: float = 0.0  # order by score − alpha · log(characters): evidence per character
    diversity: tuple[float, ...] = ()  # λ grid: − λ per higher pick of the same session


def _labels(data: loco_data.Data, qi: int, pool: list[str], share: bool = False) -> list[float]:
    q = data.questions[qi]
    if not share:
        return [loco_rank.label(data, q, p) for p in pool]
    ev = set(q.evidence)
    w = data.windows[q.conv]
    return [len(ev & {dia for dia, _, _ in w[p]}) / len(ev) for p in pool]


def _nb(pool: list[str], nb: dict[str, int], p: np.ndarray) -> np.ndarray:
    """Each row's best pool neighbour's first-pass probability (before or after), 0 if none."""
    out = np.zeros(len(pool))
    index = {q: i for i, q in enumerate(pool)}
    for q, o in nb.items():
        i = index[q]
        out[i] = max(out[i], p[o])
        out[o] = max(out[o], p[i])
    return out


def _fit_one(
    c: Config, x: np.ndarray, y: np.ndarray, cols: list[int], sw: np.ndarray, qid: np.ndarray
) -> Scorer:
    if c.model == "boosted":
        return Boosted.fit(x, y, cols)
    lg = Logistic(cols, np.zeros(0), pairs=c.model == "pairs")
    if c.model == "softmax":
        lg.w = fit_softmax(lg.design(x), y, qid, c.l2)
    else:
        lg.w = loco_rank.fit_logistic(lg.design(x), y, c.l2, weights=sw)
    return lg


def fit_softmax(
    x: np.ndarray, y: np.ndarray, qid: np.ndarray, l2: float = 1e-2, iters: int = 30
) -> np.ndarray:
    """Listwise: a softmax over each question's pool, its target the evidence share (bias 0);
    Newton's method with a backtracking line search."""
    k = x.shape[1]
    groups = [np.flatnonzero(qid == g) for g in np.unique(qid)]
    groups = [g for g in groups if y[g].sum() > 0]

    def loss(w: np.ndarray) -> float:
        total = 0.5 * l2 * float(w @ w)
        for g in groups:
            z = x[g] @ w
            lse = z.max() + math.log(np.exp(z - z.max()).sum())
            total -= float((y[g] / y[g].sum()) @ (z - lse))
        return total

    w = np.zeros(k)
    for _ in range(iters):
        grad = l2 * w
        hess = l2 * np.eye(k) + 1e-9 * np.eye(k)
        for g in groups:
            z = x[g] @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            t = y[g] / y[g].sum()
            xg = x[g]
            mu = p @ xg
            grad = grad + xg.T @ (p - t)
            d = xg - mu
            hess += (d * p[:, None]).T @ d
        step = np.linalg.solve(hess, grad)
        f0, a = loss(w), 1.0
        while a > 1e-4 and loss(w - a * step) > f0 - 1e-4 * a * float(grad @ step):
            a /= 2
        w = w - a * step
        if np.abs(a * step).max() < 1e-7:
            break
    return np.concatenate([[0.0], w])


@dataclass
class Fitted:
    first: Scorer
    second: Scorer | None
    match: np.ndarray
    floor: float = 0.0
    lam: float = 0.0


def _x(data: loco_data.Data, qi: int, c: Config, m: Fitted | None) -> tuple[list[str], np.ndarray]:
    pool, x, nb = rows(data, qi, c.n)
    if c.second and m is not None and pool:
        p1 = 1 / (1 + np.exp(-m.first.score(x)))
        x = np.column_stack([x, _nb(pool, nb, p1)])
    return pool, x


MATCH_COLS = [ALL.index(f) for f in rank.MATCH_FEATURES]


def order(data: loco_data.Data, qi: int, c: Config, m: Fitted, floor: float) -> list[str]:
    pool, x = _x(data, qi, c, m)
    if not pool:
        return []
    s = (m.second or m.first).score(x)
    if c.alpha:
        s = s - c.alpha * x[:, ALL.index("length")]
    keep = 1 / (1 + np.exp(-np.clip(x[:, MATCH_COLS] @ m.match[1:] + m.match[0], -60, 60)))
    idx = sorted(range(len(pool)), key=lambda i: -s[i])
    if m.lam:
        _DATA[id(data)] = data
        sess = _sessions(id(data), data.questions[qi].conv)
        left, idx = idx, []
        seen: dict[int, int] = {}
        while left:
            j = max(left, key=lambda i: s[i] - m.lam * seen.get(sess.get(pool[i], -1 - i), 0))
            left = [i for i in left if i != j]
            idx.append(j)
            k = sess.get(pool[j], -1 - j)
            seen[k] = seen.get(k, 0) + 1
    return [pool[i] for i in idx if keep[i] >= floor]


def train(data: loco_data.Data, qis: Sequence[int], c: Config) -> Fitted:
    cols = [ALL.index(f) for f in c.feats]
    xs, ys, yany, sws, qids = [], [], [], [], []
    for qi in qis:
        pool, x, _ = rows(data, qi, c.n)
        if pool:
            xs.append(x)
            ys.append(_labels(data, qi, pool, c.share))
            yany.append(_labels(data, qi, pool))
            sws.append(np.full(len(pool), 30.0 / len(pool) if c.per_question else 1.0))
            qids.append(np.full(len(pool), qi))
    x, y = np.vstack(xs), np.concatenate(ys)
    sw, qid = np.concatenate(sws), np.concatenate(qids)
    first = _fit_one(c, x, y, cols, sw, qid)
    match = loco_rank.fit_logistic(x[:, MATCH_COLS], np.concatenate(yany))
    m = Fitted(first, None, match)
    if c.second:
        xs2 = [_x(data, qi, c, m)[1] for qi in qis if rows(data, qi, c.n)[0]]
        m.second = _fit_one(c, np.vstack(xs2), y, [*cols, len(ALL)], sw, qid)
    qs = [data.questions[i] for i in qis]
    if c.diversity:

        def fit_r(lam: float) -> float:
            m.lam = lam
            rs = [order(data, i, c, m, 0.0) for i in qis]
            return float(loco_data.scores(data, qs, rs).as_json()["recall@2000"])

        grid = (0.0, *c.diversity) if len(c.diversity) > 1 else c.diversity
        m.lam = max(grid, key=fit_r)
    if c.floor_cost is None:
        return m

    def r2000(floor: float) -> float:
        rs = [order(data, i, c, m, floor) for i in qis]
        return float(loco_data.scores(data, qs, rs).as_json()["recall@2000"])

    full = r2000(0.0)
    for floor in np.geomspace(0.0005, 0.5, 80):
        if r2000(float(floor)) < full - c.floor_cost:
            break
        m.floor = float(floor)
    return m


def folds(
    data: loco_data.Data, c: Config
) -> tuple[dict[str, Any], dict[int, tuple[float, float]]]:
    """`loco_extra.folds` with this harness's model."""
    return loco_extra.folds(data, c, train, order)


V3 = "v3: + best_message_gap − lexical (the product now)"


def configs() -> dict[str, Config]:
    """Every lever of this stop, against the product before it (RANKER_VERSION 2); the rows
    named "v3 …" are against the product it kept (paired against both)."""
    gap = (*BASE, "cov_gap")
    v3 = tuple(f for f in rank.FEATURES if f not in loco_rank.PRODUCT_OFF)

    def without(*off: str) -> tuple[str, ...]:
        return tuple(f for f in gap if f not in off)

    return {
        "the product before (v2: ranker + floor)": Config(),
        "v2 without the floor": Config(floor_cost=None),
        # 1. neighbours without the "?"
        "+ prev_pool + next_pool (any pool neighbour)": Config(
            feats=(*BASE, "prev_pool", "next_pool")
        ),
        "+ next_pool": Config(feats=(*BASE, "next_pool")),
        "+ prev_all + next_all (every window, pool or not)": Config(
            feats=(*BASE, "prev_all", "next_all")
        ),
        "+ prev_all": Config(feats=(*BASE, "prev_all")),
        "+ dense_prev (the predecessor's dense_gap)": Config(feats=(*BASE, "dense_prev")),
        "+ nb_score (neighbours' first-pass probability)": Config(second=True),
        "sessions diversified (λ fitted on the folds)": Config(diversity=(0.25, 0.5, 1.0, 2.0)),
        "sessions diversified, λ 0.5": Config(diversity=(0.5,)),
        "sessions diversified, λ 1": Config(diversity=(1.0,)),
        # 3. coverage: relative, proximity, BM25, the named sender's
        "+ cov_gap (= best_message_gap)": Config(feats=gap),
        "+ cov_rank": Config(feats=(*BASE, "cov_rank")),
        "+ cov_gap + cov_rank": Config(feats=(*gap, "cov_rank")),
        "+ proximity": Config(feats=(*BASE, "proximity")),
        "+ bm25": Config(feats=(*BASE, "bm25")),
        "bm25 instead of best_message": Config(
            feats=(*(f for f in BASE if f != "best_message"), "bm25")
        ),
        "+ named_cov": Config(feats=(*BASE, "named_cov")),
        "+ named_cov + named_any": Config(feats=(*BASE, "named_cov", "named_any")),
        "+ cov_gap + named_cov": Config(feats=(*gap, "named_cov")),
        "+ cov_gap + dense_prev": Config(feats=(*gap, "dense_prev")),
        "+ cov_gap − lexical": Config(feats=without("lexical")),
        "+ cov_gap − length": Config(feats=without("length")),
        "+ cov_gap − lexical − length": Config(feats=without("lexical", "length")),
        "+ cov_gap − best_message": Config(feats=without("best_message")),
        # 2. the model and its loss
        "pairwise products (L2 0.01)": Config(model="pairs"),
        "pairwise products (L2 1)": Config(model="pairs", l2=1.0),
        "pairwise products (L2 10)": Config(model="pairs", l2=10.0),
        "boosted trees (60 × depth 2)": Config(model="boosted"),
        "listwise softmax": Config(model="softmax"),
        "listwise softmax, L2 1": Config(model="softmax", l2=1.0),
        "evidence share as the label": Config(share=True),
        "every question weighs the same": Config(per_question=True),
        "order by score − 0.5·log length": Config(alpha=0.5),
        "order by score − 1·log length": Config(alpha=1.0),
        # 4. depth
        "lists n=40": Config(n=40),
        "lists n=50": Config(n=50),
        "+ cov_gap, n=50": Config(feats=gap, n=50),
        # the kept ranker, and what was tried on top of it
        V3: Config(feats=v3),
        "v3 without the floor": Config(feats=v3, floor_cost=None),
        "v3 + fused_rr (the fused rank)": Config(feats=(*v3, "fused_rr")),
        "v3 + dense_z": Config(feats=(*v3, "dense_z")),
        "v3 + cov_z": Config(feats=(*v3, "cov_z")),
        "v3 + proximity": Config(feats=(*v3, "proximity")),
        "v3, pairwise products (L2 10)": Config(feats=v3, model="pairs", l2=10.0),
        "v3, lists n=40": Config(feats=v3, n=40),
        "v3, lists n=50": Config(feats=v3, n=50),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loco_more", description=__doc__)
    p.add_argument("--candidates", type=Path, default=Path("bench/out/candidates-final.json"))
    p.add_argument("--out", type=Path)
    p.add_argument("--only", help="levers whose name contains this (the product row always)")
    args = p.parse_args(argv)
    data = loco_data.load(args.candidates)
    results: dict[str, Any] = {}
    per_q: dict[str, dict[int, tuple[float, float]]] = {}
    names = " / ".join(data.names)
    print(f"| lever | R@2000 all | R@2000 {names} | MRR all | MRR {names} | R@1 |")
    print("|---|---|---|---|---|---|")
    base = ""
    for name, c in configs().items():
        if args.only and args.only not in name and c != Config():
            continue
        results[name], per_q[name] = folds(data, c)
        base = base or name
        print(loco.fmt(name, results[name]), flush=True)
        if name != base:
            print(f"    paired: {loco_extra.paired(data, per_q[base], per_q[name])}", flush=True)
        if name.startswith("v3") and name != V3 and V3 in per_q:
            print(f"    against v3: {loco_extra.paired(data, per_q[V3], per_q[name])}", flush=True)
    cats = " | ".join(f"{c} ({n})" for c, n in loco_extra._category_counts(data).items())
    print(f"\n| lever | {cats} |\n|---|---|---|---|---|")
    for name, row in results.items():
        print(f"| {name} | {loco_extra.category_cells(row)} |")
    save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
