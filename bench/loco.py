"""Leave one conversation out: every ranking lever scored on a conversation it was not tuned on.

    python -m bench.loco --candidates bench/out/candidates.json [--out FILE] [--train]

(`python -m bench.retrieval --folds` collects the candidates first, then runs this.)
Replays the read path offline over the cached deep lists (`bench.harness.replay`): the first stage
(dense and lexical lists, the lexical floor, RRF) exactly as `ingest.search` does it, then the
second-stage ranker of `ingest.search.ranking`. For each of the three locomo-dev conversations, a
lever's free choices (RRF's k, the ranker's coefficients, the relevance floor) are fitted on the
other two, and the held-out one is scored; "all" pools the three held-out scores (each question is
scored by settings that never saw its conversation). `--train` fits on all three and prints the
coefficients and floor `ingest.search.ranking.models` ships.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import arguments, save
from bench.harness.locomo import Scores
from bench.harness.replay import (
    CATEGORY_NAMES,
    PRODUCT_OFF,
    Data,
    Model,
    Ranker,
    Stage1,
    fused,
    hits,
    label,
    load,
    merged,
    message_hits,
    scores,
)
from ingest.search.ranking import rank
from ingest.search.searcher import PRODUCT as SEARCH

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


def ranked(r: Ranker, floor_cost: float | None = None, view: str = "agents") -> Fit:
    """The ranker trained on `train`; with `floor_cost`, the highest floor costing at most that
    much R@2000 on `train` too (cutting), judging matches close in the product's `view`."""

    def fit(data: Data, train: Sequence[int]) -> Callable[[int], list[str]]:
        model = r.train(data, train)
        floor = 0.0 if floor_cost is None else calibrate(data, r, model, train, floor_cost)
        return lambda qi: r.rank(data, qi, model, floor, view)

    return fit


def calibrate(data: Data, r: Ranker, model: Model, train: Sequence[int], cost: float) -> float:
    """The highest floor (of a grid, 0.0005 to 0.5) whose R@2000 on `train` is within `cost` of
    none."""
    qs = [data.questions[i] for i in train]

    def r2000(floor: float) -> float:
        rs = [r.rank(data, i, model, floor, "cut") for i in train]
        return float(scores(data, qs, rs).as_json()["recall@2000"])

    full = r2000(0.0)
    best = 0.0
    for floor in np.geomspace(0.0005, 0.5, 80):
        if r2000(float(floor)) >= full - cost:
            best = float(floor)
        else:
            break
    return best


def folds(data: Data, fit: Fit, n_conv: int | None = None) -> dict[str, Any]:
    """Leave one of the first `n_conv` conversations (None: all) out, fitting on the others of
    them (a transfer set after them is never trained on)."""
    n_conv = len(data.names) if n_conv is None else n_conv
    per_fold: dict[str, Any] = {}
    pooled, cats = Scores(), {c: Scores() for c in CATEGORY_NAMES}
    said, said_before = Scores(), Scores()  # a person's listed messages (rule 22b)
    for held in range(n_conv):
        train = [i for i, q in enumerate(data.questions) if q.conv != held and q.conv < n_conv]
        test = [i for i, q in enumerate(data.questions) if q.conv == held]
        rank_fn = fit(data, train)
        s = Scores()
        for qi in test:
            q = data.questions[qi]
            ranked_ids = rank_fn(qi)
            h = hits(data, q, ranked_ids)
            said.add(message_hits(data, q, ranked_ids), q.evidence)
            said_before.add(message_hits(data, q, ranked_ids, before=True), q.evidence)
            s.add(h, q.evidence)
            pooled.add(h, q.evidence)
            cats[q.category].add(h, q.evidence)
        per_fold[data.names[held]] = s.as_json()
    return {
        "all": pooled.as_json(),
        "folds": per_fold,
        "categories": {CATEGORY_NAMES[c]: s.as_json() for c, s in cats.items()},
        "messages": said.as_json(),
        "messages_before": said_before.as_json(),
    }


