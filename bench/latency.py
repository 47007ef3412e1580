"""Search latency: in-process `Searcher.search` by index size, and `!search` → reply end to end.

    python -m bench.latency [--data ../shared/data/irc-ubuntu] [--sizes 10000[,100000]]
        [--real-limit 100000] [--dense-sample 5000] [--queries 200]
        [--room-messages 1500] [--searches 40] [--no-e2e] [--out FILE]

In process (no homeserver: `live_check=None`, so no revalidation round trips): the first N
messages of the Ubuntu IRC logs (`bench.ingest.irc_events`: nick → mxid, minute → timestamp,
reply links → replies) become one room's JSONL export, which goes through the real writer
(`ExportReader` → `Writer`: scope, normalisation, scrub, windows at the product's chunker
defaults, lexical vectors, the embedded store). Then `--queries` held-out texts (messages of the
`dev` split, never indexed, at most 12 words) are asked one at a time, room filter on, limit 5:
`hybrid` is the product `Searcher` with the real MiniLM query embedding (its time included);
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
the real service (`bot.service.Service`, appservice mode, the real embedder) refreshing it.
An ordinary user then sends `--searches` `!search` commands (two-word phrases of the room's
own messages) one after another; the latency is from sending the command to the reply being
visible to the asker (polled every 20 ms), and, server-side, the reply's `origin_server_ts`
minus the command's. Synapse's own `POST /search` (`order_by: rank`, this room, limit 10) is
timed on the same room with the same texts, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import json
import math
import random
import re
import resource
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.ingest import irc_events
from bench.output import emit
from ingest import lexical
from ingest.config import Config, parse_config
from ingest.embed import DelegatingEmbedder, Embedder, make_embedder
from ingest.export import ExportReader
from ingest.query import SearchQuery
from ingest.refresh import Writer
from ingest.search import Searcher
from ingest.store import Store, open_store
from ingest.types import RoomID, SparseVector

ROOM = "!irc-ubuntu:bench.local"
SERVER_NAME = "bench.local"
NOISE = 0.5
_LINE = re.compile(r"^\[(\d\d):(\d\d)\] <([^>]+)> (.*)$")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]{3,}")


# ---------------------------------------------------------------- data


def messages(data: Path, n: int) -> Iterator[dict[str, Any]]:
    """The create event and `n` IRC messages; replays the logs with new ids past their end."""
    replay = 0
    produced = 0
    span = 0
    while produced < n:
        last_ts = 0
        fresh = 0
        for event in irc_events(data, n - produced):
            if event["type"] == "m.room.create":
                if replay == 0:
                    yield event
                continue
            fresh += 1
            last_ts = max(last_ts, int(event["origin_server_ts"]))
            if replay:
                event = copy.deepcopy(event)
                event["event_id"] = f"{event['event_id']}-r{replay}"
                event["origin_server_ts"] = int(event["origin_server_ts"]) + span * replay
                rel = event["content"].get("m.relates_to", {}).get("m.in_reply_to")
                if rel is not None:
                    rel["event_id"] = f"{rel['event_id']}-r{replay}"
            yield event
        if fresh == 0:
            return
        produced += fresh
        span = span or last_ts + 86_400_000
        replay += 1


def held_out_texts(data: Path, n: int, seed: int = 11) -> list[str]:
    """`n` message texts of the `dev` split (never indexed below 196k messages), ≤ 12 words."""
    out: list[str] = []
    for raw in sorted((data / "dev").glob("*.raw.txt")):
        for line in raw.read_text(errors="replace").splitlines():
            m = _LINE.match(line)
            if m is None:
                continue
            words = m.group(4).split()
            if len(words) >= 4:
                out.append(" ".join(words[:12]))
    random.Random(seed).shuffle(out)
    return out[:n]


def phrases(bodies: Sequence[str], n: int, seed: int = 5) -> list[str]:
    """`n` two-word phrases (words of 4+ letters, adjacent) from the given bodies."""
    rng = random.Random(seed)
    out: list[str] = []
    candidates = [b for b in bodies if len(_WORD.findall(b)) >= 2]
    while len(out) < n and candidates:
        words = _WORD.findall(rng.choice(candidates))
        i = rng.randrange(len(words) - 1)
        out.append(f"{words[i]} {words[i + 1]}")
    return out


# ---------------------------------------------------------------- stats


def stats(samples_s: Sequence[float]) -> dict[str, float | int]:
    """Nearest-rank percentiles in milliseconds."""
    ms = sorted(s * 1000 for s in samples_s)
    if not ms:
        return {"n": 0}

    def p(q: float) -> float:
        return round(ms[max(0, math.ceil(q * len(ms)) - 1)], 2)

    return {
        "n": len(ms),
        "p50_ms": p(0.50),
        "p90_ms": p(0.90),
        "p99_ms": p(0.99),
        "max_ms": round(ms[-1], 2),
        "mean_ms": round(sum(ms) / len(ms), 2),
    }


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


def _config(workdir: Path) -> Config:
    """The product's defaults (chunker, refresh), an embedded store in `workdir`."""
    return parse_config(
        {
            "homeserver": {"url": "http://127.0.0.1:1", "server_name": SERVER_NAME},
            "reader": {"user_id": "@muninn:bench.local", "access_token": "bench-not-used"},
            "index": {"store": {"path": str(workdir / "qdrant")}, "collection": "bench"},
        },
        workdir,
    )


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
        super().__init__(
            store, embedder, server_name=SERVER_NAME, candidates=20, rrf_k=60, ranker=False
        )

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
        cfg = _config(workdir)
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


