"""Deep candidate lists of every LoCoMo question, collected once and cached for offline replay.

    python -m bench.candidates --data ../shared/data/locomo-dev/locomo-dev.json \
        --out bench/out/candidates.json

Seeds Synapse, builds one index with the real `Writer` at the product's chunker settings, and
for every question fetches the dense and lexical lists (the question as typed, and without its
stop words) `DEPTH` deep with their scores, plus every window's messages. Fusion, the
second-stage ranker and the relevance floor are then replayed in numpy (`bench.loco`), so a
lever costs seconds instead of an embedding run. A list of N candidates is the first N of the
deep list: the store ranks deterministically.

For the levers that need more than the store holds, it also keeps: every question's query
vector; the texts `bench.split` cuts a question into, each with its own dense and lexical
lists; every message's own vector (its line of the embedded window text, as per-message
vectors would embed it); every window's own vector (its embedded text, as the store holds it:
pseudo-relevance feedback, `bench.loco_prf`); every window's first and last timestamp; and
what embedding the messages costs against embedding the windows (`cost`: seconds, back to
back, same embedder).
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
from bench.retrieval_setup import (
    GAP_SECONDS,
    MAX_BYTES,
    build_index,
    exit_on_sigterm,
    log,
    seeded_synapse,
)
from bench.split import split
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


def _rounded(vector: Sequence[float]) -> list[float]:
    return [round(float(x), 5) for x in vector]


async def _messages(
    col: Any,
    embedder: Embedder,
    room: SeededRoom,
    flt: PointFilter,
    windows: dict[str, Any],
    vectors_too: bool = True,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, float]]:
    """Every window of the room (added to `windows`), its time span, every message's vector,
    every window's vector (its embedded text, as the store holds it), and the seconds embedding
    the windows' texts and the messages' lines took, back to back (without `vectors_too`, only
    the windows and spans: the product's levers need no more)."""
    points = await asyncio.to_thread(lambda: list(col.scroll(flt)))
    _listed(points, room, windows)
    span = {p.id: [p.payload["first_ts"], p.payload["last_ts"]] for p in points}
    if not vectors_too:
        return span, {}, {}, {}
    texts = [str(p.payload["text"]) for p in points]
    dias, lines = [], []
    for p in points:
        text_lines = str(p.payload["text"]).split("\n")
        for i, m in enumerate(p.payload["messages"]):
            dias.append(room.dia_ids.get(str(m["event_id"]), str(m["event_id"])))
            lines.append(text_lines[i] if i < len(text_lines) else str(m["body"]))
    t0 = time.monotonic()
    window_vectors = await embedder.embed_documents(texts)
    t1 = time.monotonic()
    vectors = await embedder.embed_documents(lines)
    t2 = time.monotonic()
    cost = {
        "windows": len(texts),
        "window_s": t1 - t0,
        "messages": len(lines),
        "message_s": t2 - t1,
    }
    by_window = {p.id: _rounded(v) for p, v in zip(points, window_vectors, strict=True)}
    by_message = {d: _rounded(v) for d, v in zip(dias, vectors, strict=True)}
    return span, by_message, by_window, cost


async def collect(
    store: Store, embedder: Embedder, rooms: Sequence[SeededRoom], vectors_too: bool = True
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
            parts = split(q.text)
            parts = parts if len(parts) > 1 else []
            part_vectors = await embedder.embed_queries(parts) if parts else []
            questions.append(
                {
                    "text": q.text,
                    "category": q.category,
                    "evidence": list(q.evidence),
                    "vector": _rounded(vec),
                    "dense": _listed(col.dense_search(vec, flt, DEPTH), room, windows),
                    "lexical": _listed(
                        col.sparse_search(lexical.query_vector(q.text), flt, DEPTH), room, windows
                    ),
                    "lexical_nostop": _listed(
                        col.sparse_search(_nostop(q.text), flt, DEPTH), room, windows
                    ),
                    "parts": [
                        {
                            "text": part,
                            "vector": _rounded(pv),
                            "dense": _listed(col.dense_search(pv, flt, DEPTH), room, windows),
                            "lexical_nostop": _listed(
                                col.sparse_search(_nostop(part), flt, DEPTH), room, windows
                            ),
                        }
                        for part, pv in zip(parts, part_vectors, strict=True)
                    ],
                }
            )
        span, message_vectors, window_vectors, cost = await _messages(
            col, embedder, room, flt, windows, vectors_too
        )
        out.append(
            {
                "sample_id": conv.sample_id,
                "questions": questions,
                "windows": windows,
                "spans": span,
                "message_vectors": message_vectors,
                "window_vectors": window_vectors,
                "cost": cost,
            }
        )
    return out


def _nostop(text: str) -> Any:
    return lexical.query_vector(" ".join(content_terms(text)) or text)


async def main_async(
    data: Path,
    out: Path,
    dense_line: LineFormat = DENSE_LINE,
    model: str = "minilm",
    vectors_too: bool = True,
) -> None:
    """`model`: the local embedder (`embedder.model`); `vectors_too`: as for `collect`."""
    conversations = load(data)
    async with seeded_synapse(conversations, "muninn-cand-", model) as seeded:
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
            convs = await collect(store, embedder, rooms, vectors_too)
        finally:
            await asyncio.to_thread(store.close)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "data": str(data),
        "max_bytes": MAX_BYTES,
        "gap_seconds": GAP_SECONDS,
        "depth": DEPTH,
        "dense_line": dataclasses.asdict(dense_line),
        "embedder": dict(embedder.identity.as_record()),
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