def transfer(data: Data, fit: Fit, fitted_on: int) -> dict[str, Any]:
    """Every question of conversations `fitted_on`… scored by `fit` trained on all the ones
    before them (no refit on the transfer set: how a lever fares on another kind of talk)."""
    train = [i for i, q in enumerate(data.questions) if q.conv < fitted_on]
    rank_fn = fit(data, train)
    s, said, said_before = Scores(), Scores(), Scores()
    for qi, q in enumerate(data.questions):
        if q.conv >= fitted_on:
            ranked_ids = rank_fn(qi)
            s.add(hits(data, q, ranked_ids), q.evidence)
            said.add(message_hits(data, q, ranked_ids), q.evidence)
            said_before.add(message_hits(data, q, ranked_ids, before=True), q.evidence)
    return {
        **s.as_json(),
        "messages": said.as_json(),
        "messages_before": said_before.as_json(),
    }


PRODUCT_BEFORE = Stage1(k=60, n=20)
# ingest.search's first stage: its k and list depth, the stop words out of the lexical query
PRODUCT = Stage1(k=SEARCH.rrf_k, n=SEARCH.candidates, nostop=True)
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
    gap = "best_message_gap"
    base = ("speaker", "length", "time", "after_question", gap)
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
        "  + speaker": ranked(Ranker(PRODUCT, mask("length", "time", aq, gap), stem=None)),
        "  + speaker + length": ranked(Ranker(PRODUCT, mask("time", aq, gap), stem=None)),
        "  + speaker + length + time": ranked(Ranker(PRODUCT, mask(aq, gap), stem=None)),
        "  + stem 4": ranked(Ranker(PRODUCT, mask(aq, gap))),
        "  + stem 5": ranked(Ranker(PRODUCT, mask(aq, gap), stem=5)),
        "  + stem 6": ranked(Ranker(PRODUCT, mask(aq, gap), stem=6)),
        "  + stem 4 − raw cosine (the ranker before after_question)": ranked(
            Ranker(PRODUCT, mask("dense", aq, gap))
        ),
        "  + after_question": ranked(Ranker(PRODUCT, mask("dense", gap))),
        "  + best_message_gap": ranked(Ranker(PRODUCT, mask("dense"))),
        "  + best_message_gap − lexical (the product's ranker)": ranked(Ranker(PRODUCT)),
        "product's ranker, lists n=20": ranked(Ranker(Stage1(10, 20, True))),
        "product's ranker, lists n=50": ranked(Ranker(Stage1(10, 50, True))),
    }
    for f in rank.FEATURES:
        if f not in PRODUCT_OFF:
            out[f"product's ranker without {f}"] = ranked(Ranker(PRODUCT, mask(*PRODUCT_OFF, f)))
    out["before after_question: ranker + relevance floor"] = ranked(
        Ranker(PRODUCT, mask("dense", aq, gap)), FLOOR_COST
    )
    out["before best_message_gap: ranker + relevance floor"] = ranked(
        Ranker(PRODUCT, mask("dense", gap)), FLOOR_COST
    )
    out["before − lexical: ranker + relevance floor"] = ranked(
        Ranker(PRODUCT, mask("dense")), FLOOR_COST
    )
    v4 = Ranker(PRODUCT, length_cap=math.inf)
    out["replaced: ranker v4 + relevance floor, cutting (length uncapped)"] = ranked(
        v4, FLOOR_COST, "cut"
    )
    out["v5, length uncapped: ranker + floor labels"] = ranked(v4, FLOOR_COST)
    out["v5 without length: ranker + floor labels"] = ranked(
        Ranker(PRODUCT, mask(*PRODUCT_OFF, "length")), FLOOR_COST
    )
    out["replaced: a person's pages, the close matches, then the weaker ones (4–7 Dec)"] = ranked(
        Ranker(PRODUCT), FLOOR_COST, "first"
    )
    out["replaced: a person's view, the close matches, else the nearest"] = ranked(
        Ranker(PRODUCT), FLOOR_COST, "people"
    )
    out["v5: MiniLM's rank read in every language"] = ranked(
        Ranker(PRODUCT, english_only=False), FLOOR_COST
    )
    out["replaced: a person's pages, close by the match model alone (before 7 Dec)"] = ranked(
        Ranker(PRODUCT, ranked_floor=False), FLOOR_COST, "first"
    )
    out["product: ranker v7 + floor labels (the agents' list)"] = ranked(
        Ranker(PRODUCT), FLOOR_COST
    )
    # A person's pages are the ranker's order, close as far as its first weaker candidate
    # (`Judgment.leading`): the agents' order, which is what these rows score.
    out["product, a person's pages: ranker v7, the ranker's order"] = ranked(
        Ranker(PRODUCT), FLOOR_COST
    )
    return out