# ---------------------------------------------------------------- end to end


class RequestCounter:
    """Counts the homeserver requests a `MatrixReader` makes (wraps its one request layer)."""

    def __init__(self, reader: Any) -> None:
        self.n = 0
        inner = reader._request

        async def counted(method: str, path: str, **kwargs: Any) -> Any:
            self.n += 1
            return await inner(method, path, **kwargs)

        reader._request = counted

    def since(self, mark: int) -> int:
        return self.n - mark


def _in_reply_to(event: dict[str, Any]) -> str | None:
    rel = event.get("content", {}).get("m.relates_to", {})
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


async def seed_room(
    hs: Any,
    room: str,
    senders: Sequence[str],
    bodies: Sequence[str],
    base_ts: int,
    at_once: int = 1,
) -> int:
    """Send `bodies` into `room`, each as a seed user standing in for its IRC sender, backdated
    20 s apart from `base_ts`, `at_once` sends in flight (1: strictly in order); returns how
    many seed users spoke."""
    from bot.demo.synapse_config import SEED_PREFIX

    seats: dict[str, Any] = {}
    for sender in senders:
        if sender not in seats:
            local = SEED_PREFIX + re.sub(r"[^a-z0-9]", "-", sender[5:].split(":")[0])
            seats[sender] = user = await hs.seed_user(f"{local}-{len(seats)}")
            await user.join(room)
    for start in range(0, len(bodies), at_once):
        await asyncio.gather(
            *(
                seats[senders[i]].send_text(room, bodies[i], ts=base_ts + i * 20_000)
                for i in range(start, min(start + at_once, len(bodies)))
            )
        )
    return len(seats)


