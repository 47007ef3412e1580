"""Search latency: in-process `Searcher.search` by index size, and `!search` → reply end to end.

    python -m bench.latency [--data ../shared/data/irc-ubuntu] [--sizes 10000[,100000]]
        [--real-limit 100000] [--dense-sample 5000] [--queries 200]
        [--room-messages 1500] [--searches 40] [--no-e2e]
        [--embedder-model minilm[,multilingual-e5-small,e5-native]] [--out FILE]

The embedder is the product's default (`minilm+multilingual-e5-small` where e5 is installed)
unless `--embedder-model` names others; each row names its own, the end-to-end part runs with
the first.

In process (no homeserver: `live_check=None`, so no revalidation round trips): the first N
messages of the Ubuntu IRC logs (`bench.harness.irc.irc_events`: nick → mxid, minute → timestamp,
reply links → replies) become one room's JSONL export, which goes through the real writer
(`ExportReader` → `Writer`: scope, normalisation, scrub, windows at the product's chunker
defaults, lexical vectors, the embedded store). Then `--queries` held-out texts (messages of the
`dev` split, never indexed, at most 12 words) are asked one at a time, room filter on, limit 5:
`hybrid` is the product `Searcher` with the real query embedding (its time included);
`lexical` is the same `Searcher` without an embedder. The query embedding alone is timed too.

Sizes up to `--real-limit` messages (default 100,000) are embedded by the real model, every
window (MiniLM int8 does ~27 windows/s of 350 bytes on 2 cores: ~16 min for 100k messages).
Above it (1M would take ~3 h), the writer is given a `SampledEmbedder`: the first
`--dense-sample` windows get the model's vectors, every later window the vector of one of
those (picked by a hash of its text) plus Gaussian noise of norm 0.5, re-normalised (cosine
≈ 0.9 to its source). Payloads, windows, point count and lexical vectors are all real; only
those dense vectors are not the model's. Store latency depends on point count, payload and
the vectors' spread, which the noise keeps inside the model's cone.
Above 207k messages (the whole data set) the logs are replayed again with new event ids.

End to end (`--no-e2e` skips it): a real Synapse (`bot.demo.synapse.start_synapse`), one
public room of `--room-messages` IRC messages sent by seed users (backdated, 20 s apart), and
the real service (`bot.service.run.Service`, appservice mode, the real embedder) refreshing it.
An ordinary user then sends `--searches` `!search` commands (two-word phrases of the room's
own messages) one after another; the latency is from sending the command to the reply being
visible to the asker (polled every 20 ms), and, server-side, the reply's `origin_server_ts`
minus the command's. Then `Searcher.search` alone (with its revalidation) and Synapse's own
`POST /search` (`order_by: rank`, this room, limit 10) are timed on the same room, in the same
run, with as many other phrases: the service remembers a question's vectors (rule 22d), so the
commands' own phrases would time a remembered vector, not the read path.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import SERVER_NAME, arguments, embedder_option, emit, machine, offline_config, stats
from bench.harness.embedders import embedder_for
from bench.harness.irc import ROOM, held_out_texts, messages
from bench.harness.latency_e2e import end_to_end
from ingest.embed import DelegatingEmbedder, Embedder
from ingest.index.refresh import Writer
from ingest.matrix.export import ExportReader
from ingest.rules import lexical
from ingest.search import Searcher, SearchSettings
from ingest.search.query import SearchQuery
from ingest.store import Store, open_store
from ingest.types import SparseVector

NOISE = 0.5  # the norm of the noise added to a sampled vector (cosine ≈ 0.9 to its source)

# ---------------------------------------------------------------- in process


class SampledEmbedder(DelegatingEmbedder):
    """The real model for the first `sample` document texts, perturbed copies of them after."""

    def __init__(self, inner: Embedder, sample: int, seed: int = 3) -> None:
        super().__init__(inner)
        self.sample = sample
        self.pool: list[np.ndarray[Any, np.dtype[np.float32]]] = []
        self.real = 0
        self.synthetic = 0
        self.embed_seconds = 0.0
        self._rng = np.random.default_rng(seed)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        room = max(0, self.sample - self.real)
        out: list[list[float]] = []
        if room:
            start = time.perf_counter()
            real = await self.inner.embed_documents(texts[:room])
            self.embed_seconds += time.perf_counter() - start
            self.pool.extend(np.asarray(v, dtype=np.float32) for v in real)
            self.real += len(real)
            out.extend(real)
        for text in texts[room:]:
            h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            base = self.pool[h % len(self.pool)]
            noise = self._rng.standard_normal(base.shape[0]).astype(np.float32)
            vec = base + noise * (NOISE / float(np.linalg.norm(noise)))
            out.append((vec / float(np.linalg.norm(vec))).tolist())
            self.synthetic += 1
        return out


async def _time_search(searcher: Searcher, texts: Sequence[str], warmup: int) -> dict[str, Any]:
    samples: list[float] = []
    hits = 0
    for i, text in enumerate(texts):
        query = SearchQuery.build([text], room_ids=[ROOM], limit=5)
        start = time.perf_counter()
        result = await searcher.search(query)
        elapsed = time.perf_counter() - start
        if i >= warmup:
            samples.append(elapsed)
            hits += len(result.hits)
    out: dict[str, Any] = dict(stats(samples))
    out["mean_hits"] = round(hits / max(len(samples), 1), 2)
    out["retrievers"] = result.retrievers
    return out


class BeforeSearcher(Searcher):
    """The read path before the second stage (issue 13): RRF k = 60 over 20 candidates a list,
    the question as typed as the lexical query, no ranker and no relevance floor."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        settings = SearchSettings(candidates=20, rrf_k=60, ranker=False)
        super().__init__(store, embedder, server_name=SERVER_NAME, settings=settings)

    def lexical_query(self, text: str) -> SparseVector:
        return lexical.query_vector(text)


