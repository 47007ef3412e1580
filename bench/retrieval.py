"""Retrieval quality, Muninn against Synapse's own search, on a LoCoMo-format file (issue 7.1).

    python -m bench.retrieval --data ../shared/data/locomo-dev/locomo-dev.json \
        [--synapse-db sqlite|postgres] [--proposed] [--out bench/out/retrieval.json]
    python -m bench.retrieval --data … --folds [--candidates-cache FILE] \
        [--transfer ../shared/data/molweni-dev/molweni-dev.json]

Starts a Synapse on loopback (SQLite, in a temporary directory), loads every conversation as
one room (two appservice users named after the speakers, one message a turn, backdated to the
session's time), refreshes it with the real `Writer` (the default embedder, embedded store in the
same temporary directory), then asks every question of categories 1–4 that has evidence:

- `muninn-hybrid`, `muninn-dense`, `muninn-lexical`: `ingest.search.Searcher`, room filter,
  limit 50 (the dense and lexical rows are the same Searcher with the other weight at 0);
- `synapse-sqlite`: `POST /search`, `order_by: rank`, this room, the question as typed;
- `synapse-sqlite-keywords`: the same with the question's three longest content words joined
  by ` or ` (`bench.harness.locomo.keywords`);
- with `--synapse-db postgres`, also `synapse-postgres` and `synapse-postgres-keywords`: a
  second Synapse on PostgreSQL (Debian's server, a throwaway cluster on loopback started by
  `bench.harness.synapse`), seeded with the same conversations at the same times, asked the
  same way.
  PostgreSQL is what most operators run, and its full-text search (`to_tsvector('english')`,
  `ts_rank_cd`) ranks differently from SQLite's FTS4.

Metrics are defined in `bench.harness.locomo`. Nothing is cached across runs, but `--folds`
(leave one conversation out: the command of record) builds its candidate cache once
(`bench.harness.retrieval_setup.collect_candidates`, unless `--candidates-cache` exists) and
replays every lever over it (`bench.loco`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import arguments
from bench.harness.locomo import BUDGETS, HIT_CUTOFFS, Hit, Scores, keywords, load
from bench.harness.retrieval_setup import (
    CANDIDATES,
    DENSE_WEIGHT,
    GAP_SECONDS,
    LEXICAL_WEIGHT,
    MAX_BYTES,
    Settings,
    build_index,
    collect_candidates,
    exit_on_sigterm,
    log,
    seed,
)
from bench.harness.synapse import (
    SYNAPSE_DBS,
    SeededRoom,
    SynapseBench,
    postgres_problem,
    synapse_search,
)
from bot.demo.client import MatrixUser
from ingest.config import EmbedderConfig, default_local_model
from ingest.embed import Embedder, make_embedder
from ingest.search import Searcher, SearchSettings
from ingest.search.hits import Hit as MuninnHit
from ingest.search.query import MAX_LIMIT, SearchQuery
from ingest.store import Store

LIMIT = MAX_LIMIT  # hits asked of every system

# ---------------------------------------------------------------- asking


def muninn_hit(hit: MuninnHit, dia_ids: Mapping[str, str]) -> Hit:
    return Hit(
        tuple(
            (dia_ids.get(str(m["event_id"]), str(m["event_id"])), len(str(m["body"])))
            for m in hit.messages
        )
    )


async def ask_muninn(
    searcher: Searcher, rooms: Sequence[SeededRoom], scores: Scores, by_cat: dict[int, Scores]
) -> list[str]:
    warnings: set[str] = set()
    for room in rooms:
        for q in room.conversation.questions:
            query = SearchQuery.build([q.text], room_ids=[room.room_id], limit=LIMIT)
            result = await searcher.search(query)
            warnings.update(result.warnings)
            hits = [muninn_hit(h, room.dia_ids) for h in result.hits]
            scores.add(hits, q.evidence)
            by_cat.setdefault(q.category, Scores()).add(hits, q.evidence)
    return sorted(warnings)


async def ask_synapse(
    user: MatrixUser,
    rooms: Sequence[SeededRoom],
    scores: Scores,
    by_cat: dict[int, Scores],
    *,
    as_keywords: bool,
) -> int:
    """Score Synapse's answers; returns how many searches it refused (scored as no hits)."""
    refused = 0
    for room in rooms:
        for q in room.conversation.questions:
            term = keywords(q.text) if as_keywords else q.text
            answer = await synapse_search(user, room.room_id, term, LIMIT)
            refused += answer.error is not None
            hits = [Hit(((room.dia_ids.get(e, e), len(body)),)) for e, body in answer.events]
            scores.add(hits, q.evidence)
            by_cat.setdefault(q.category, Scores()).add(hits, q.evidence)
    return refused


