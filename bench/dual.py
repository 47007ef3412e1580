"""Issue 23's levers over two candidate caches, held out as `bench.loco` does it.

    python -m bench.dual --candidates bench/out/candidates-minilm.json \
        --second bench/out/candidates-multilingual-e5-small.json [--only NAME]

Both caches come from `bench.retrieval --folds` over the same conversations (one per embedder;
the windows are the same, matched by their messages). Levers, each one flag of `Lever`:

- `dual`: a second dense list (the other model's), fused with the first and the lexical one
  (RRF), and the ranker seeing both cosines (`dense2`, `dense2_gap`, `dense2_rr`; the match
  model both cosines);
- `n`: the lists' depth (the candidate pool);
- `spread`: the cosine gap divided by the list's spread (top minus the n-th), a feature on the
  embedder's own scale;
- `stem`: the lexical list from a BM25 index built here over the cached windows (`name: body`
  lines; IDF as the store's), terms cut to their first `stem` characters (0: whole, the
  baseline of this lever: the store's own list is not rebuilt from the cache).

The product's first stage and ranker (`bench.replay`) are the row every lever is read against,
in the same run.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import arguments, save
from bench.loco import FLOOR_COST, fmt
from bench.locomo import Scores
from bench.replay import (
    CATEGORY_NAMES,
    PRODUCT_OFF,
    Data,
    Found,
    fit_logistic,
    floored,
    hits,
    label,
    load,
    spans,
)
from ingest import lexical
from ingest.search import rank
from ingest.search.fusion import rrf
from ingest.search.retrieve import LEXICAL_FLOOR, RRF_K

EXTRA = ("dense2", "dense2_gap", "dense2_rr", "spread_gap", "spread2_gap", "mix_mean", "mix_max")


@dataclass(frozen=True)
class Lever:
    dual: bool = False
    n: int = 30
    n2: int | None = None  # the second list's depth in the pool (None: n; 0: not in the pool)
    exact: bool = False  # the second model's features from its whole list (every window's cosine)
    without: tuple[str, ...] = ()  # features left out of the ranker besides the product's
    match2: bool = True  # the match model reads the second cosine too
    mix: str | None = None  # "mean" or "max": one gap feature of both models' spread gaps
    fixed_floor: float | None = None  # the floor as shipped instead of fitted on the training side
    spread: bool = False
    primary_dense: bool = True  # the first dense list in the pool (False: only the second's)
    floor: bool = True
    stem: int | None = None  # None: the store's lexical list; 0: rebuilt whole; k: rebuilt, cut


def second_lists(a: Data, b: Data) -> tuple[Found, ...]:
    """B's dense list of each of A's questions, in A's window ids (windows matched by their
    messages' dialogue ids)."""
    out: list[Found] = []
    maps = []
    for wa, wb in zip(a.windows, b.windows, strict=True):
        key_a = {tuple(m[0] for m in msgs): pid for pid, msgs in wa.items()}
        maps.append({pid: key_a.get(tuple(m[0] for m in msgs)) for pid, msgs in wb.items()})
    assert len(a.questions) == len(b.questions)
    for qa, qb in zip(a.questions, b.questions, strict=True):
        assert qa.text == qb.text and qa.conv == qb.conv
        m = maps[qb.conv]
        out.append(tuple((m[p], s) for p, s in qb.dense if m.get(p) is not None))  # type: ignore[misc]
    return tuple(out)


def _terms(text: str, stem: int) -> list[str]:
    toks = lexical.tokens(text)
    return [t[:stem] for t in toks] if stem else toks


