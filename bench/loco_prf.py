"""Pseudo-relevance feedback as second-stage features, scored leaving one conversation out.

    python -m bench.loco_prf --candidates bench/out/candidates-prf.json [--only NAME]

Over a cache of `bench.candidates` holding every window's own vector, each lever is the
product's ranker (`ingest.rank` RANKER_VERSION 3 and its relevance floor) with features computed
from the top k of a first ordering of the same candidate pool (no second store search):

- dense (Rocchio): q' = normalise(q + β · mean of the top-k windows' vectors); `prf_dense` is a
  window's cosine with q', `prf_gap` that minus the pool's best (as `dense_gap`); β = ∞ is the
  feedback centroid alone. A feedback window's own vector is left out of its own centroid
  ("leave-one-out"), or not;
- lexical (RM3-style): the m stemmed terms the top-k windows weigh most (term frequency over
  length, summed over the k, times the pool's IDF), not in the question and not stop words;
  `prf_lex` is the IDF-weighted share of those terms a window holds (a feedback window scored on
  the terms of the other k − 1).

The first ordering is the fused pool (RRF), the dense list, or the ranker v3 itself (a second
pass: v3 fitted on the training questions orders the pool, the features follow, the ranker with
them is fitted on the same training questions). k, β and m are chosen inside the training
conversations only (nested: for each grid point, fit on one training conversation and score the
other, both ways; the best pooled R@2000, then MRR, wins), then the ranker is fitted on both and
the held-out conversation is scored. Prints the fold table, each lever paired against v3 + floor
per question (mean ± standard error, then each fold), the per-category table and the choices.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from bench import loco, loco_data, loco_extra, loco_rank
from bench.locomo import budget_recall, reciprocal_rank
from ingest import lexical, rank

V3 = [i for i, f in enumerate(rank.FEATURES) if f not in loco_rank.PRODUCT_OFF]
MATCH = [rank.FEATURES.index(f) for f in rank.MATCH_FEATURES]
EXTRA = ("prf_dense", "prf_gap", "prf_gap0", "prf_lex", "prf_near")
BEST = rank.FEATURES.index("best_message")
INF = math.inf


@dataclass(frozen=True)
class Config:
    extra: tuple[str, ...] = ()  # of EXTRA
    order: str = "fused"  # the first ordering: "fused", "dense" or "v3"
    ks: tuple[int, ...] = (3, 5, 10)
    betas: tuple[float, ...] = (0.5, 1.0, 2.0, INF)
    ms: tuple[int, ...] = (5, 10, 20)
    loo: bool = True  # a feedback window is left out of its own feedback
    floor_cost: float | None = loco.FLOOR_COST


# ---------------------------------------------------------------- features


_DATA: dict[int, loco_data.Data] = {}


def base(data: loco_data.Data, qi: int) -> tuple[list[str], np.ndarray]:
    return loco_rank.pool_features(data, qi, loco.PRODUCT)


@cache
def _stems(data_id: int, conv: int, pid: str) -> tuple[str, ...]:
    w = _DATA[data_id].windows[conv][pid]
    return tuple(t[: rank.STEM] for _, _, b in w for t in lexical.tokens(b))


def _feedback(top: Sequence[int], i: int, loo: bool) -> list[int]:
    fb = [j for j in top if not (loo and j == i)]
    return fb or list(top)


def dense_prf(
    data: loco_data.Data, qi: int, order: Sequence[int], k: int, beta: float, loo: bool
) -> np.ndarray:
    """Each pool window's cosine with the Rocchio query, one column."""
    q = data.questions[qi]
    pool, _ = base(data, qi)
    wv = data.window_vectors[q.conv]
    w = np.vstack([wv[p] for p in pool])
    qv = np.asarray(q.vector)
    top = list(order[:k])
    out = np.empty(len(pool))
    cached: dict[tuple[int, ...], np.ndarray] = {}
    for i in range(len(pool)):
        fb = tuple(_feedback(top, i, loo))
        if fb not in cached:
            c = w[list(fb)].mean(axis=0)
            qq = c if beta == INF else qv + beta * c
            cached[fb] = qq / (np.linalg.norm(qq) or 1.0)
        out[i] = float(w[i] @ cached[fb])
    return out


def near_prf(data: loco_data.Data, qi: int, order: Sequence[int], k: int) -> np.ndarray:
    """Each pool window's best cosine with another of the top k, one column."""
    q = data.questions[qi]
    pool, _ = base(data, qi)
    wv = data.window_vectors[q.conv]
    w = np.vstack([wv[p] for p in pool])
    top = list(order[:k])
    sims = w @ w[top].T
    for col, j in enumerate(top):
        sims[j, col] = -1.0
    return np.asarray(sims.max(axis=1))


