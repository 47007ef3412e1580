"""Leave one conversation out: every ranking lever scored on a conversation it was not tuned on.

    python -m bench.loco --candidates bench/out/candidates.json [--out FILE] [--train]

(`python -m bench.retrieval --folds` collects the candidates first, then runs this.)
Replays the read path offline over the cached deep lists of `bench.candidates`: the first stage
(dense and lexical lists, the lexical floor, RRF) exactly as `ingest.search` does it, then the
second-stage ranker of `ingest.rank`. For each of the three locomo-dev conversations, a lever's
free choices (RRF's k, the ranker's coefficients, the relevance floor) are fitted on the other
two, and the held-out one is scored; "all" pools the three held-out scores (each question is
scored by settings that never saw its conversation). `--train` fits on all three and prints the
coefficients and floor `ingest.rank` ships.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
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


def load(path: Path) -> Data:
    doc = json.loads(path.read_text(encoding="utf-8"))
    qs: list[Question] = []
    windows = []
    names = []
    vectors, spans, costs = [], [], []
    for c, conv in enumerate(doc["conversations"]):
        names.append(str(conv["sample_id"]))
        windows.append({pid: [tuple(m) for m in msgs] for pid, msgs in conv["windows"].items()})
        vectors.append({d: np.asarray(v) for d, v in conv.get("message_vectors", {}).items()})
        spans.append({p: (int(a), int(b)) for p, (a, b) in conv.get("spans", {}).items()})
        costs.append(conv.get("cost", {}))
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
        tuple(qs), tuple(windows), tuple(names), tuple(vectors), tuple(spans), tuple(costs)
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


def _floored(found: Found, floor: float) -> Found:
    if not found or floor <= 0:
        return found
    cut = found[0][1] * floor
    return tuple(x for x in found if x[1] >= cut)


def lists(q: Question, s: Stage1) -> tuple[Found, Found]:
    lex = q.lexical_nostop if s.nostop else q.lexical
    fusing = s.dense > 0
    return q.dense[: s.n], _floored(lex[: s.n], LEXICAL_FLOOR if fusing else 0.0)


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


# ---------------------------------------------------------------- the second stage


def label(data: Data, q: Question, pid: str) -> float:
    ev = set(q.evidence)
    return float(any(dia in ev for dia, _, _ in data.windows[q.conv][pid]))


@cache
def _pool_features(
    data_id: int, qi: int, s: Stage1, stem: int | None
) -> tuple[list[str], np.ndarray]:
    data = _DATA[data_id]
    q = data.questions[qi]
    pool = fused(q, s)
    d, lx = lists(q, s)
    w = data.windows[q.conv]
    bodies = {p: [body for _, _, body in w[p]] for p in pool}
    senders = {p: [snd for _, snd, _ in w[p]] for p in pool}
    rows = rank.features(
        q.text, pool, bodies, d, lx, senders, stem=stem, spans=spans(data, q, pool)
    )
    return pool, np.asarray(rows, dtype=float).reshape(len(pool), len(rank.FEATURES))


_DATA: dict[int, Data] = {}


def spans(data: Data, q: Question, pool: Sequence[str]) -> dict[str, rank.Span]:
    """The pool's time spans (one timeline a conversation), where the cache holds them."""
    known = data.spans[q.conv] if data.spans else {}
    return {p: (data.names[q.conv], *known[p]) for p in pool if p in known}


