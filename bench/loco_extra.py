"""The levers that need more than the store's lists, scored leaving one conversation out.

    python -m bench.loco_extra --candidates bench/out/candidates-rank.json [--out FILE]

Over a cache of `bench.candidates` that holds the extras (every message's own vector, the
question split by `bench.split` with its own lists, every window's time span), as
`bench.loco` does for the product's levers:

- per-message dense similarity: the best cosine of a window's messages to the question as a
  ranker feature (`message_dense`, `message_gap` against the pool's best), and/or as a third
  candidate list (windows ordered by their best message);
- a question split into texts (one per hop), with and without the question itself beside them,
  merged the way `ingest.search` merges a query's texts (one RRF over every list, a window
  scored by its best text);
- neighbours: a window right after (or before) a candidate that holds the question's words,
  whatever that one ends on (the product's `after_question` asks that it ends on a "?").

Each row is against the product (`bench.loco.PRODUCT`, the product's features) fitted the same
way in the same run; it also prints each lever's paired difference per question (mean ± its
standard error) and per category, and what embedding messages costs against windows.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import loco, loco_data, loco_rank
from bench.locomo import budget_recall, reciprocal_rank
from bench.output import save
from ingest import rank
from ingest.fusion import rrf
from ingest.search import LEXICAL_FLOOR

EXTRAS = ("message_dense", "message_gap", "after_match", "before_match")
BEST = rank.FEATURES.index("best_message")
Lists = dict[tuple[str, str], loco_data.Found]


@dataclass(frozen=True)
class Text:
    text: str
    vector: tuple[float, ...]
    dense: loco_data.Found
    lexical: loco_data.Found


def texts(q: loco_data.Question, split: str) -> list[Text]:
    """The texts a query sends: the question ("none"), its parts ("parts"), or both ("both")."""
    whole = Text(q.text, q.vector, q.dense, q.lexical_nostop)
    parts = [Text(p.text, p.vector, p.dense, p.lexical_nostop) for p in q.parts]
    if split == "none" or not parts:
        return [whole]
    return parts if split == "parts" else [whole, *parts]


@functools.cache
def _messages(data_id: int, conv: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every window of a conv with a vector for each message: ids, the stacked message vectors,
    and where each window's messages start in them."""
    data = _DATA[data_id]
    vecs = data.message_vectors[conv]
    ids: list[str] = []
    starts: list[int] = []
    rows: list[np.ndarray] = []
    for pid, msgs in data.windows[conv].items():
        mine = [vecs[dia] for dia, _, _ in msgs if dia in vecs]
        if mine:
            ids.append(pid)
            starts.append(len(rows))
            rows.extend(mine)
    return ids, np.vstack(rows), np.asarray(starts)


_DATA: dict[int, loco_data.Data] = {}


def message_scores(data: loco_data.Data, conv: int, vector: Sequence[float]) -> dict[str, float]:
    """Each window's best message cosine to `vector`."""
    _DATA[id(data)] = data
    ids, mat, starts = _messages(id(data), conv)
    best = np.maximum.reduceat(mat @ np.asarray(vector), starts)
    return dict(zip(ids, best.tolist(), strict=True))


def message_list(
    data: loco_data.Data, conv: int, vector: Sequence[float], n: int
) -> loco_data.Found:
    scored = message_scores(data, conv, vector)
    return tuple(sorted(scored.items(), key=lambda x: -x[1])[:n])


@dataclass(frozen=True)
class Config:
    extras: tuple[str, ...] = ()
    source: bool = False  # the per-message list as a third candidate list
    split: str = "none"
    drop: tuple[str, ...] = ()  # product features left out
    floor_cost: float | None = loco.FLOOR_COST


def _lists(data: loco_data.Data, q: loco_data.Question, t: Text, c: Config) -> Lists:
    s = loco.PRODUCT
    d, lx = t.dense[: s.n], loco_data.floored(t.lexical[: s.n], LEXICAL_FLOOR)
    out: Lists = {("dense", t.text): d, ("lexical", t.text): lx}
    if c.source:
        out[("message", t.text)] = message_list(data, q.conv, t.vector, s.n)
    return out