class _Index:
    """BM25 over every cached window (one collection: IDF over all conversations, as the
    store's `Modifier.IDF`), `lexical.document_vector`'s term weights."""

    def __init__(self, data: Data, stem: int) -> None:
        self.stem = stem
        self.docs: list[dict[str, dict[str, float]]] = []
        df: Counter[str] = Counter()
        for w in data.windows:
            conv: dict[str, dict[str, float]] = {}
            for pid, msgs in w.items():
                counts = Counter(_terms("\n".join(f"{s}: {b}" for _, s, b in msgs), stem))
                norm = 1.2 * (0.25 + 0.75 * sum(counts.values()) / 40.0)
                conv[pid] = {t: tf * 2.2 / (tf + norm) for t, tf in counts.items()}
                df.update(conv[pid].keys())
            self.docs.append(conv)
        n = sum(len(c) for c in self.docs)
        self.idf = {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}

    def search(self, conv: int, text: str, depth: int = 100) -> Found:
        words = rank.content_terms(text) or lexical.tokens(text)
        terms = list(dict.fromkeys(_terms(" ".join(words), self.stem)))
        scored = [
            (pid, sum(self.idf.get(t, 0.0) * d.get(t, 0.0) for t in terms))
            for pid, d in self.docs[conv].items()
        ]
        scored = [x for x in scored if x[1] > 0]
        scored.sort(key=lambda x: -x[1])
        return tuple(scored[:depth])


class Replay:
    """The pools, features and folds of one pair of caches."""

    def __init__(self, a: Data, b: Data | None) -> None:
        self.data = a
        self.second = second_lists(a, b) if b is not None else None
        self._memo: dict[tuple[int, Lever], tuple[list[str], np.ndarray]] = {}
        self._bm25: dict[tuple[int, int], Found] = {}
        self._index: dict[int, _Index] = {}

    def lists(self, qi: int, lv: Lever) -> tuple[Found, Found, Found]:
        q = self.data.questions[qi]
        n2 = lv.n if lv.n2 is None else lv.n2
        d2: Found = self.second[qi][:n2] if self.second is not None and lv.dual else ()
        lex = q.lexical_nostop if lv.stem is None else self.bm25(qi, lv.stem)
        return q.dense[: lv.n], d2, floored(lex[: lv.n], LEXICAL_FLOOR)

    def bm25(self, qi: int, stem: int) -> Found:
        key = (qi, stem)
        if key not in self._bm25:
            if stem not in self._index:
                self._index[stem] = _Index(self.data, stem)
            q = self.data.questions[qi]
            self._bm25[key] = self._index[stem].search(q.conv, q.text)
        return self._bm25[key]

    def pool(self, qi: int, lv: Lever) -> list[str]:
        q = self.data.questions[qi]
        d, d2, lx = self.lists(qi, lv)
        runs = {("lexical", q.text): [p for p, _ in lx]}
        weights = {"lexical": 1.0, "dense": 1.0, "dense2": 1.0}
        if lv.primary_dense:
            runs[("dense", q.text)] = [p for p, _ in d]
        if d2:
            runs[("dense2", q.text)] = [p for p, _ in d2]
        return [p for p, _ in rrf(runs, k=RRF_K, weights=weights)]

    def features(self, qi: int, lv: Lever) -> tuple[list[str], np.ndarray]:
        key = (qi, replace(lv, floor=True))
        if key in self._memo:
            return self._memo[key]
        q = self.data.questions[qi]
        pool = self.pool(qi, lv)
        d, d2, lx = self.lists(qi, lv)
        w = self.data.windows[q.conv]
        bodies = {p: [body for _, _, body in w[p]] for p in pool}
        senders = {p: [snd for _, snd, _ in w[p]] for p in pool}
        sp = spans(self.data, q, pool)
        rows = np.asarray(
            rank.features(q.text, pool, bodies, d, lx, senders, spans=sp), dtype=float
        ).reshape(len(pool), len(rank.FEATURES))
        extra = np.zeros((len(pool), len(EXTRA)))
        if lv.dual and self.second is not None:
            seen = self.second[qi] if lv.exact or not d2 else d2
            rows2 = np.asarray(
                rank.features(q.text, pool, bodies, seen, lx, senders, spans=sp), dtype=float
            ).reshape(len(pool), len(rank.FEATURES))
            for j, f in enumerate(("dense", "dense_gap", "dense_rr")):
                extra[:, j] = rows2[:, rank.FEATURES.index(f)]
            extra[:, 4] = _spread(rows2, seen[: len(d)])
        extra[:, 3] = _spread(rows, d)
        extra[:, 5] = (extra[:, 3] + extra[:, 4]) / 2
        extra[:, 6] = np.maximum(extra[:, 3], extra[:, 4])
        x = np.hstack([rows, extra])
        self._memo[key] = (pool, x)
        return pool, x


