"""`bench.retrieval`'s setup: the recommended settings, a Synapse seeded with the conversations,
one full writer pass into a new store, the signal handling done before minutes of seeding, and
`--folds`' candidate cache.

The cache holds, for every LoCoMo question, the dense and lexical lists (the question as typed,
and without its stop words) `DEPTH` deep with their scores, every listed window's messages, and
every window's time span; `bench.loco` replays the read path over it in numpy
(`bench.harness.replay`), so a lever costs seconds instead of an embedding run. A list of N
candidates is the first N of the deep list: the store ranks deterministically.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.locomo import Conversation, load
from bench.harness.synapse import SeededRoom, SynapseBench, seed_conversation
from bot.demo.client import MatrixUser
from bot.demo.homeserver import Homeserver
from ingest.config import Config, EmbedderConfig, parse_config
from ingest.embed import Embedder, make_embedder
from ingest.embed.pair import PART_SCALE, is_pair, parts
from ingest.index.records import COMPAT_KEY
from ingest.index.refresh import Writer
from ingest.index.reports import RefreshReport
from ingest.matrix import MatrixReader
from ingest.rules import lexical
from ingest.search.hits import CitedMessage, best_message
from ingest.search.matches import Terms
from ingest.search.quotes import best_of
from ingest.search.ranking.rank import content_terms
from ingest.search.searcher import PRODUCT
from ingest.store import PointFilter, Store, open_store

# The settings this benchmark recommends (see bench/RESULTS.md); flags override them.
MAX_BYTES = 350
GAP_SECONDS = 1800
CANDIDATES = PRODUCT.candidates
DENSE_WEIGHT = 1.0
LEXICAL_WEIGHT = 1.0
DEPTH = 100  # the cached lists' depth


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Settings:
    max_bytes: int = MAX_BYTES
    gap_seconds: int = GAP_SECONDS
    candidates: int = CANDIDATES
    dense_weight: float = DENSE_WEIGHT
    lexical_weight: float = LEXICAL_WEIGHT
    proposed: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "chunker": {"max_bytes": self.max_bytes, "gap_seconds": self.gap_seconds},
            "searcher": {
                "candidates": self.candidates,
                "weights": {"dense": self.dense_weight, "lexical": self.lexical_weight},
            },
        }


# ---------------------------------------------------------------- loading and indexing


async def seed_all(
    hs: Homeserver, conversations: Sequence[Conversation]
) -> tuple[list[SeededRoom], MatrixUser]:
    """Register the reader, then seed every conversation (concurrently: rooms are independent)."""
    reader = await hs.register("bench-reader", displayname="bench reader")
    seeded = await asyncio.gather(*(seed_conversation(hs, c, [reader]) for c in conversations))
    return list(seeded), reader


@contextlib.asynccontextmanager
async def seeded_synapse(
    conversations: Sequence[Conversation], prefix: str, model: str | None = None
) -> AsyncIterator[tuple[Path, Homeserver, list[SeededRoom], MatrixUser, Embedder]]:
    """A work folder, a Synapse seeded with `conversations`, the reader and the product's
    embedder (`model`: the local one; closed on the way out): what the candidate cache
    starts from."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        async with SynapseBench(work / "synapse") as sb:
            rooms, reader = await seed_all(sb.homeserver, conversations)
            log("seeded")
            config = EmbedderConfig() if model is None else EmbedderConfig(model=model)
            embedder = make_embedder(config)  # None: the product's default
            try:
                yield work, sb.homeserver, rooms, reader, embedder
            finally:
                await embedder.close()


def writer_config(
    hs: Homeserver, reader: MatrixUser, store_dir: Path, max_bytes: int, gap_seconds: int
) -> Config:
    doc = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
        "index": {"store": {"path": str(store_dir)}, "collection": "bench_locomo"},
        "chunker": {"max_bytes": max_bytes, "gap_seconds": gap_seconds},
    }
    return parse_config(doc, store_dir.parent)


async def build_index(
    hs: Homeserver,
    reader: MatrixUser,
    store_dir: Path,
    embedder: Embedder,
    *,
    max_bytes: int,
    gap_seconds: int,
) -> tuple[Store, RefreshReport]:
    """One full writer pass into a new embedded store; the store is returned open."""
    cfg = writer_config(hs, reader, store_dir, max_bytes, gap_seconds)
    store = open_store(cfg.index, cfg.base_dir)
    matrix = MatrixReader.from_config(cfg)
    try:
        report = await Writer(cfg, matrix, store, embedder).refresh()
    finally:
        await matrix.close()
    return store, report


async def seed(
    hs: Homeserver, conversations: Sequence[Conversation], db: str
) -> tuple[list[SeededRoom], MatrixUser, float]:
    log(f"synapse ({db}) up at {hs.base_url}; seeding")
    t = time.monotonic()
    rooms, reader = await seed_all(hs, conversations)
    seconds = time.monotonic() - t
    n_turns = sum(len(c.turns) for c in conversations)
    log(f"seeded {n_turns} messages into synapse ({db}) in {seconds:.1f}s")
    return rooms, reader, seconds


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like an exception, so `finally` blocks stop the benchmark's Synapse."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


# ---------------------------------------------------------------- the candidate cache


def _listed(found: Sequence[Any], room: SeededRoom, windows: dict[str, Any]) -> list[Any]:
    for p in found:
        if p.id not in windows:
            windows[p.id] = [
                [room.dia_ids.get(str(m["event_id"]), str(m["event_id"])), m["sender"], m["body"]]
                for m in p.payload["messages"]
            ]
    return [[p.id, p.score] for p in found]


