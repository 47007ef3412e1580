"""`bench.retrieval`'s setup, shared with `bench.candidates` and `bench.tune`: the recommended
settings, a Synapse seeded with the conversations, one full writer pass into a new store, and
the checks and signal handling done before minutes of seeding."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.locomo import Conversation
from bench.postgres import PostgresError, find_bindir
from bench.synapse_run import SeededRoom, SynapseBench, seed_conversation
from ingest.chunker import DENSE_LINE, LineFormat
from ingest.config import Config, EmbedderConfig, parse_config
from ingest.embed import Embedder, make_embedder
from ingest.matrix import MatrixReader
from ingest.refresh import Writer
from ingest.reports import RefreshReport
from ingest.search import CANDIDATES as SEARCH_CANDIDATES
from ingest.store import Store, open_store
from tests.homeserver import Homeserver, MatrixUser

# The settings this benchmark recommends (see bench/RESULTS.md); flags override them.
MAX_BYTES = 350
GAP_SECONDS = 1800
CANDIDATES = SEARCH_CANDIDATES
DENSE_WEIGHT = 1.0
LEXICAL_WEIGHT = 1.0


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
    conversations: Sequence[Conversation], prefix: str, model: str = "minilm"
) -> AsyncIterator[tuple[Path, Homeserver, list[SeededRoom], MatrixUser, Embedder]]:
    """A work folder, a Synapse seeded with `conversations`, the reader and the product's
    embedder (`model`: the local one; closed on the way out): what `candidates` and `tune`
    start from."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        async with SynapseBench(work / "synapse") as sb:
            rooms, reader = await seed_all(sb.homeserver, conversations)
            log("seeded")
            embedder = make_embedder(EmbedderConfig(model=model))
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
    dense_line: LineFormat = DENSE_LINE,
) -> tuple[Store, RefreshReport]:
    """One full writer pass into a new embedded store; the store is returned open."""
    cfg = writer_config(hs, reader, store_dir, max_bytes, gap_seconds)
    store = open_store(cfg.index, cfg.base_dir)
    matrix = MatrixReader.from_config(cfg)
    try:
        report = await Writer(cfg, matrix, store, embedder, dense_line=dense_line).refresh()
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


def postgres_problem() -> str | None:
    """Why `--synapse-db postgres` cannot run here (checked before minutes of seeding)."""
    try:
        find_bindir()
    except PostgresError as e:
        return str(e)
    if importlib.util.find_spec("psycopg2") is None:  # Synapse's driver, in this interpreter
        return "Synapse on PostgreSQL needs psycopg2: pip install -e '.[bench]'"
    return None


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like an exception, so `finally` blocks stop the benchmark's Synapse."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