def _rows(
    data: loco_data.Data, q: loco_data.Question, t: Text, pool: list[str], lists: Lists
) -> np.ndarray:
    w = data.windows[q.conv]
    bodies = {p: [b for _, _, b in w[p]] for p in pool}
    senders = {p: [snd for _, snd, _ in w[p]] for p in pool}
    d, lx = lists[("dense", t.text)], lists[("lexical", t.text)]
    spans = loco_data.spans(data, q, pool)
    base = np.asarray(rank.features(t.text, pool, bodies, d, lx, senders, spans=spans))
    base = base.reshape(len(pool), len(rank.FEATURES))
    md = np.zeros(len(pool))
    if data.message_vectors and t.vector:
        ms = message_scores(data, q.conv, t.vector)
        md = np.asarray([ms.get(p, 0.0) for p in pool])
    # The product's neighbours (`rank.previous`): the candidate right before, and right after.
    index = {p: i for i, p in enumerate(pool)}
    after, before = np.zeros(len(pool)), np.zeros(len(pool))
    for p, o in rank.previous(pool, spans).items():
        after[index[p]] = base[index[o], BEST]
        before[index[o]] = max(before[index[o]], base[index[p], BEST])
    gap = md - (md.max() if len(md) else 0.0)
    return np.hstack([base, np.column_stack([md, gap, after, before])])


ALL = (*rank.FEATURES, *EXTRAS)
PRODUCT_MASK = loco_rank.Ranker(loco.PRODUCT).mask


@functools.cache
def _scored(
    data_id: int, qi: int, c: Config
) -> tuple[list[str], list[np.ndarray], tuple[str, ...]]:
    """A query's pool (one RRF over every text's lists) and each text's feature rows."""
    data = _DATA[data_id]
    q = data.questions[qi]
    ts = texts(q, c.split)
    lists: Lists = {}
    for t in ts:
        lists.update(_lists(data, q, t, Config(c.extras, c.source)))
    fused = rrf({k: [p for p, _ in v] for k, v in lists.items()}, k=loco.PRODUCT.k)
    pool = [p for p, _ in fused]
    if not pool:
        return [], [], ()
    return pool, [_rows(data, q, t, pool, lists) for t in ts], tuple(t.text for t in ts)


def scored(data: loco_data.Data, qi: int, c: Config) -> tuple[list[str], list[np.ndarray]]:
    _DATA[id(data)] = data
    pool, rows, _ = _scored(id(data), qi, c)
    return pool, rows


def _cols(c: Config) -> list[int]:
    mask = zip(rank.FEATURES, PRODUCT_MASK, strict=True)
    keep = [*(f for f, k in mask if k and f not in c.drop), *c.extras]
    return [ALL.index(f) for f in keep]


@dataclass(frozen=True)
class Model:
    ranker: np.ndarray
    match: np.ndarray
    floor: float


def _p(x: np.ndarray, cols: list[int], w: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(x[:, cols] @ w[1:] + w[0], -60, 60))))


MATCH_COLS = [ALL.index(f) for f in rank.MATCH_FEATURES]


def order(data: loco_data.Data, qi: int, c: Config, m: Model, floor: float) -> list[str]:
    pool, rows = scored(data, qi, c)
    if not pool:
        return []
    cols = _cols(c)
    p = np.max([_p(x, cols, m.ranker) for x in rows], axis=0)
    keep = np.max([_p(x, MATCH_COLS, m.match) for x in rows], axis=0)
    idx = sorted(range(len(pool)), key=lambda i: -p[i])
    return [pool[i] for i in idx if keep[i] >= floor]


def train(data: loco_data.Data, train_qis: Sequence[int], c: Config) -> Model:
    """Fitted on the question texts alone (a split is a way of asking, not of training)."""
    single = Config(c.extras, c.source, drop=c.drop)
    xs, ys = [], []
    for qi in train_qis:
        pool, rows = scored(data, qi, single)
        if pool:
            xs.append(rows[0])
            ys.append([loco_rank.label(data, data.questions[qi], p) for p in pool])
    x, y = np.vstack(xs), np.concatenate(ys)
    ranker = loco_rank.fit_logistic(x[:, _cols(c)], y)
    match = loco_rank.fit_logistic(x[:, MATCH_COLS], y)
    m = Model(ranker, match, 0.0)
    if c.floor_cost is None:
        return m
    qs = [data.questions[i] for i in train_qis]

    def r2000(floor: float) -> float:
        rs = [order(data, i, single, m, floor) for i in train_qis]
        return float(loco_data.scores(data, qs, rs).as_json()["recall@2000"])

    full, best = r2000(0.0), 0.0
    for floor in np.geomspace(0.0005, 0.5, 80):
        if r2000(float(floor)) < full - c.floor_cost:
            break
        best = float(floor)
    return Model(ranker, match, best)


