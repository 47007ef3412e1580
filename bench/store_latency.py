"""Embedded-store figures: upsert rate and filtered query latency at N points (not a test).

    /work/venv/bin/python bench/store_latency.py --points 100000 --rooms 100 --queries 1000

Random unit 384-d vectors, a Zipf-ish sparse vector and a ~1 KB chat payload per point, spread
over `--rooms` rooms, so a room filter matches about 1/rooms of the points. Latency is measured
through the public Collection API (payload included), before and after `optimize()`.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ingest.config import IndexConfig, StoreConfig
from ingest.store import Collection, PointFilter, PointRecord, generation_name, open_store
from ingest.types import SparseVector

DIM = 384
VOCAB = 30_000


def make_points(rng: np.random.Generator, start: int, n: int, rooms: int) -> list[PointRecord]:
    dense = rng.standard_normal((n, DIM), dtype=np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    out = []
    for i in range(n):
        k = start + i
        terms = np.unique(rng.zipf(1.3, 40) % VOCAB)
        sparse = SparseVector(tuple(int(t) for t in terms), tuple(1.0 for _ in terms))
        ts = 1_700_000_000_000 + k * 60_000
        payload: dict[str, Any] = {
            "room_id": f"!room{k % rooms}",
            "thread_root": None,
            "event_ids": [f"$e{k}-{j}" for j in range(5)],
            "first_ts": ts,
            "last_ts": ts + 50_000,
            "senders": [f"@u{k % 37}:x", f"@u{k % 11}:x"],
            "messages": [
                {"event_id": f"$e{k}-{j}", "sender": "@u:x", "ts": ts, "body": "x" * 180}
                for j in range(5)
            ],
            "text": "y" * 900,
            "content_hash": f"{k:032x}",
        }
        pid = str(uuid.uuid5(uuid.NAMESPACE_OID, str(k)))
        out.append(PointRecord(pid, dense[i].tolist(), sparse, payload))
    return out


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)

    def p(q: float) -> float:
        return ms[min(len(ms) - 1, int(q * len(ms)))]

    return f"p50 {p(0.50):.2f} ms  p90 {p(0.90):.2f} ms  p99 {p(0.99):.2f} ms  (n={len(ms)})"


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def query_suite(coll: Collection, rng: np.random.Generator, rooms: int, n: int) -> None:
    qs = rng.standard_normal((n, DIM), dtype=np.float32)
    it = iter(qs.tolist())
    room = PointFilter(room_ids=("!room7",))
    print(
        "  dense, room filter   ",
        percentiles(timed(lambda: coll.dense_search(next(it), room, 10), n)),
    )
    it = iter(qs.tolist())
    print(
        "  dense, no filter     ",
        percentiles(timed(lambda: coll.dense_search(next(it), None, 10), n)),
    )
    sq = SparseVector((3, 17, 250), (1.0, 1.0, 1.0))
    print(
        "  sparse, room filter  ", percentiles(timed(lambda: coll.sparse_search(sq, room, 10), n))
    )
    print(
        "  sparse, no filter    ", percentiles(timed(lambda: coll.sparse_search(sq, None, 10), n))
    )
    print("  count, room filter   ", percentiles(timed(lambda: coll.count(room), n)))


def gil_check(coll: Collection, rng: np.random.Generator) -> None:
    """Does a query in a worker thread let the event-loop thread run? (asyncio.to_thread)"""
    qs = rng.standard_normal((200, DIM), dtype=np.float32).tolist()
    ticks = 0
    done = threading.Event()

    def worker() -> None:
        for q in qs:
            coll.dense_search(q, None, 10)
        done.set()

    t0 = time.perf_counter()
    threading.Thread(target=worker).start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.0005)
    elapsed = time.perf_counter() - t0
    print(
        f"  GIL: main thread ran {ticks} 0.5 ms ticks in {elapsed * 1000:.0f} ms of worker queries"
        f" (≈{ticks * 0.0005 / elapsed:.0%} of wall time; ~100% means the GIL is released)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--rooms", type=int, default=100)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--path", type=Path, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    root = args.path or Path(tempfile.mkdtemp(prefix="muninn-bench-"))
    store = open_store(IndexConfig(store=StoreConfig(path=root), collection="bench"), root)
    coll = store.open(generation_name("bench", {"dim": DIM}), dense_dim=DIM, create=True)
    print(f"store {root}: {args.points} points, {args.rooms} rooms, batch {args.batch}")

    build = upsert = 0.0
    for start in range(0, args.points, args.batch):
        t = time.perf_counter()
        batch = make_points(rng, start, min(args.batch, args.points - start), args.rooms)
        build += time.perf_counter() - t
        t = time.perf_counter()
        coll.upsert(batch)
        upsert += time.perf_counter() - t
    t = time.perf_counter()
    coll.flush()
    flush = time.perf_counter() - t
    print(
        f"upsert: {args.points / upsert:,.0f} points/s ({upsert:.1f} s; building points took "
        f"{build:.1f} s, not counted); flush {flush:.2f} s; count {coll.count()}"
    )

    print("before optimize():")
    query_suite(coll, rng, args.rooms, args.queries)
    gil_check(coll, rng)
    t = time.perf_counter()
    coll.optimize()
    print(f"optimize(): {time.perf_counter() - t:.1f} s")
    print("after optimize():")
    query_suite(coll, rng, args.rooms, args.queries)
    gil_check(coll, rng)
    store.close()
    t = time.perf_counter()
    store = open_store(IndexConfig(store=StoreConfig(path=root), collection="bench"), root)
    store.open(generation_name("bench", {"dim": DIM}), dense_dim=DIM, create=False)
    print(f"reopen: {time.perf_counter() - t:.2f} s")
    store.close()
    print(f"disk: {sum(f.stat().st_size for f in root.rglob('*') if f.is_file()) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