def pool_features(
    data: Data, qi: int, s: Stage1, stem: int | None = rank.STEM
) -> tuple[list[str], np.ndarray]:
    _DATA[id(data)] = data
    return _pool_features(id(data), qi, s, stem)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, iters: int = 50) -> np.ndarray:
    """Pointwise logistic regression by Newton's method (IRLS); weights [bias, *features]."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    reg = l2 * np.eye(xb.shape[1])
    reg[0, 0] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -60, 60)))
        grad = xb.T @ (p - y) + reg @ w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + reg + 1e-9 * np.eye(len(w))
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


@dataclass(frozen=True)
class Ranker:
    stage1: Stage1
    # The product's: every feature but the raw cosine, which the match model uses instead.
    mask: tuple[bool, ...] = tuple(f != "dense" for f in rank.FEATURES)
    l2: float = 1e-2
    stem: int | None = rank.STEM

    def train(self, data: Data, qis: Sequence[int]) -> Model:
        """The ranker and the match model (`rank.MATCH_FEATURES`) fitted on `qis`."""
        xs, ys = [], []
        for qi in qis:
            pool, x = pool_features(data, qi, self.stage1, self.stem)
            if not pool:
                continue
            xs.append(x)
            ys.append([label(data, data.questions[qi], p) for p in pool])
        x, y = np.vstack(xs), np.concatenate(ys)
        ranker = coefficients(fit_logistic(x[:, list(self.mask)], y, self.l2), self.mask)
        only = tuple(f in rank.MATCH_FEATURES for f in rank.FEATURES)
        match = coefficients(fit_logistic(x[:, list(only)], y, self.l2), only)
        return Model(ranker, match)

    def rank(self, data: Data, qi: int, model: Model, floor: float = 0.0) -> list[str]:
        pool, x = pool_features(data, qi, self.stage1, self.stem)
        if not pool:
            return []
        p = _apply(x, model.ranker)
        m = _apply(x, model.match)
        order = sorted(range(len(pool)), key=lambda i: -p[i])  # stable: fused order on ties
        return [pool[i] for i in order if m[i] >= floor]


@dataclass(frozen=True)
class Model:
    ranker: dict[str, float]
    match: dict[str, float]


def _apply(x: np.ndarray, coef: Mapping[str, float]) -> np.ndarray:
    w = np.array([coef.get(f, 0.0) for f in rank.FEATURES])
    z = np.clip(x @ w + coef["bias"], -60, 60)
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


# ---------------------------------------------------------------- folds


Fit = Callable[[Data, Sequence[int]], Callable[[int], list[str]]]
"""A lever: given training question indices, the ranking function it fits."""


def fixed(s: Stage1) -> Fit:
    return lambda data, _train: lambda qi: fused(data.questions[qi], s)


def tuned_k(base: Stage1, ks: Sequence[int] = (5, 10, 20, 30, 60)) -> Fit:
    def fit(data: Data, train: Sequence[int]) -> Callable[[int], list[str]]:
        qs = [data.questions[i] for i in train]

        def r2000(k: int) -> float:
            s = Stage1(k, base.n, base.nostop, base.dense, base.lexical)
            return float(scores(data, qs, [fused(q, s) for q in qs]).as_json()["recall@2000"])

        best = max(ks, key=r2000)
        s = Stage1(best, base.n, base.nostop, base.dense, base.lexical)
        return lambda qi: fused(data.questions[qi], s)

    return fit


def ranked(r: Ranker, floor_cost: float | None = None) -> Fit:
    """The ranker trained on `train`; with `floor_cost`, the highest floor costing at most that
    much R@2000 on `train` too."""

    def fit(data: Data, train: Sequence[int]) -> Callable[[int], list[str]]:
        model = r.train(data, train)
        floor = 0.0 if floor_cost is None else calibrate(data, r, model, train, floor_cost)
        return lambda qi: r.rank(data, qi, model, floor)

    return fit


def calibrate(data: Data, r: Ranker, model: Model, train: Sequence[int], cost: float) -> float:
    """The highest floor (of a grid, 0.0005 to 0.5) whose R@2000 on `train` is within `cost` of
    none."""
    qs = [data.questions[i] for i in train]

    def r2000(floor: float) -> float:
        rs = [r.rank(data, i, model, floor) for i in train]
        return float(scores(data, qs, rs).as_json()["recall@2000"])

    full = r2000(0.0)
    best = 0.0
    for floor in np.geomspace(0.0005, 0.5, 80):
        if r2000(float(floor)) >= full - cost:
            best = float(floor)
        else:
            break
    return best


def folds(data: Data, fit: Fit) -> dict[str, Any]:
    n_conv = len(data.names)
    per_fold: dict[str, Any] = {}
    pooled, cats = Scores(), {c: Scores() for c in CATEGORY_NAMES}
    for held in range(n_conv):
        train = [i for i, q in enumerate(data.questions) if q.conv != held]
        test = [i for i, q in enumerate(data.questions) if q.conv == held]
        rank_fn = fit(data, train)
        s = Scores()
        for qi in test:
            q = data.questions[qi]
            h = hits(data, q, rank_fn(qi))
            s.add(h, q.evidence)
            pooled.add(h, q.evidence)
            cats[q.category].add(h, q.evidence)
        per_fold[data.names[held]] = s.as_json()
    return {
        "all": pooled.as_json(),
        "folds": per_fold,
        "categories": {CATEGORY_NAMES[c]: s.as_json() for c, s in cats.items()},
    }


PRODUCT_BEFORE = Stage1(k=60, n=20)
PRODUCT = Stage1(k=10, n=30, nostop=True)  # ingest.search's first stage
FLOOR_COST = 0.002  # R@2000 the floor may cost on the training conversations


def oracle(s: Stage1) -> Fit:
    """The ceiling: the first stage's candidates in a perfect order (evidence windows first)."""

    def fit(data: Data, _train: Sequence[int]) -> Callable[[int], list[str]]:
        def r(qi: int) -> list[str]:
            q = data.questions[qi]
            pool = fused(q, s)
            return sorted(pool, key=lambda p: -label(data, q, p))

        return r

    return fit


