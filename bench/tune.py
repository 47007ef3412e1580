"""Tuning on the dev set: chunker sizes × fusion settings × the unit a hit returns.

    python -m bench.tune --data ../shared/data/locomo-dev/locomo-dev.json [--out FILE]

Seeds Synapse once (as `bench.retrieval` does), builds one index with the real `Writer` per
chunker setting, and for every question fetches the dense and lexical candidate lists once,
deep (`DEPTH`), straight from the collection. Fusion (weights, k, candidates per list) and the
returned unit are then replayed offline with `ingest.fusion.rrf`, so a grid costs seconds.
A list of N candidates is the first N of the deep list (the store ranks deterministically).
Tune on the dev set only: the other LoCoMo conversations are held out.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.locomo import Hit, Scores, load
from bench.retrieval_setup import build_index, exit_on_sigterm, log, seeded_synapse
from bench.synapse_run import SeededRoom
from ingest import lexical
from ingest.embed import Embedder
from ingest.fusion import rrf
from ingest.rank import STOP_WORDS
from ingest.records import COMPAT_KEY
from ingest.store import PointFilter, Store
from ingest.types import SparseVector

DEPTH = 200
LIMIT = 50

Message = tuple[str, int, frozenset[str]]  # (dia_id, chars, lexical tokens of the body)


@dataclass(frozen=True)
class QData:
    """One question's deep candidate lists over one index."""

    evidence: tuple[str, ...]
    text: str
    dense: tuple[str, ...]
    lexical: tuple[str, ...]
    lexical_nostop: tuple[str, ...]
    windows: Mapping[str, tuple[Message, ...]]  # point id -> messages


def nostop_vector(text: str) -> SparseVector:
    kept = [t for t in dict.fromkeys(lexical.tokens(text)) if t not in STOP_WORDS]
    return lexical.query_vector(" ".join(kept) or text)


_TOKENS: dict[str, frozenset[str]] = {}


def _tokens(body: str) -> frozenset[str]:
    found = _TOKENS.get(body)
    if found is None:
        found = _TOKENS[body] = frozenset(lexical.tokens(body))
    return found


def _ids(
    found: Sequence[Any], room: SeededRoom, windows: dict[str, tuple[Message, ...]]
) -> tuple[str, ...]:
    for p in found:
        if p.id not in windows:
            windows[p.id] = tuple(
                (
                    room.dia_ids.get(str(m["event_id"]), str(m["event_id"])),
                    len(str(m["body"])),
                    _tokens(str(m["body"])),
                )
                for m in p.payload["messages"]
            )
    return tuple(p.id for p in found)


async def collect(store: Store, embedder: Embedder, rooms: Sequence[SeededRoom]) -> list[QData]:
    active = store.active()
    assert active is not None
    col = store.open(active, dense_dim=None, create=False)
    assert col.get_meta(COMPAT_KEY) is not None
    questions = [(room, q) for room in rooms for q in room.conversation.questions]
    vectors = await embedder.embed_queries([q.text for _, q in questions])
    out: list[QData] = []
    for (room, q), vec in zip(questions, vectors, strict=True):
        flt = PointFilter(room_ids=(room.room_id,))
        windows: dict[str, tuple[Message, ...]] = {}
        dense = _ids(col.dense_search(vec, flt, DEPTH), room, windows)
        lex = _ids(col.sparse_search(lexical.query_vector(q.text), flt, DEPTH), room, windows)
        lex_ns = _ids(col.sparse_search(nostop_vector(q.text), flt, DEPTH), room, windows)
        out.append(QData(q.evidence, q.text, dense, lex, lex_ns, windows))
    return out


# ---------------------------------------------------------------- units


Unit = Callable[[QData, Sequence[str]], list[Hit]]


def whole(qd: QData, ranked: Sequence[str]) -> list[Hit]:
    return [Hit(tuple((d, c) for d, c, _ in qd.windows[pid])) for pid in ranked]


def _idf(qd: QData, ranked: Sequence[str]) -> tuple[dict[str, float], int]:
    df: Counter[str] = Counter()
    n = 0
    for pid in ranked:
        for _, _, toks in qd.windows[pid]:
            df.update(toks)
            n += 1
    return {t: math.log(1 + n / c) for t, c in df.items()}, n


def excerpt(radius: int, fallback: str, stop: bool) -> Unit:
    """Best message of each window by IDF-weighted query-term overlap, ± `radius` neighbours.

    IDF comes from the messages of the returned windows themselves (no global statistics).
    A window sharing no query term gives its whole text (`fallback="whole"`), its first
    2·radius+1 messages (`"head"`), or its middle ones (`"middle"`).
    """

    def unit(qd: QData, ranked: Sequence[str]) -> list[Hit]:
        idf, _ = _idf(qd, ranked)
        terms = set(lexical.tokens(qd.text))
        if stop:
            terms -= STOP_WORDS
        hits: list[Hit] = []
        for pid in ranked:
            msgs = qd.windows[pid]
            scores = [sum(idf.get(t, 0.0) for t in terms & toks) for _, _, toks in msgs]
            best = max(range(len(msgs)), key=lambda i: (scores[i], -i))
            if scores[best] <= 0:
                if fallback == "whole":
                    hits.append(Hit(tuple((d, c) for d, c, _ in msgs)))
                    continue
                best = 0 if fallback == "head" else len(msgs) // 2
                lo = max(0, best - (radius if fallback == "middle" else 0))
                hi = min(len(msgs), lo + 2 * radius + 1)
            else:
                lo, hi = max(0, best - radius), min(len(msgs), best + radius + 1)
            hits.append(Hit(tuple((d, c) for d, c, _ in msgs[lo:hi])))
        return hits

    return unit


