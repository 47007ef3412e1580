"""Deep candidate lists of every LoCoMo question, collected once and cached for offline replay.

    python -m bench.candidates --data ../shared/data/locomo-dev/locomo-dev.json \
        --out bench/out/candidates.json

Seeds Synapse, builds one index with the real `Writer` at the product's chunker settings, and
for every question fetches the dense and lexical lists (the question as typed, and without its
stop words) `DEPTH` deep with their scores, plus every listed window's messages. Fusion, the
second-stage ranker and the relevance floor are then replayed in numpy (`bench.folds_eval`),
so a lever costs seconds instead of an embedding run. A list of N candidates is the first N of
the deep list: the store ranks deterministically.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.dense_text import DENSE_TEXTS, add_flag
from bench.locomo import load
from bench.retrieval import (
    GAP_SECONDS,
    MAX_BYTES,
    build_index,
    exit_on_sigterm,
    log,
    seeded_synapse,
)
from bench.synapse_run import SeededRoom
from ingest import lexical
from ingest.chunker import DENSE_LINE, LineFormat
from ingest.embed import Embedder
from ingest.rank import content_terms
from ingest.records import COMPAT_KEY
from ingest.store import PointFilter, Store

DEPTH = 100


def _listed(found: Sequence[Any], room: SeededRoom, windows: dict[str, Any]) -> list[Any]:
    for p in found:
        if p.id not in windows:
            windows[p.id] = [
                [room.dia_ids.get(str(m["event_id"]), str(m["event_id"])), m["sender"], m["body"]]
                for m in p.payload["messages"]
            ]
    return [[p.id, p.score] for p in found]


async def collect(
    store: Store, embedder: Embedder, rooms: Sequence[SeededRoom]
) -> list[dict[str, Any]]:
    active = store.active()
    assert active is not None
    col = store.open(active, dense_dim=None, create=False)
    assert col.get_meta(COMPAT_KEY) is not None
    out: list[dict[str, Any]] = []
    for room in rooms:
        conv = room.conversation
        texts = [q.text for q in conv.questions]
        vectors = await embedder.embed_queries(texts)
        windows: dict[str, Any] = {}
        questions = []
        flt = PointFilter(room_ids=(room.room_id,))
        for q, vec in zip(conv.questions, vectors, strict=True):
            nostop = lexical.query_vector(" ".join(content_terms(q.text)) or q.text)
            questions.append(
                {
                    "text": q.text,
                    "category": q.category,
                    "evidence": list(q.evidence),
                    "dense": _listed(col.dense_search(vec, flt, DEPTH), room, windows),
                    "lexical": _listed(
                        col.sparse_search(lexical.query_vector(q.text), flt, DEPTH), room, windows
                    ),
                    "lexical_nostop": _listed(
                        col.sparse_search(nostop, flt, DEPTH), room, windows
                    ),
                }
            )
        out.append({"sample_id": conv.sample_id, "questions": questions, "windows": windows})
    return out


async def main_async(data: Path, out: Path, dense_line: LineFormat = DENSE_LINE) -> None:
    conversations = load(data)
    async with seeded_synapse(conversations, "muninn-cand-") as seeded:
        work, hs, rooms, reader, embedder = seeded
        t = time.monotonic()
        store, _report = await build_index(
            hs,
            reader,
            work / "qdrant",
            embedder,
            max_bytes=MAX_BYTES,
            gap_seconds=GAP_SECONDS,
            dense_line=dense_line,
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
        "dense_line": dataclasses.asdict(dense_line),
    }
    text = json.dumps({**doc, "conversations": convs}) + "\n"
    await asyncio.to_thread(out.write_text, text, encoding="utf-8")
    log(f"wrote {out}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.candidates", description=__doc__)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, default=Path("bench/out/candidates.json"))
    add_flag(p)
    args = p.parse_args(argv)
    exit_on_sigterm()
    asyncio.run(main_async(args.data, args.out, DENSE_TEXTS[args.dense_text]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