def _spread(rows: np.ndarray, found: Found) -> np.ndarray:
    """The cosine gap over the list's spread (its best minus its last), on any model's scale."""
    spread = found[0][1] - found[-1][1] if len(found) > 1 else 0.0
    gap = rows[:, rank.FEATURES.index("dense_gap")]
    return gap / spread if spread > 1e-9 else np.zeros(len(rows))


NAMES = (*rank.FEATURES, *EXTRA)


def columns(lv: Lever) -> tuple[list[int], list[int]]:
    """The ranker's and the match model's feature columns for a lever."""
    off = set(PRODUCT_OFF) | {"dense2", "spread_gap", "spread2_gap", "mix_mean", "mix_max"}
    off |= set(lv.without)
    if lv.mix:
        off |= {"dense_gap", "dense2_gap"}
        off -= {f"mix_{lv.mix}"}
    if not lv.dual:
        off |= {"dense2_gap", "dense2_rr"}
    if lv.spread:
        off |= {"dense_gap", "dense2_gap"}
        off -= {"spread_gap"} | ({"spread2_gap"} if lv.dual else set())
    match = ["dense", "best_message"] + (["dense2"] if lv.dual and lv.match2 else [])
    ranker = [i for i, f in enumerate(NAMES) if f not in off]
    return ranker, [NAMES.index(f) for f in match]


@dataclass
class Fitted:
    ranker: np.ndarray
    match: np.ndarray
    floor: float


def _p(x: np.ndarray, cols: list[int], w: np.ndarray) -> np.ndarray:
    z = np.clip(x[:, cols] @ w[1:] + w[0], -60, 60)
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


def order(r: Replay, qi: int, lv: Lever, fit: Fitted) -> list[str]:
    pool, x = r.features(qi, lv)
    if not pool:
        return []
    rc, mc = columns(lv)
    p, m = _p(x, rc, fit.ranker), _p(x, mc, fit.match)
    idx = sorted(range(len(pool)), key=lambda i: -p[i])
    return [pool[i] for i in idx if m[i] >= fit.floor]


def r2000(r: Replay, qis: Sequence[int], ranked: Sequence[Sequence[str]]) -> float:
    s = Scores()
    for qi, rk in zip(qis, ranked, strict=True):
        q = r.data.questions[qi]
        s.add(hits(r.data, q, rk), q.evidence)
    return float(s.as_json()["recall@2000"])


def train(r: Replay, lv: Lever, qis: Sequence[int]) -> Fitted:
    xs, ys = [], []
    for qi in qis:
        pool, x = r.features(qi, lv)
        if pool:
            xs.append(x)
            ys.append([label(r.data, r.data.questions[qi], p) for p in pool])
    x, y = np.vstack(xs), np.concatenate(ys)
    rc, mc = columns(lv)
    fit = Fitted(fit_logistic(x[:, rc], y), fit_logistic(x[:, mc], y), 0.0)
    if lv.fixed_floor is not None:
        fit.floor = lv.fixed_floor
    elif lv.floor:
        full = r2000(r, qis, [order(r, qi, lv, fit) for qi in qis])
        for floor in np.geomspace(0.0005, 0.5, 80):
            trial = Fitted(fit.ranker, fit.match, float(floor))
            if r2000(r, qis, [order(r, qi, lv, trial) for qi in qis]) >= full - FLOOR_COST:
                fit.floor = float(floor)
            else:
                break
    return fit


def folds(r: Replay, lv: Lever) -> tuple[dict[str, Any], list[float], list[float]]:
    """Held-out scores of a lever, and each question's R@2000 and reciprocal rank."""
    data = r.data
    per_fold: dict[str, Any] = {}
    pooled, cats = Scores(), {c: Scores() for c in CATEGORY_NAMES}
    per_q_r = [0.0] * len(data.questions)
    per_q_m = [0.0] * len(data.questions)
    for held in range(len(data.names)):
        trn = [i for i, q in enumerate(data.questions) if q.conv != held]
        test = [i for i, q in enumerate(data.questions) if q.conv == held]
        fit = train(r, lv, trn)
        s = Scores()
        for qi in test:
            q = data.questions[qi]
            h = hits(data, q, order(r, qi, lv, fit))
            one = Scores()
            one.add(h, q.evidence)
            per_q_r[qi] = one.sums["recall@2000"]
            per_q_m[qi] = one.sums["mrr"]
            for sc in (s, pooled, cats[q.category]):
                sc.add(h, q.evidence)
        per_fold[data.names[held]] = s.as_json()
    row = {
        "all": pooled.as_json(),
        "folds": per_fold,
        "categories": {CATEGORY_NAMES[c]: s.as_json() for c, s in cats.items()},
    }
    return row, per_q_r, per_q_m