def train_all(data: Data) -> tuple[Model, float]:
    """The coefficients and floor `ingest.search.ranking.models` ships, fitted on every
    conversation."""
    r = Ranker(PRODUCT)
    qis = list(range(len(data.questions)))
    model = r.train(data, qis)
    return model, calibrate(data, r, model, qis, FLOOR_COST)


def fmt(name: str, row: Mapping[str, Any]) -> str:
    a = row["all"]
    fold_cells = " / ".join(f"{f['recall@2000']:.3f}" for f in row["folds"].values())
    mrr_cells = " / ".join(f"{f['mrr']:.3f}" for f in row["folds"].values())
    out = (
        f"| {name} | **{a['recall@2000']:.3f}** | {fold_cells} | **{a['mrr']:.3f}** | "
        f"{mrr_cells} | {a['recall@1']:.3f} |"
    )
    if "transfer" in row:
        t = row["transfer"]
        out += f" **{t['recall@2000']:.3f}** / **{t['mrr']:.3f}** |"
    for key in ("messages", "messages_before"):
        cells = [row[key]] + ([row["transfer"][key]] if "transfer" in row else [])
        out += (
            " "
            + " ; ".join(
                f"{c['recall@5']:.3f} / {c['recall@10']:.3f} / {c['mrr']:.3f}" for c in cells
            )
            + " |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.loco", __doc__)
    p.add_argument("--candidates", type=Path, default=Path("bench/out/candidates.json"))
    p.add_argument("--out", type=Path)
    p.add_argument("--only", help="levers whose name contains one of these (comma-separated)")
    p.add_argument(
        "--transfer",
        type=Path,
        help="another set's candidates (molweni-dev), each lever fitted on all of --candidates",
    )
    p.add_argument("--train", action="store_true", help="print the shipped coefficients")
    args = p.parse_args(argv)
    data = load(args.candidates)
    n_conv = len(data.names)
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
    if args.transfer is not None:
        data = merged(data, load(args.transfer))
    results: dict[str, Any] = {}
    names = " / ".join(data.names[:n_conv])
    extra = f" {args.transfer.stem} R@2000 / MRR |" if args.transfer else ""
    said = " messages R@5 / R@10 / MRR (folds ; transfer), quoted as issue 47 quotes |"
    said += " the same, quoted as before issue 47 |"
    print(f"| lever | R@2000 all | R@2000 {names} | MRR all | MRR {names} | R@1 |{extra}{said}")
    print("|---|---|---|---|---|---|" + ("---|" if extra else "") + "---|---|")
    only = [o for o in (args.only or "").split(",") if o]
    for name, fit in levers().items():
        if only and not any(o in name for o in only):
            continue
        results[name] = folds(data, fit, n_conv)
        if args.transfer is not None:
            results[name]["transfer"] = transfer(data, fit, n_conv)
        print(fmt(name, results[name]), flush=True)
    save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