def folds(
    data: loco_data.Data,
    c: Any,
    train: Callable[[loco_data.Data, Sequence[int], Any], Any] = train,
    order: Callable[[loco_data.Data, int, Any, Any, float], list[str]] = order,
) -> tuple[dict[str, Any], dict[int, tuple[float, float]]]:
    """`bench.loco.folds` for a config, plus each question's (R@2000, reciprocal rank);
    `train` fits a model with a `floor` on the training questions, `order` ranks with it."""
    per_q: dict[int, tuple[float, float]] = {}

    def fit(d: loco_data.Data, train_qis: Sequence[int]) -> Callable[[int], list[str]]:
        m = train(d, train_qis, c)

        def r(qi: int) -> list[str]:
            out = order(d, qi, c, m, m.floor)
            q = d.questions[qi]
            h = loco_data.hits(d, q, out)
            per_q[qi] = (budget_recall(h, q.evidence, 2000), reciprocal_rank(h, q.evidence))
            return out

        return r

    return loco.folds(data, fit), per_q


def paired(
    data: loco_data.Data,
    a: Mapping[int, tuple[float, float]],
    b: Mapping[int, tuple[float, float]],
) -> str:
    """b − a per question: mean ± standard error, R@2000 and MRR, and per fold."""
    cells = []
    for k, name in ((0, "R@2000"), (1, "MRR")):
        d = [b[i][k] - a[i][k] for i in a]
        se = statistics.stdev(d) / len(d) ** 0.5
        per_fold = [
            statistics.mean(b[i][k] - a[i][k] for i in a if data.questions[i].conv == f)
            for f in range(len(data.names))
        ]
        fold_cells = " / ".join(f"{x:+.3f}" for x in per_fold)
        cells.append(f"{name} {statistics.mean(d):+.3f} ± {se:.3f} ({fold_cells})")
    return "; ".join(cells)


def configs() -> dict[str, Config]:
    return {
        "product (ranker + floor), this run": Config(),
        "product without after_question": Config(drop=("after_question",)),
        "+ message_dense": Config(extras=("message_dense",)),
        "+ message_dense + message_gap": Config(extras=("message_dense", "message_gap")),
        "+ per-message list as a third candidate source": Config(source=True),
        "+ per-message list + message_dense + message_gap": Config(
            extras=("message_dense", "message_gap"), source=True
        ),
        "+ after_match (right after a window with the words)": Config(extras=("after_match",)),
        "+ after_match + before_match": Config(extras=("after_match", "before_match")),
        "split: the parts instead of the question": Config(split="parts"),
        "split: the question and its parts": Config(split="both"),
    }


def category_cells(row: Mapping[str, Any]) -> str:
    return " | ".join(
        f"{row['categories'][c]['recall@2000']:.3f} / {row['categories'][c]['mrr']:.3f}"
        for c in loco_data.CATEGORY_NAMES.values()
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loco_extra", description=__doc__)
    p.add_argument("--candidates", type=Path, default=Path("bench/out/candidates-rank.json"))
    p.add_argument("--out", type=Path)
    p.add_argument("--only", help="levers whose name contains this (the product row always)")
    args = p.parse_args(argv)
    data = loco_data.load(args.candidates)
    if not data.message_vectors or not any(data.message_vectors):
        print(
            f"{args.candidates}: no message vectors; collect with bench.candidates",
            file=sys.stderr,
        )
        return 2
    for name, cost in zip(data.names, data.costs, strict=True):
        if not cost:
            continue
        ratio = (cost["window_s"] + cost["message_s"]) / cost["window_s"]
        print(
            f"cost {name}: {cost['windows']} windows {cost['window_s']:.1f} s, "
            f"{cost['messages']} messages {cost['message_s']:.1f} s: ingest embedding ×{ratio:.2f}"
        )
    split_qs = sum(1 for q in data.questions if q.parts)
    print(f"questions split: {split_qs} of {len(data.questions)}")
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
    cats = " | ".join(f"{c} ({n})" for c, n in _category_counts(data).items())
    print(f"\n| lever | {cats} |\n|---|---|---|---|---|")
    for name, row in results.items():
        print(f"| {name} | {category_cells(row)} |")
    print()
    for name in results:
        if name != base:
            print(f"{name}: {paired(data, per_q[base], per_q[name])}")
    save(results, args.out)
    return 0


def _category_counts(data: loco_data.Data) -> dict[str, int]:
    out = dict.fromkeys(loco_data.CATEGORY_NAMES.values(), 0)
    for q in data.questions:
        out[loco_data.CATEGORY_NAMES[q.category]] += 1
    return out


if __name__ == "__main__":
    sys.exit(main())