def searchers(
    store: Store, embedder: Embedder, server_name: str, s: Settings
) -> dict[str, Searcher]:
    def make(weights: dict[str, float], *, ranker: bool = True) -> Searcher:
        settings = SearchSettings(candidates=s.candidates, weights=weights, ranker=ranker)
        return Searcher(store, embedder, server_name=server_name, settings=settings)

    rows = {
        "muninn-hybrid": make({"dense": s.dense_weight, "lexical": s.lexical_weight}),
        "muninn-dense": make({"dense": 1.0, "lexical": 0.0}),
        "muninn-lexical": make({"dense": 0.0, "lexical": 1.0}),
    }
    if s.proposed:  # the product without its second stage: what the ranker adds
        rows["muninn-hybrid-rrf-only"] = make(
            {"dense": s.dense_weight, "lexical": s.lexical_weight}, ranker=False
        )
    return rows


async def ask_synapse_rows(
    db: str,
    reader: MatrixUser,
    rooms: Sequence[SeededRoom],
    systems: dict[str, Scores],
    categories: dict[str, dict[int, Scores]],
) -> dict[str, int]:
    """The `synapse-DB` (question as typed) and `synapse-DB-keywords` rows; refusals by row."""
    refused: dict[str, int] = {}
    for name, as_kw in ((f"synapse-{db}", False), (f"synapse-{db}-keywords", True)):
        t = time.monotonic()
        systems[name], categories[name] = Scores(), {}
        refused[name] = await ask_synapse(
            reader, rooms, systems[name], categories[name], as_keywords=as_kw
        )
        log(f"{name}: {time.monotonic() - t:.1f}s, {refused[name]} refused")
    return refused


# ---------------------------------------------------------------- report


COLUMNS = [
    *(f"recall@{b}" for b in BUDGETS),
    *(f"recall@{k}" for k in HIT_CUTOFFS),
    "mrr",
    "questions",
]