async def _time_pair(
    before: Searcher, after: Searcher, texts: Sequence[str], warmup: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both searchers on every text, alternating, so load on the shared cores hits both alike."""
    samples: tuple[list[float], list[float]] = ([], [])
    hits = [0, 0]
    for i, text in enumerate(texts):
        query = SearchQuery.build([text], room_ids=[ROOM], limit=5)
        for side, searcher in enumerate((before, after)):
            start = time.perf_counter()
            result = await searcher.search(query)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                samples[side].append(elapsed)
                hits[side] += len(result.hits)
    out = []
    for side in (0, 1):
        row: dict[str, Any] = dict(stats(samples[side]))
        row["mean_hits"] = round(hits[side] / max(len(samples[side]), 1), 2)
        out.append(row)
    return out[0], out[1]


async def in_process(
    data: Path,
    size: int,
    embedder: Embedder,
    *,
    real_limit: int,
    dense_sample: int,
    queries: Sequence[str],
    warmup: int,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="muninn-bench-latency-") as tmp:
        workdir = Path(tmp)
        export = workdir / "irc.jsonl"
        n = 0
        with export.open("w") as f:
            for event in messages(data, size):
                f.write(json.dumps(event) + "\n")
                n += event["type"] == "m.room.message"
        cfg = offline_config(workdir / "qdrant")  # the embedder is the one given
        sampled = size > real_limit
        doc_embedder: Embedder = SampledEmbedder(embedder, dense_sample) if sampled else embedder
        source = ExportReader.from_file(export, user_id="@muninn:bench.local")
        store = open_store(cfg.index, cfg.base_dir)
        writer = Writer(cfg, source, store, doc_embedder)
        await doc_embedder.probe()
        start = time.perf_counter()
        report = await writer.refresh(only=[source.room_id])
        build_s = time.perf_counter() - start
        col = await writer.open()
        points = await asyncio.to_thread(col.count)
        room = report.rooms[0]
        hybrid = Searcher(store, embedder, server_name=SERVER_NAME)
        lexical = Searcher(store, None, server_name=SERVER_NAME)
        result: dict[str, Any] = {
            "messages": n,
            "indexed": room.indexed,
            "points": points,
            "build_seconds": round(build_s, 1),
            "dense_vectors": (
                {
                    "model": doc_embedder.real,
                    "perturbed_copies": doc_embedder.synthetic,
                    "noise_norm": NOISE,
                }
                if isinstance(doc_embedder, SampledEmbedder)
                else {"model": room.windows_embedded, "perturbed_copies": 0}
            ),
            "hybrid": await _time_search(hybrid, queries, warmup),
            "lexical": await _time_search(lexical, queries, warmup),
        }
        # The same queries again, the read path before issue 13 and today's, interleaved.
        before, after = await _time_pair(BeforeSearcher(store, embedder), hybrid, queries, warmup)
        result["hybrid_before_ranker_interleaved"] = before
        result["hybrid_interleaved"] = after
        embed_samples = []
        for text in queries[warmup:]:
            t = time.perf_counter()
            await embedder.embed_queries([text])
            embed_samples.append(time.perf_counter() - t)
        result["query_embedding"] = stats(embed_samples)
        result["disk_mb"] = round(
            sum(p.stat().st_size for p in (workdir / "qdrant").rglob("*") if p.is_file()) / 1e6,
            1,
        )
        store.close()
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


# ---------------------------------------------------------------- main


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    queries = held_out_texts(args.data, args.queries + args.warmup)
    results: dict[str, Any] = {"machine": machine(), "in_process": []}
    for size in sizes:
        for model in args.embedder_model.split(","):
            embedder = embedder_for(model)
            await embedder.probe()
            start = time.perf_counter()
            row = await in_process(
                args.data,
                size,
                embedder,
                real_limit=args.real_limit,
                dense_sample=args.dense_sample,
                queries=queries,
                warmup=args.warmup,
            )
            await embedder.close()
            row["embedder_model"] = model
            row["wall_seconds"] = round(time.perf_counter() - start, 1)
            results["in_process"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if not args.no_e2e:
        start = time.perf_counter()
        results["end_to_end"] = await end_to_end(
            args.data,
            args.room_messages,
            args.searches,
            args.e2e_warmup,
            args.embedder_model.split(",")[0],
        )
        results["end_to_end"]["wall_seconds"] = round(time.perf_counter() - start, 1)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.latency", __doc__)
    p.add_argument("--data", type=Path, default=Path("../shared/data/irc-ubuntu"))
    p.add_argument("--sizes", default="10000", help="indexed messages, comma-separated")
    p.add_argument("--real-limit", type=int, default=100_000, help="model-embed every window ≤ N")
    p.add_argument("--dense-sample", type=int, default=5000, help="model windows above it")
    p.add_argument("--queries", type=int, default=200, help="timed in-process queries")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--room-messages", type=int, default=1500, help="end-to-end room size")
    p.add_argument("--searches", type=int, default=40, help="timed !search commands")
    p.add_argument("--e2e-warmup", type=int, default=3)
    p.add_argument("--no-e2e", action="store_true", help="skip Synapse and the bot")
    embedder_option(
        p,
        "; in process also e5-native, and comma-separated: each size indexed and timed with "
        "each in turn (end to end: the first)",
    )
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    results = asyncio.run(run(args))
    emit(results, args.out)
    e2e = results.get("end_to_end")
    if e2e is not None:
        print(
            f"requests per reply p50 {e2e['requests_per_reply']['p50']} (revalidation in "
            f"Searcher.search p50 {e2e['revalidation_requests_per_search']['p50']}); "
            f"Searcher.search p50 {e2e['searcher_with_revalidation']['p50_ms']} ms = "
            f"{e2e['searcher_over_synapse_p50']}x Synapse /search p50 "
            f"{e2e['synapse_search']['p50_ms']} ms",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
