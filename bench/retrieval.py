"""Retrieval quality, Muninn against Synapse's own search, on a LoCoMo-format file (issue 7.1).

    python -m bench.retrieval --data ../shared/data/locomo-dev/locomo-dev.json \
        [--synapse-db sqlite|postgres] [--out bench/out/retrieval.json]

Starts a Synapse on loopback (SQLite, in a temporary directory), loads every conversation as
one room (two appservice users named after the speakers, one message a turn, backdated to the
session's time), refreshes it with the real `Writer` (MiniLM int8, embedded store in the same
temporary directory), then asks every question of categories 1–4 that has evidence:

- `muninn-hybrid`, `muninn-dense`, `muninn-lexical`: `ingest.search.Searcher`, room filter,
  limit 50 (the dense and lexical rows are the same Searcher with the other weight at 0);
- `synapse-sqlite`: `POST /search`, `order_by: rank`, this room, the question as typed;
- `synapse-sqlite-keywords`: the same with the §9 keyword row (the three longest content
  words joined by ` or `);
- with `--synapse-db postgres`, also `synapse-postgres` and `synapse-postgres-keywords`: a
  second Synapse on PostgreSQL (Debian's server, a throwaway cluster on loopback started by
  `bench.postgres`), seeded with the same conversations at the same times, asked the same way.
  PostgreSQL is what most operators run, and its full-text search (`to_tsvector('english')`,
  `ts_rank_cd`) ranks differently from SQLite's FTS4.

Metrics are defined in `bench.locomo`. Nothing is cached across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.dense_text import DENSE_TEXTS, add_flag
from bench.locomo import Scores, load
from bench.retrieval_ask import ask_muninn, ask_synapse_rows, searchers, table
from bench.retrieval_setup import (
    CANDIDATES,
    DENSE_WEIGHT,
    GAP_SECONDS,
    LEXICAL_WEIGHT,
    MAX_BYTES,
    Settings,
    build_index,
    exit_on_sigterm,
    log,
    postgres_problem,
    seed,
)
from bench.synapse_run import SYNAPSE_DBS, SynapseBench
from ingest.config import EmbedderConfig
from ingest.embed import make_embedder


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
    p = argparse.ArgumentParser(
        prog="python -m bench.retrieval", description=__doc__.split("\n")[0]
    )
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
        "--proposed", action="store_true", help="add a row: the product without its ranker"
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
        default="minilm",
        help="--folds: the local embedder the candidates are collected with (embedder.model)",
    )
    p.add_argument(
        "--no-message-vectors",
        action="store_true",
        help="--folds: collect no message or window vectors (the product's levers need none)",
    )
    add_flag(p)
    args = p.parse_args(argv)
    if args.synapse_db == "postgres" and (problem := postgres_problem()):
        print(f"--synapse-db postgres: {problem}", file=sys.stderr)
        return 2
    if not args.data.is_file():
        print(f"--data {args.data}: no such file", file=sys.stderr)
        return 2
    settings = Settings(
        max_bytes=args.max_bytes,
        gap_seconds=args.gap_seconds,
        candidates=args.candidates,
        dense_weight=args.dense_weight,
        lexical_weight=args.lexical_weight,
        proposed=args.proposed,
    )
    exit_on_sigterm()
    if args.folds:
        from bench import candidates, loco

        if not args.candidates_cache.is_file():
            dense_line = DENSE_TEXTS[args.dense_text]
            asyncio.run(
                candidates.main_async(
                    args.data,
                    args.candidates_cache,
                    dense_line,
                    args.embedder_model,
                    not args.no_message_vectors,
                )
            )
        extra = ["--out", str(args.out)] if args.out else []
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