def mask(*off: str) -> tuple[bool, ...]:
    return tuple(f not in off for f in rank.FEATURES)


def levers() -> dict[str, Fit]:
    """Every lever tried, in the order they were added; the last rows are the product."""
    base = ("speaker", "length", "time", "after_question")
    aq = "after_question"
    out: dict[str, Fit] = {
        "dense only (n=50)": fixed(Stage1(n=50, lexical=0.0)),
        "lexical only (n=50)": fixed(Stage1(n=50, dense=0.0)),
        "before: RRF k=60, n=20": fixed(PRODUCT_BEFORE),
        "RRF k=10": fixed(Stage1(k=10, n=20)),
        "stop words out of the lexical query": fixed(Stage1(k=60, n=20, nostop=True)),
        "RRF k=10 + stop words out (n=20)": fixed(Stage1(k=10, n=20, nostop=True)),
        "RRF k=10 + stop words out (n=30)": fixed(PRODUCT),
        "RRF k tuned on the folds + stop words out": tuned_k(Stage1(k=10, n=20, nostop=True)),
        "ceiling: perfect order of the n=30 candidates": oracle(PRODUCT),
        "ranker: scores, ranks, best message": ranked(Ranker(PRODUCT, mask(*base), stem=None)),
        "  + speaker": ranked(Ranker(PRODUCT, mask("length", "time", aq), stem=None)),
        "  + speaker + length": ranked(Ranker(PRODUCT, mask("time", aq), stem=None)),
        "  + speaker + length + time": ranked(Ranker(PRODUCT, mask(aq), stem=None)),
        "  + stem 4": ranked(Ranker(PRODUCT, mask(aq))),
        "  + stem 5": ranked(Ranker(PRODUCT, mask(aq), stem=5)),
        "  + stem 6": ranked(Ranker(PRODUCT, mask(aq), stem=6)),
        "  + stem 4 − raw cosine (the ranker before after_question)": ranked(
            Ranker(PRODUCT, mask("dense", aq))
        ),
        "  + after_question (the product's ranker)": ranked(Ranker(PRODUCT)),
        "product's ranker, lists n=20": ranked(Ranker(Stage1(10, 20, True))),
        "product's ranker, lists n=50": ranked(Ranker(Stage1(10, 50, True))),
    }
    for f in rank.FEATURES:
        if f != "dense":
            out[f"product's ranker without {f}"] = ranked(Ranker(PRODUCT, mask("dense", f)))
    out["before after_question: ranker + relevance floor"] = ranked(
        Ranker(PRODUCT, mask("dense", aq)), FLOOR_COST
    )
    out["product: ranker + relevance floor"] = ranked(Ranker(PRODUCT), FLOOR_COST)
    return out


def train_all(data: Data) -> tuple[Model, float]:
    """The coefficients and floor `ingest.rank` ships: fitted on every conversation."""
    r = Ranker(PRODUCT)
    qis = list(range(len(data.questions)))
    model = r.train(data, qis)
    return model, calibrate(data, r, model, qis, FLOOR_COST)


def fmt(name: str, row: Mapping[str, Any]) -> str:
    a = row["all"]
    fold_cells = " / ".join(f"{f['recall@2000']:.3f}" for f in row["folds"].values())
    mrr_cells = " / ".join(f"{f['mrr']:.3f}" for f in row["folds"].values())
    return (
        f"| {name} | **{a['recall@2000']:.3f}** | {fold_cells} | **{a['mrr']:.3f}** | "
        f"{mrr_cells} | {a['recall@1']:.3f} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loco", description=__doc__)
    p.add_argument("--candidates", type=Path, default=Path("bench/out/candidates.json"))
    p.add_argument("--out", type=Path)
    p.add_argument("--only", help="levers whose name contains this")
    p.add_argument("--train", action="store_true", help="print the shipped coefficients")
    args = p.parse_args(argv)
    data = load(args.candidates)
    if args.train:
        model, floor = train_all(data)
        for name, coef in (("COEFFICIENTS", model.ranker), ("MATCH_COEFFICIENTS", model.match)):
            print(f"{name}: Mapping[str, float] = {{")
            for f, value in coef.items():
                if value or f == "bias":
                    print(f'    "{f}": {value:.4f},')
            print("}")
        print(f"FLOOR = {floor:.4f}")
        return 0
    results: dict[str, Any] = {}
    names = " / ".join(data.names)
    print(f"| lever | R@2000 all | R@2000 {names} | MRR all | MRR {names} | R@1 |")
    print("|---|---|---|---|---|---|")
    for name, fit in levers().items():
        if args.only and args.only not in name:
            continue
        results[name] = folds(data, fit)
        print(fmt(name, results[name]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