def lexical_prf(
    data: loco_data.Data, qi: int, order: Sequence[int], k: int, m: int, loo: bool
) -> np.ndarray:
    """Each pool window's IDF-weighted share of the feedback's expansion terms, one column."""
    _DATA[id(data)] = data
    q = data.questions[qi]
    pool, _ = base(data, qi)
    toks = [_stems(id(data), q.conv, p) for p in pool]
    sets = [set(t) for t in toks]
    n = len(pool)
    asked = {t[: rank.STEM] for t in lexical.tokens(q.text)}
    stop = {t[: rank.STEM] for t in rank.STOP_WORDS}

    def idf(t: str) -> float:
        return math.log(1.0 + n / (1 + sum(t in s for s in sets)))

    top = list(order[:k])
    out = np.empty(n)
    cached: dict[tuple[int, ...], dict[str, float]] = {}
    for i in range(n):
        fb = tuple(_feedback(top, i, loo))
        if fb not in cached:
            weight: dict[str, float] = {}
            for j in fb:
                for t in toks[j]:
                    if t not in asked and t not in stop and len(t) > 2:
                        weight[t] = weight.get(t, 0.0) + 1.0 / len(toks[j])
            scored = sorted(((v * idf(t), t) for t, v in weight.items()), reverse=True)
            cached[fb] = {t: v for v, t in scored[:m]}
        terms = cached[fb]
        total = sum(terms.values()) or 1.0
        out[i] = sum(v for t, v in terms.items() if t in sets[i]) / total
    return out


def first_order(data: loco_data.Data, qi: int, how: str, v3: np.ndarray | None) -> list[int]:
    pool, x = base(data, qi)
    if how == "fused":
        return list(range(len(pool)))
    s = x[:, 0] if how == "dense" else x[:, V3] @ v3[1:] + v3[0]  # type: ignore[index]
    return [int(i) for i in np.argsort(-s, kind="stable")]


def design(
    data: loco_data.Data, qi: int, c: Config, p: tuple[Any, ...], v3: np.ndarray | None
) -> np.ndarray:
    """The v3 columns and the lever's extra columns for one question at grid point p."""
    _, x = base(data, qi)
    cols = [x[:, V3]]
    if not c.extra:
        return cols[0]
    k, beta, m = p
    order = first_order(data, qi, c.order, v3)
    if {"prf_dense", "prf_gap", "prf_gap0"} & set(c.extra):
        d = dense_prf(data, qi, order, k, beta, c.loo)
        if "prf_gap0" in c.extra:
            cols.append(((d - d.max()) * (x[:, BEST] == 0))[:, None])
        if "prf_dense" in c.extra:
            cols.append(d[:, None])
        if "prf_gap" in c.extra:
            cols.append((d - d.max())[:, None])
    if "prf_near" in c.extra:
        cols.append(near_prf(data, qi, order, k)[:, None])
    if "prf_lex" in c.extra:
        cols.append(lexical_prf(data, qi, order, k, m, c.loo)[:, None])
    return np.hstack(cols)


# ---------------------------------------------------------------- fitting


@dataclass
class Fitted:
    v3: np.ndarray | None
    w: np.ndarray
    match: np.ndarray
    p: tuple[Any, ...]
    floor: float = 0.0


def _grid(c: Config) -> list[tuple[Any, ...]]:
    if not c.extra:
        return [(0, 0.0, 0)]
    betas = c.betas if {"prf_dense", "prf_gap", "prf_gap0"} & set(c.extra) else (0.0,)
    ms = c.ms if "prf_lex" in c.extra else (0,)
    return list(itertools.product(c.ks, betas, ms))


def _labels(data: loco_data.Data, qi: int) -> list[float]:
    pool, _ = base(data, qi)
    return [loco_rank.label(data, data.questions[qi], p) for p in pool]


def fit_at(data: loco_data.Data, qis: Sequence[int], c: Config, p: tuple[Any, ...]) -> Fitted:
    qis = [qi for qi in qis if base(data, qi)[0]]
    y = np.concatenate([_labels(data, qi) for qi in qis])
    v3 = None
    if c.order == "v3" and c.extra:
        v3 = loco_rank.fit_logistic(np.vstack([base(data, qi)[1][:, V3] for qi in qis]), y)
    x = np.vstack([design(data, qi, c, p, v3) for qi in qis])
    match = loco_rank.fit_logistic(np.vstack([base(data, qi)[1][:, MATCH] for qi in qis]), y)
    return Fitted(v3, loco_rank.fit_logistic(x, y), match, p)


