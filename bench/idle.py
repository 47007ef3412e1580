"""Memory of an idle `muninn run` over an index that exists: what the service holds between
commands (issue 14: ≤ 400 MiB with 100k messages indexed).

    python -m bench.idle --store DIR --collection NAME [--seconds 60] [--out FILE]

A fresh process opens what `bot.service.Service.start` opens for the read path — the store,
the purge log, MiniLM, a `Searcher` — answers a few searches as the first `!search`es after a
start would (loading the model and the collection), then idles and samples its RSS every
second. Revalidation (one or two homeserver requests a reply) and the sync loop are left out:
they hold no index data. `bench.ingest --idle-seconds N` runs this on the index it just built.
The service's embedder is the config's, so MiniLM is unloaded after `embedder.unload_after_seconds`
(300 s by default) without a call: idle longer than that to measure the service without it. The
first search after the idle spell is timed (it reloads the model if it was unloaded), and so is
the first search of all (the model's first load).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.output import emit
from ingest.config import parse_config
from ingest.embed import make_embedder, minilm
from ingest.purges import PurgeLog, purge_log_path
from ingest.query import SearchQuery
from ingest.search import Searcher
from ingest.store import open_store

QUERIES = ("apt-get install fails with a broken package", "how do I mount an ntfs drive", "grub")


def vm(key: str) -> float:
    """A memory line of /proc/self/status (VmRSS, VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def measure(store_dir: Path, collection: str, seconds: float) -> dict[str, Any]:
    cfg = parse_config(
        {
            "homeserver": {"url": "http://127.0.0.1:1", "server_name": "bench.local"},
            "reader": {"user_id": "@muninn:bench.local", "access_token": "bench-not-used"},
            "index": {"store": {"path": str(store_dir)}, "collection": collection},
        },
        store_dir.parent,
    )
    rss_start = vm("VmRSS")
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    embedder = make_embedder(cfg.embedder)
    purges = PurgeLog(purge_log_path(cfg.index, cfg.base_dir))
    searcher = Searcher(store, embedder, server_name="bench.local", purges=purges)
    rss_open = vm("VmRSS")
    hits = 0
    first_ms: float | None = None
    for q in QUERIES:
        started = time.perf_counter()
        result = await searcher.search(SearchQuery.build([q], limit=5))
        first_ms = first_ms or round((time.perf_counter() - started) * 1000, 1)
        hits += len(result.hits)
    rss_searched = vm("VmRSS")
    samples: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(1.0)
        samples.append(vm("VmRSS"))
    rss_idle = vm("VmRSS")
    unloaded = not minilm.loaded()
    started = time.perf_counter()
    hits_after = len((await searcher.search(SearchQuery.build([QUERIES[0]], limit=5))).hits)
    after_ms = round((time.perf_counter() - started) * 1000, 1)
    rss_after = vm("VmRSS")
    await embedder.close()
    await asyncio.to_thread(store.close)
    return {
        "rss_at_start_mib": rss_start,
        "rss_after_open_mib": rss_open,
        "rss_after_searches_mib": rss_searched,
        "rss_after_idle_mib": rss_idle,
        "rss_idle_max_mib": max(samples, default=rss_idle),
        "model_unloaded_when_idle": unloaded,
        "first_search_ms": first_ms,
        "search_after_idle_ms": after_ms,
        "search_after_idle_hits": hits_after,
        "rss_after_search_after_idle_mib": rss_after,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "searches": len(QUERIES),
        "hits": hits,
        "idle_seconds": seconds,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.idle", description=__doc__)
    p.add_argument("--store", type=Path, required=True, help="the embedded store's folder")
    p.add_argument("--collection", required=True)
    p.add_argument("--seconds", type=float, default=60.0, help="how long to idle")
    p.add_argument("--out", type=Path, help="write the JSON results here")
    args = p.parse_args(argv)
    emit(asyncio.run(measure(args.store, args.collection, args.seconds)), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