# ---------------------------------------------------------------- fusion replay


def fused(qd: QData, wd: float, wl: float, k: int, n: int, nostop: bool = False) -> list[str]:
    lex = qd.lexical_nostop if nostop else qd.lexical
    lists = {("dense", qd.text): list(qd.dense[:n]), ("lexical", qd.text): list(lex[:n])}
    return [pid for pid, _ in rrf(lists, k=k, weights={"dense": wd, "lexical": wl})][:LIMIT]


def score(data: Sequence[QData], rank: Callable[[QData], list[str]], unit: Unit) -> dict[str, Any]:
    s = Scores()
    for qd in data:
        s.add(unit(qd, rank(qd)), qd.evidence)
    return s.as_json()


def _ranker(wd: float, wl: float, k: int, n: int, ns: bool) -> Callable[[QData], list[str]]:
    return lambda qd: fused(qd, wd, wl, k, n, ns)


def fine_grid(data: Sequence[QData]) -> list[dict[str, Any]]:
    """Around the coarse optimum: candidates and lexical weight, product k and smaller k."""
    rows: list[dict[str, Any]] = []
    for wl, k, n, ns in itertools.product(
        (0.5, 0.75, 1.0, 1.25, 1.5, 2.0), (10, 20, 60), (10, 15, 20, 25, 30, 40, 50), (False, True)
    ):
        name = f"wd=1.0 wl={wl} k={k} n={n} nostop={ns}"
        rows.append(
            {"fusion": name, "unit": "window", **score(data, _ranker(1, wl, k, n, ns), whole)}
        )
    for wl, n in itertools.product((0.0,), (50,)):
        rows.append(
            {
                "fusion": "dense only n=50",
                "unit": "window",
                **score(data, _ranker(1, wl, 60, n, False), whole),
            }
        )
    rows.append(
        {
            "fusion": "lexical only n=50",
            "unit": "window",
            **score(data, _ranker(0, 1, 60, 50, False), whole),
        }
    )
    return rows


def grid(data: Sequence[QData]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    units: dict[str, Unit] = {"window": whole}
    for r, fb, st in itertools.product((0, 1, 2), ("whole", "head", "middle"), (False, True)):
        units[f"excerpt r={r} fb={fb} stop={st}"] = excerpt(r, fb, st)
    ranks: dict[str, Callable[[QData], list[str]]] = {}
    weights = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
    for wd, wl, k, n, ns in itertools.product(
        (1.0,), weights, (10, 30, 60, 100), (20, 50, 100, 200), (False, True)
    ):
        ranks[f"wd={wd} wl={wl} k={k} n={n} nostop={ns}"] = _ranker(wd, wl, k, n, ns)
    ranks["dense only n=50"] = _ranker(1.0, 0.0, 60, 50, False)
    for name, rank in ranks.items():
        rows.append({"fusion": name, "unit": "window", **score(data, rank, whole)})
    # Excerpt units only on the fusion settings worth a look (the best windows' settings).
    best = sorted(rows, key=lambda r: -float(r["recall@2000"]))[:6]
    best_names = [r["fusion"] for r in best] + ["wd=1.0 wl=1.0 k=60 n=50 nostop=False"]
    for fname in dict.fromkeys(best_names):
        for uname, unit in units.items():
            if uname != "window":
                rows.append({"fusion": fname, "unit": uname, **score(data, ranks[fname], unit)})
    return rows


async def main_async(
    data_path: Path, out: Path | None, configs: Sequence[tuple[int, int]], fine: bool
) -> None:
    conversations = load(data_path)
    results: dict[str, list[dict[str, Any]]] = {}
    async with seeded_synapse(conversations, "muninn-tune-") as seeded:
        work, hs, rooms, reader, embedder = seeded
        for max_bytes, gap in configs:
            t = time.monotonic()
            store, report = await build_index(
                hs,
                reader,
                work / f"qdrant-{max_bytes}-{gap}",
                embedder,
                max_bytes=max_bytes,
                gap_seconds=gap,
            )
            windows = sum(r.windows_written for r in report.rooms)
            qdata = await collect(store, embedder, rooms)
            await asyncio.to_thread(store.close)
            took = time.monotonic() - t
            log(f"max_bytes={max_bytes} gap={gap}: {windows} windows, {took:.0f}s")
            t = time.monotonic()
            rows = fine_grid(qdata) if fine else grid(qdata)
            log(f"  grid: {len(rows)} rows in {time.monotonic() - t:.0f}s")
            key = f"max_bytes={max_bytes} gap={gap} windows={windows}"
            results[key] = rows
            top = sorted(rows, key=lambda r: -float(r["recall@2000"]))[:5]
            for r in top:
                log(f"  {r['recall@2000']:.3f} {r['mrr']:.3f} {r['fusion']} | {r['unit']}")
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                text = json.dumps(results, indent=1) + "\n"
                await asyncio.to_thread(out.write_text, text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tune")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--configs",
        default="600:1800,1000:1800,300:1800,450:1800,800:1800,600:10",
        help="max_bytes:gap_seconds pairs, comma-separated",
    )
    p.add_argument("--fine", action="store_true", help="the fine grid (no excerpt units)")
    args = p.parse_args(argv)
    configs = [(int(a), int(b)) for a, b in (c.split(":") for c in str(args.configs).split(","))]
    exit_on_sigterm()
    asyncio.run(main_async(args.data, args.out, configs, args.fine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