def order(data: loco_data.Data, qi: int, c: Config, m: Fitted, floor: float) -> list[str]:
    pool, x = base(data, qi)
    if not pool:
        return []
    s = design(data, qi, c, m.p, m.v3) @ m.w[1:] + m.w[0]
    keep = 1 / (1 + np.exp(-np.clip(x[:, MATCH] @ m.match[1:] + m.match[0], -60, 60)))
    idx = np.argsort(-s, kind="stable")
    return [pool[i] for i in idx if keep[i] >= floor]


def _score(data: loco_data.Data, qis: Sequence[int], rs: Sequence[list[str]]) -> tuple[float, ...]:
    j = loco_data.scores(data, [data.questions[i] for i in qis], rs).as_json()
    return float(j["recall@2000"]), float(j["mrr"])


def train(data: loco_data.Data, qis: Sequence[int], c: Config) -> Fitted:
    """k, β, m chosen inside `qis`'s conversations (each fitted on the other, both ways), then
    the ranker and floor fitted on all of `qis`."""
    grid = _grid(c)
    p = grid[0]
    if len(grid) > 1:
        convs = sorted({data.questions[i].conv for i in qis})

        def inner(p: tuple[Any, ...]) -> tuple[float, ...]:
            test_all, rs = [], []
            for held in convs:
                fit_q = [i for i in qis if data.questions[i].conv != held]
                test = [i for i in qis if data.questions[i].conv == held]
                m = fit_at(data, fit_q, c, p)
                test_all += test
                rs += [order(data, i, c, m, 0.0) for i in test]
            return _score(data, test_all, rs)

        p = max(grid, key=inner)
    m = fit_at(data, qis, c, p)
    if c.floor_cost is not None:
        full = _score(data, qis, [order(data, i, c, m, 0.0) for i in qis])[0]
        for f in np.geomspace(0.0005, 0.5, 80):
            rs = [order(data, i, c, m, float(f)) for i in qis]
            if _score(data, qis, rs)[0] < full - c.floor_cost:
                break
            m.floor = float(f)
    return m


@dataclass
class Run:
    row: dict[str, Any]
    per_q: dict[int, tuple[float, float]]
    chosen: list[tuple[Any, ...]] = field(default_factory=list)


def folds(data: loco_data.Data, c: Config) -> Run:
    run = Run({}, {})

    def fit(d: loco_data.Data, qis: Sequence[int]) -> Callable[[int], list[str]]:
        m = train(d, qis, c)
        run.chosen.append(m.p)

        def r(qi: int) -> list[str]:
            out = order(d, qi, c, m, m.floor)
            q = d.questions[qi]
            h = loco_data.hits(d, q, out)
            run.per_q[qi] = (budget_recall(h, q.evidence, 2000), reciprocal_rank(h, q.evidence))
            return out

        return r

    run.row = loco.folds(data, fit)
    return run


def separation(data: loco_data.Data) -> None:
    """How well each feature alone tells evidence from the rest of its pool: the mean over
    questions of the within-pool AUC (v3 fitted on every question: in sample, a diagnostic)."""
    qis = [i for i in range(len(data.questions)) if base(data, i)[0]]
    v3 = fit_at(data, qis, Config(extra=("prf_gap",), order="v3"), (5, 1.0, 0)).v3
    assert v3 is not None

    def auc(col: Callable[[int, list[int]], np.ndarray]) -> float:
        out = []
        for qi in qis:
            lab = np.asarray(_labels(data, qi)) > 0
            if lab.all() or not lab.any():
                continue
            f = col(qi, first_order(data, qi, "v3", v3))
            pos, neg = f[lab][:, None], f[~lab][None, :]
            out.append(float((pos > neg).mean() + 0.5 * (pos == neg).mean()))
        return statistics.mean(out)

    print("| feature (alone) | within-pool AUC |\n|---|---|")
    print(f"| cosine with the question | {auc(lambda qi, o: base(data, qi)[1][:, 0]):.3f} |")
    print(f"| v3 (in sample) | {auc(lambda qi, o: base(data, qi)[1][:, V3] @ v3[1:]):.3f} |")
    for k in (3, 5, 10):
        for beta in (1.0, INF):
            a = auc(lambda qi, o: dense_prf(data, qi, o, k, beta, True))  # noqa: B023
            print(f"| cosine with the Rocchio query, v3 top {k}, β {beta} | {a:.3f} |")
        a = auc(lambda qi, o: near_prf(data, qi, o, k))  # noqa: B023
        print(f"| prf_near, v3 top {k} | {a:.3f} |")
        a = auc(lambda qi, o: lexical_prf(data, qi, o, k, 10, True))  # noqa: B023
        print(f"| prf_lex, v3 top {k}, m 10 | {a:.3f} |")
    # A second search: the pool plus the next windows of the conversation by the Rocchio query
    # (v3's top 3, β 1) or by the question itself (a deeper dense list).
    print("\n| evidence windows in the pool + the next n by | n 0 | n 10 | n 20 |")
    print("|---|---|---|---|")
    for name, beta in (("the Rocchio query", 1.0), ("the question", 0.0)):
        cells = []
        for extra in (0, 10, 20):
            held = total = 0
            for qi in qis:
                q, (pool, _) = data.questions[qi], base(data, qi)
                w, wv = data.windows[q.conv], data.window_vectors[q.conv]
                ev = {p for p in w if any(d in q.evidence for d, _, _ in w[p])}
                ids = list(wv)
                fb = np.mean([wv[pool[i]] for i in first_order(data, qi, "v3", v3)[:3]], axis=0)
                s = np.vstack([wv[p] for p in ids]) @ (np.asarray(q.vector) + beta * fb)
                more = [ids[i] for i in np.argsort(-s) if ids[i] not in pool][:extra]
                held, total = held + len(ev & {*pool, *more}), total + len(ev)
            cells.append(f"{held / total:.3f}")
        print(f"| {name} | {' | '.join(cells)} |")