def table(systems: Mapping[str, Mapping[str, float | int]]) -> str:
    """A Markdown table: one row a system. Budget columns are characters, @k columns hits."""
    heads = ["system", "R@1000ch", "R@2000ch", "R@4000ch", "R@1", "R@5", "R@10", "MRR", "n"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    for name, row in systems.items():
        cells = [name]
        for col in COLUMNS:
            v = row[col]
            cells.append(str(v) if col == "questions" else f"{float(v):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the run


async def run(
    data: Path, out: Path | None, settings: Settings, synapse_db: str = "sqlite"
) -> dict[str, Any]:
    conversations = load(data)
    n_turns = sum(len(c.turns) for c in conversations)
    n_questions = sum(len(c.questions) for c in conversations)
    log(f"{data}: {len(conversations)} conversations, {n_turns} turns, {n_questions} questions")
    started = time.monotonic()
    systems: dict[str, Scores] = {}
    categories: dict[str, dict[int, Scores]] = {}
    refused: dict[str, int] = {}
    seed_seconds: dict[str, float] = {}
    postgres_version: str | None = None
    with tempfile.TemporaryDirectory(prefix="muninn-bench-") as tmp:
        work = Path(tmp)
        async with SynapseBench(work / "synapse") as sb:
            hs = sb.homeserver
            rooms, reader, seed_seconds["sqlite"] = await seed(hs, conversations, "sqlite")
            embedder = make_embedder(EmbedderConfig())
            t = time.monotonic()
            store, report = await build_index(
                hs,
                reader,
                work / "qdrant",
                embedder,
                max_bytes=settings.max_bytes,
                gap_seconds=settings.gap_seconds,
            )
            index_s = time.monotonic() - t
            windows = sum(r.windows_written for r in report.rooms)
            log(f"refreshed: {windows} windows in {index_s:.1f}s ({windows / index_s:.1f}/s)")
            warnings: list[str] = []
            try:
                for name, searcher in searchers(store, embedder, hs.server_name, settings).items():
                    t = time.monotonic()
                    systems[name], categories[name] = Scores(), {}
                    warnings += await ask_muninn(searcher, rooms, systems[name], categories[name])
                    log(f"{name}: {time.monotonic() - t:.1f}s")
            finally:
                await asyncio.to_thread(store.close)
                await embedder.close()
            refused |= await ask_synapse_rows("sqlite", reader, rooms, systems, categories)
        if synapse_db == "postgres":
            async with SynapseBench(work / "synapse-postgres", "postgres") as sb:
                hs = sb.homeserver
                if sb.postgres is not None:
                    postgres_version = await asyncio.to_thread(sb.postgres.version)
                rooms, reader, seed_seconds["postgres"] = await seed(hs, conversations, "postgres")
                refused |= await ask_synapse_rows("postgres", reader, rooms, systems, categories)
    result: dict[str, Any] = {
        "systems": {name: s.as_json() for name, s in systems.items()},
        "settings": settings.as_json(),
        "by_category": {
            name: {str(c): s.as_json() for c, s in sorted(cats.items())}
            for name, cats in categories.items()
        },
        "run": {
            "data": str(data),
            "conversations": len(conversations),
            "messages": n_turns,
            "windows": windows,
            "synapse_db": synapse_db,
            "postgres": postgres_version,
            "seed_seconds": {db: round(sec, 1) for db, sec in seed_seconds.items()},
            "refresh_seconds": round(index_s, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "synapse_refused": refused,
            "muninn_warnings": sorted(set(warnings)),
        },
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(result, indent=2) + "\n"
        await asyncio.to_thread(out.write_text, text, encoding="utf-8")
        log(f"wrote {out}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.retrieval", __doc__)
    p.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    p.add_argument(
        "--synapse-db",
        choices=SYNAPSE_DBS,
        default="sqlite",
        help="postgres: also measure a Synapse on PostgreSQL (Debian's server, started here)",
    )
    p.add_argument("--out", type=Path, help="write the JSON results here")
    p.add_argument("--max-bytes", type=int, default=MAX_BYTES, help="chunker.max_bytes")
    p.add_argument("--gap-seconds", type=int, default=GAP_SECONDS, help="chunker.gap_seconds")
    p.add_argument("--candidates", type=int, default=CANDIDATES, help="Searcher candidates")
    p.add_argument("--dense-weight", type=float, default=DENSE_WEIGHT)
    p.add_argument("--lexical-weight", type=float, default=LEXICAL_WEIGHT)
    p.add_argument(
        "--proposed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the row of the product's own RRF of its lists, without its second stage",
    )
    p.add_argument(
        "--folds",
        action="store_true",
        help="leave one conversation out: collect deep candidate lists, then `bench.loco`",
    )
    p.add_argument(
        "--candidates-cache",
        type=Path,
        default=Path("bench/out/candidates.json"),
        help="--folds: the candidate lists (collected here unless the file exists)",
    )
    p.add_argument(
        "--embedder-model",
        default=default_local_model(),
        help="--folds: the local embedder the candidates are collected with (embedder.model; "
        "default: the product's)",
    )
    p.add_argument(
        "--transfer",
        type=Path,
        help="--folds: another LoCoMo-format file (molweni-dev), each lever scored on it as "
        "fitted on --data alone",
    )
    p.add_argument(
        "--transfer-cache",
        type=Path,
        default=Path("bench/out/candidates-transfer.json"),
        help="--transfer: its candidate lists (collected here unless the file exists)",
    )
    args = p.parse_args(argv)
    if args.synapse_db == "postgres" and (problem := postgres_problem()):
        print(f"--synapse-db postgres: {problem}", file=sys.stderr)
        return 2
    if not args.data.is_file():
        print(f"--data {args.data}: no such file", file=sys.stderr)
        return 2
    # Every field of Settings is the flag of the same name.
    settings = Settings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Settings)})
    exit_on_sigterm()
    if args.folds:
        from bench import loco

        if not args.candidates_cache.is_file():
            asyncio.run(collect_candidates(args.data, args.candidates_cache, args.embedder_model))
        extra = ["--out", str(args.out)] if args.out else []
        if args.transfer is not None:
            if not args.transfer_cache.is_file():
                asyncio.run(
                    collect_candidates(args.transfer, args.transfer_cache, args.embedder_model)
                )
            extra += ["--transfer", str(args.transfer_cache)]
        return loco.main(["--candidates", str(args.candidates_cache), *extra])
    result = asyncio.run(run(args.data, args.out, settings, args.synapse_db))
    print(table(result["systems"]))
    print("\nR@2000ch by category (LoCoMo: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)")
    for name, cats in result["by_category"].items():
        cells = "  ".join(
            f"{c}: {row['recall@2000']:.3f} (n={row['questions']})" for c, row in cats.items()
        )
        print(f"  {name}: {cells}")
    print(f"\nsettings: {json.dumps(result['settings'])}")
    print(f"run: {json.dumps(result['run'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