def _dense(
    col: Any,
    vec: Sequence[float],
    flt: PointFilter,
    room: SeededRoom,
    windows: dict[str, Any],
    pair: bool,
) -> dict[str, list[list[Any]]]:
    """The dense list, as the product reads it; a pair embedder's two (`dense`, `dense2`), each
    by its model's own cosine (`ingest.search.retrieve`)."""
    if not pair:
        return {"dense": _listed(col.dense_search(vec, flt, DEPTH), room, windows)}
    out = {}
    for name, part in zip(("dense", "dense2"), parts(vec), strict=True):
        rows = _listed(col.dense_search(part, flt, DEPTH), room, windows)
        out[name] = [[pid, score * PART_SCALE] for pid, score in rows]
    return out


def _quotes(
    points: Mapping[str, Any],
    pids: Iterable[str],
    vec: Sequence[float],
    text: str,
    pair: bool,
    bodies: Mapping[str, Sequence[float]],
    room: SeededRoom,
) -> dict[str, dict[str, list[str]]]:
    now: dict[str, list[str]] = {}
    before: dict[str, list[str]] = {}

    def dia(event_id: str) -> str:
        return str(room.dia_ids.get(event_id, event_id))

    for pid in pids:
        payload = points[pid].payload
        cited = [
            CitedMessage(event_id=m["event_id"], sender=m["sender"], ts=m["ts"], body=m["body"])
            for m in payload["messages"]
        ]
        matched, best = best_of(cited, payload.get("lines"), [text], [vec], pair=pair)
        now[pid] = [dia(e) for e in (matched or (best,))]
        if matched:
            before[pid] = now[pid]
            continue
        words = Terms.of(text).words
        if any(words.intersection(lexical.tokens(str(m["body"]))) for m in cited):
            before[pid] = [dia(best_message(cited, [text]))]
        else:
            near = max(cited, key=lambda m: float(np.dot(vec, bodies[str(m["body"])])))
            before[pid] = [dia(str(near["event_id"]))]
    return {"quotes": now, "quotes_before": before}


def _every_point(col: Any, flt: PointFilter) -> list[Any]:
    return list(col.scroll(flt))


def _nostop(text: str) -> Any:
    return lexical.query_vector(" ".join(content_terms(text)) or text)


async def collect(
    store: Store, embedder: Embedder, rooms: Sequence[SeededRoom]
) -> list[dict[str, Any]]:
    """Every question's deep lists, every listed window, every window's (first_ts, last_ts)."""
    active = store.active()
    assert active is not None
    col = store.open(active, dense_dim=None, create=False)
    assert col.get_meta(COMPAT_KEY) is not None
    out: list[dict[str, Any]] = []
    for room in rooms:
        conv = room.conversation
        vectors = await embedder.embed_queries([q.text for q in conv.questions])
        windows: dict[str, Any] = {}
        flt = PointFilter(room_ids=(room.room_id,))
        points = await asyncio.to_thread(_every_point, col, flt)
        by_id = {p.id: p for p in points}
        pair = is_pair(embedder.identity)
        said = sorted({str(m["body"]) for p in points for m in p.payload["messages"]})
        bodies = dict(zip(said, await embedder.embed_documents(said), strict=True))
        questions = []
        for q, vec in zip(conv.questions, vectors, strict=True):
            listed = {
                **_dense(col, vec, flt, room, windows, pair),
                "lexical": _listed(
                    col.sparse_search(lexical.query_vector(q.text), flt, DEPTH), room, windows
                ),
                "lexical_nostop": _listed(
                    col.sparse_search(_nostop(q.text), flt, DEPTH), room, windows
                ),
            }
            pids = {str(row[0]) for rows in listed.values() for row in rows}
            questions.append(
                {
                    "text": q.text,
                    "category": q.category,
                    "evidence": list(q.evidence),
                    **listed,
                    # the messages each listed window lists: the product's (`quotes.best_of`)
                    # and before issue 47's (the words, else the body nearest at query time)
                    **_quotes(by_id, pids, vec, q.text, pair, bodies, room),
                }
            )
        _listed(points, room, windows)
        spans = {p.id: [p.payload["first_ts"], p.payload["last_ts"]] for p in points}
        out.append(
            {
                "sample_id": conv.sample_id,
                "questions": questions,
                "windows": windows,
                "spans": spans,
            }
        )
    return out


async def collect_candidates(data: Path, out: Path, model: str | None = None) -> None:
    """Seed, index at the product's chunker settings with the local embedder `model`, collect,
    write the cache to `out`."""
    conversations = load(data)
    async with seeded_synapse(conversations, "muninn-cand-", model) as seeded:
        work, hs, rooms, reader, embedder = seeded
        t = time.monotonic()
        store, _report = await build_index(
            hs, reader, work / "qdrant", embedder, max_bytes=MAX_BYTES, gap_seconds=GAP_SECONDS
        )
        log(f"indexed in {time.monotonic() - t:.0f}s")
        try:
            convs = await collect(store, embedder, rooms)
        finally:
            await asyncio.to_thread(store.close)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "data": str(data),
        "max_bytes": MAX_BYTES,
        "gap_seconds": GAP_SECONDS,
        "depth": DEPTH,
        "embedder": dict(embedder.identity.as_record()),
    }
    text = json.dumps({**doc, "conversations": convs}) + "\n"
    await asyncio.to_thread(out.write_text, text, encoding="utf-8")
    log(f"wrote {out}")