def paired(a: Sequence[float], b: Sequence[float]) -> str:
    d = np.asarray(a) - np.asarray(b)
    return f"{d.mean():+.3f} ± {d.std(ddof=1) / math.sqrt(len(d)):.3f}"


LEVERS: dict[str, Lever] = {
    "product (ranker + floor)": Lever(),
    "n=40": Lever(n=40),
    "n=50": Lever(n=50),
    "spread gap": Lever(spread=True),
    "dual": Lever(dual=True),
    "dual, second list 15 deep": Lever(dual=True, n2=15),
    "second cosine only (features, not in the pool), its whole list": Lever(
        dual=True, n2=0, exact=True
    ),
    "dual, its features from its whole list": Lever(dual=True, exact=True),
    "dual (whole list), only dense2_rr": Lever(dual=True, exact=True, without=("dense2_gap",)),
    "dual (whole list), only dense2_gap": Lever(dual=True, exact=True, without=("dense2_rr",)),
    "dual, only dense2_rr": Lever(dual=True, without=("dense2_gap",)),
    "second cosine not in the pool, only dense2_gap": Lever(
        dual=True, n2=0, exact=True, without=("dense2_rr",)
    ),
    "dual 15 deep (whole list), only dense2_gap": Lever(
        dual=True, n2=15, exact=True, without=("dense2_rr",)
    ),
    "dual (whole list), match on MiniLM only": Lever(dual=True, exact=True, match2=False),
    "dual, n=40": Lever(dual=True, n=40),
    "dual + spread": Lever(dual=True, spread=True),
    "mixed gap (mean), pool unchanged": Lever(
        dual=True, n2=0, exact=True, mix="mean", without=("dense2_rr",)
    ),
    "mixed gap (max), pool unchanged": Lever(
        dual=True, n2=0, exact=True, mix="max", without=("dense2_rr",)
    ),
    "mixed gap (mean), dual pool": Lever(
        dual=True, exact=True, mix="mean", without=("dense2_rr",)
    ),
    "mixed gap (mean) + both rr, dual pool": Lever(dual=True, exact=True, mix="mean"),
    "no floor": Lever(floor=False),
    "floor 0.0031 (e5's)": Lever(fixed_floor=0.0031),
    "floor 0.0025": Lever(fixed_floor=0.0025),
    "floor 0.0020": Lever(fixed_floor=0.0020),
    "floor 0.0015": Lever(fixed_floor=0.0015),
    "lexical rebuilt here, whole terms (the stem levers' baseline)": Lever(stem=0),
    "lexical stemmed: 5 characters": Lever(stem=5),
    "lexical stemmed: 6 characters": Lever(stem=6),
}


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.dual", __doc__)
    p.add_argument("--candidates", type=Path, required=True)
    p.add_argument("--second", type=Path, help="the other embedder's cache (dual levers)")
    p.add_argument("--only", help="levers whose name contains this")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    a = load(args.candidates)
    r = Replay(a, load(args.second) if args.second else None)
    results: dict[str, Any] = {}
    base: tuple[list[float], list[float]] | None = None
    names = " / ".join(a.names)
    print(f"| lever | R@2000 all | R@2000 {names} | MRR all | MRR {names} | R@1 | ΔR / ΔMRR |")
    print("|---|---|---|---|---|---|---|")
    for name, lv in LEVERS.items():
        if (lv.dual and r.second is None) or (args.only and args.only not in name and base):
            continue
        row, pr, pm = folds(r, lv)
        results[name] = row
        delta = "—" if base is None else f"{paired(pr, base[0])} / {paired(pm, base[1])}"
        base = base or (pr, pm)
        cats = " ".join(
            f"{c} {v['recall@2000']:.3f}/{v['mrr']:.3f}" for c, v in row["categories"].items()
        )
        print(f"{fmt(name, row)} {delta} |  {cats}", flush=True)
    save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