async def end_to_end(data: Path, room_messages: int, searches: int, warmup: int) -> dict[str, Any]:
    import aiohttp

    from bench.synapse_run import synapse_search
    from bot.demo.synapse import start_synapse
    from bot.service import Service
    from tests.botkit import service_config
    from tests.homeserver import Homeserver

    bodies = [
        str(e["content"]["body"]).split("\n\n")[-1]
        for e in irc_events(data, room_messages)
        if e["type"] == "m.room.message"
    ]
    senders = [str(e["sender"]) for e in irc_events(data, room_messages)][1:]
    texts = phrases(bodies, searches + warmup)
    with tempfile.TemporaryDirectory(prefix="muninn-bench-e2e-") as tmp:
        workdir = Path(tmp)
        server = await asyncio.to_thread(start_synapse, workdir / "synapse")
        service: Service | None = None
        try:
            async with aiohttp.ClientSession() as session:
                hs = Homeserver(server, session)
                asker = await hs.register(displayname="Asker")
                room = await hs.fresh_room(asker, preset="public_chat")
                await hs.join_bot(asker, room)
                base_ts = int(time.time() * 1000) - room_messages * 20_000 - 3_600_000
                seed_start = time.perf_counter()
                seats = await seed_room(hs, room, senders, bodies, base_ts)
                seed_s = time.perf_counter() - seed_start
                cfg = service_config(server, workdir, bot={"rate_per_minute": 100_000})
                service = Service(cfg, full_at_start=True)
                await service.start()
                await hs.ping_appservice()
                index_start = time.perf_counter()
                await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 1800)
                index_s = time.perf_counter() - index_start
                col = await service.writer.open()
                points = await asyncio.to_thread(col.count)
                bot_id = server.bot_user_id
                requests = RequestCounter(service.client)
                reply_requests: list[int] = []
                client: list[float] = []
                server_side: list[float] = []
                reply_hits: list[int] = []
                for i, text in enumerate(texts):
                    start = time.perf_counter()
                    mark = requests.n
                    command = await asker.send_text(room, f"!search {text}")
                    reply = None
                    while reply is None:
                        chunk = (await asker.messages(room, direction="b", limit=10))["chunk"]
                        reply = next(
                            (
                                e
                                for e in chunk
                                if e["sender"] == bot_id and _in_reply_to(e) == command
                            ),
                            None,
                        )
                        if reply is None:
                            if time.perf_counter() - start > 60:
                                raise RuntimeError(f"no reply to {command!r} in 60 s")
                            await asyncio.sleep(0.02)
                    elapsed = time.perf_counter() - start
                    made = requests.since(mark)
                    sent = await asker.get_event(room, command)
                    if i >= warmup:
                        reply_requests.append(made)
                        client.append(elapsed)
                        server_side.append(
                            (int(reply["origin_server_ts"]) - int(sent["origin_server_ts"])) / 1000
                        )
                        reply_hits.append(str(reply["content"].get("body", "")).count("\n"))
                # Where the time goes: the bot's own receipt → send, the transcript read alone
                # (`latest`, the bound of `bot.transcript_limit`), and `Searcher.search` alone
                # on the bot's store (with its homeserver revalidation of the hits).
                handler = service.handler
                in_bot = [ms / 1000 for ms in list(handler.latencies_ms)[-len(client) :]]
                read_log: list[float] = []
                searcher: list[float] = []
                searcher_requests: list[int] = []
                for text in texts[warmup:]:
                    start = time.perf_counter()
                    await handler.read_log(RoomID(room))
                    read_log.append(time.perf_counter() - start)
                    query = SearchQuery.build([text], room_ids=[room], limit=5)
                    start = time.perf_counter()
                    mark = requests.n
                    await service.searcher.search(query)
                    searcher.append(time.perf_counter() - start)
                    searcher_requests.append(requests.since(mark))
                synapse: list[float] = []
                synapse_results: list[int] = []
                for i, text in enumerate(texts):
                    start = time.perf_counter()
                    answer = await synapse_search(asker, room, text, limit=10)
                    elapsed = time.perf_counter() - start
                    if answer.error is not None:
                        raise RuntimeError(f"Synapse /search refused {text!r}: {answer.error}")
                    if i >= warmup:
                        synapse.append(elapsed)
                        synapse_results.append(len(answer.events))
        finally:
            if service is not None:
                await service.stop()
            await asyncio.to_thread(server.stop)
    return {
        "room_messages": len(bodies),
        "senders": seats,
        "points": points,
        "seed_seconds": round(seed_s, 1),
        "index_seconds": round(index_s, 1),
        "searches": len(client),
        "queries": texts[warmup:],
        "bang_search_client": stats(client),
        "bang_search_server_ts": stats(server_side),
        "bot_receipt_to_send": stats(in_bot),
        "transcript_read": {**stats(read_log), "bound": cfg.bot.transcript_limit},
        "searcher_with_revalidation": stats(searcher),
        # Homeserver requests: all the bot made per `!search` reply (transcript read, state,
        # revalidation, the reply), and those of `Searcher.search` alone (revalidation).
        "requests_per_reply": _counts(reply_requests),
        "revalidation_requests_per_search": _counts(searcher_requests),
        "searcher_over_synapse_p50": round(_p50(searcher) / max(_p50(synapse), 1e-9), 1),
        "synapse_search": {
            **stats(synapse),
            "mean_results": round(sum(synapse_results) / max(len(synapse_results), 1), 2),
            "limit": 10,
        },
    }


def _counts(ns: Sequence[int]) -> dict[str, float | int]:
    ordered = sorted(ns)
    if not ordered:
        return {"n": 0}
    return {
        "p50": ordered[(len(ordered) - 1) // 2],
        "max": ordered[-1],
        "mean": round(sum(ordered) / len(ordered), 2),
    }


def _p50(samples_s: Sequence[float]) -> float:
    return float(stats(samples_s).get("p50_ms", 0.0))


# ---------------------------------------------------------------- main


def machine() -> dict[str, Any]:
    import os
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem) / 1024 / 1024, 1),
        "python": platform.python_version(),
        "synapse": v("matrix-synapse"),
        "qdrant-edge-py": v("qdrant-edge-py"),
        "onnxruntime": v("onnxruntime"),
        "load_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    queries = held_out_texts(args.data, args.queries + args.warmup)
    embedder = make_embedder(_config(Path(tempfile.gettempdir())).embedder)
    await embedder.probe()
    results: dict[str, Any] = {"machine": machine(), "in_process": []}
    for size in sizes:
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
        row["wall_seconds"] = round(time.perf_counter() - start, 1)
        results["in_process"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if not args.no_e2e:
        start = time.perf_counter()
        results["end_to_end"] = await end_to_end(
            args.data, args.room_messages, args.searches, args.e2e_warmup
        )
        results["end_to_end"]["wall_seconds"] = round(time.perf_counter() - start, 1)
    await embedder.close()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