def configs() -> dict[str, Config]:
    d, g, lx = ("prf_dense",), ("prf_gap",), ("prf_lex",)
    return {
        "v3 + floor (the product)": Config(),
        "v3 without the floor": Config(floor_cost=None),
        "+ prf_dense, fused order": Config(extra=d),
        "+ prf_gap, fused order": Config(extra=g),
        "+ prf_dense + prf_gap, fused order": Config(extra=(*d, *g)),
        "+ prf_dense + prf_gap, fused order, feedback kept": Config(extra=(*d, *g), loo=False),
        "+ prf_dense + prf_gap, dense order": Config(extra=(*d, *g), order="dense"),
        "+ prf_dense + prf_gap, v3 order (second pass)": Config(extra=(*d, *g), order="v3"),
        "+ prf_gap, v3 order (second pass)": Config(extra=g, order="v3"),
        "+ prf_lex, fused order": Config(extra=lx),
        "+ prf_lex, v3 order (second pass)": Config(extra=lx, order="v3"),
        "+ prf_lex, v3 order, feedback kept": Config(extra=lx, order="v3", loo=False),
        "+ prf_gap + prf_lex, v3 order (second pass)": Config(extra=(*g, *lx), order="v3"),
        "+ prf_near, v3 order (second pass)": Config(
            extra=("prf_near",), order="v3", ks=(2, 3, 5)
        ),
        "+ prf_near, fused order": Config(extra=("prf_near",), ks=(2, 3, 5)),
        "+ prf_gap0 (no question word), v3 order (second pass)": Config(
            extra=("prf_gap0",), order="v3"
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loco_prf", description=__doc__)
    p.add_argument("--candidates", type=Path, default=Path("bench/out/candidates-prf.json"))
    p.add_argument("--only", help="levers whose name contains this (the product row always)")
    p.add_argument("--auc", action="store_true", help="each feature's separation alone, only")
    args = p.parse_args(argv)
    data = loco_data.load(args.candidates)
    if not data.window_vectors or not data.window_vectors[0]:
        sys.exit(f"{args.candidates}: no window vectors (rebuild it with bench.candidates)")
    if args.auc:
        separation(data)
        return 0
    names = " / ".join(data.names)
    print(f"| lever | R@2000 all | R@2000 {names} | MRR all | MRR {names} | R@1 |")
    print("|---|---|---|---|---|---|")
    runs: dict[str, Run] = {}
    for name, c in configs().items():
        if args.only and args.only not in name and c != Config():
            continue
        runs[name] = run = folds(data, c)
        print(loco.fmt(name, run.row), flush=True)
        if c != Config():
            base_q = next(iter(runs.values())).per_q
            print(f"    paired: {loco_extra.paired(data, base_q, run.per_q)}", flush=True)
            print(f"    chosen (k, β, m) per fold: {run.chosen}", flush=True)
    cats = " | ".join(f"{c} ({n})" for c, n in loco_extra._category_counts(data).items())
    print(f"\n| lever | {cats} |\n|---|---|---|---|---|")
    for name, run in runs.items():
        print(f"| {name} | {loco_extra.category_cells(run.row)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
