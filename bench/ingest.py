"""Ingest rate: IRC logs through `muninn import`, against the raw embedder on the same texts.

    python -m bench.ingest --data ../shared/data/irc-ubuntu [--messages 100000]
        [--embedder-model minilm|multilingual-e5-small|e5-native] [--out FILE]

The Ubuntu IRC logs become one room's JSONL export (`bench.harness.irc`), which goes through the
real writer (`ExportReader` → `Writer`: scope, normalisation, scrub, windows, embedding by the
default embedder unless `--embedder-model` names another, the embedded store); then the very
window texts the writer embedded are embedded again alone, so the ratio of the two rates says
how much of the ingest time is the embedder's. Points written are reported, and memory: RSS
after the model loads, after the first page's windows are embedded, at the end of the ingest,
the ingest's peak, and the process's peak (which includes closing the store — its compaction —
and the raw re-embedding); then the time the close took.
`--synapse-read N` also seeds an N-event room into a real Synapse and times the reader's walk.
`--idle-seconds N` then measures an idle service's memory on the index built
(`bench.harness.probes`, a fresh process).

The embedders' own speed, on real windows, at 1 and 2 threads, in one run:

    python -m bench.ingest --embedder-speed ../shared/data/locomo-dev [--windows 500]
        [--threads 1,2] [--models minilm,multilingual-e5-small,e5-native] [--out FILE]

Windows are the LoCoMo dialogues cut as the chunker cuts (one `Speaker: text` line a message,
up to `chunker.max_bytes`, 350). Each (model, threads) runs in a fresh process pinned to that
many cores (both engines size their thread pools from the affinity at load), warmed on the
first 32 windows; windows/s is over the rest, embedded as the writer does (`embed_documents`,
its batches). Peak RSS is the process's (`ru_maxrss`), model loaded and run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import arguments, embedder_option, emit, offline_config, vm
from bench.harness.embedders import NATIVE, HashingEmbedder, Recording, embedder_for
from bench.harness.irc import irc_events
from bench.harness.synapse import SynapseBench
from ingest.config import ChunkerConfig, Config, default_local_model
from ingest.embed import Embedder
from ingest.embed.minilm import MAX_BATCH_TOKENS
from ingest.index.refresh import Writer
from ingest.matrix.export import ExportReader
from ingest.store import open_store
from ingest.store.space import allocated_bytes


async def run_import(
    data: Path,
    messages: int,
    max_bytes: int,
    batch: int,
    writer_only: bool = False,
    raw: bool = True,
    idle_seconds: float = 0.0,
    model: str | None = None,
) -> dict[str, Any]:
    model = model or default_local_model()
    with tempfile.TemporaryDirectory(prefix="muninn-bench-ingest-") as tmp:
        workdir = Path(tmp)
        export = workdir / "irc.jsonl"
        with export.open("w") as f:
            n = 0
            for event in irc_events(data, messages):
                f.write(json.dumps(event) + "\n")
                n += event["type"] == "m.room.message"
        export_size = export.stat().st_size
        # The config names the model too: the idle probe (`_idle`) serves the index with it.
        named: dict[str, Any] = {} if model == NATIVE else {"embedder": {"model": model}}
        cfg = offline_config(
            workdir / "qdrant",
            chunker={"max_bytes": max_bytes},
            refresh={"page_size": 500},
            **named,
        )
        # The product's batch and idle unload, as `muninn import` makes it.
        inner: Embedder = HashingEmbedder() if writer_only else embedder_for(model, batch)
        embedder = Recording(inner, keep=raw)
        rss_before_export = vm("VmRSS")
        source = ExportReader.from_file(export, user_id="@muninn:bench.local")
        export_mib = round(vm("VmRSS") - rss_before_export, 1)  # what the reader holds
        store = open_store(cfg.index, cfg.base_dir)
        writer = Writer(cfg, source, store, embedder)
        await embedder.probe()  # model load is not ingest time
        rss_loaded = vm("VmRSS")
        start = time.perf_counter()
        report = await writer.refresh(only=[source.room_id])
        elapsed = time.perf_counter() - start - embedder.overhead
        col = await writer.open()
        points = await asyncio.to_thread(col.count)
        rss_end, peak_ingest = vm("VmRSS"), vm("VmHWM")
        # `muninn import`'s order: the embedder closes (unloading the model), then the store
        # (compacting the generation for the next process, bench/RESULTS.md §10).
        closing = time.perf_counter()
        await embedder.close()
        store.close()
        close_seconds = time.perf_counter() - closing
        rss_closed, hwm_closed = vm("VmRSS"), vm("VmHWM")
        store_bytes = allocated_bytes(workdir / "qdrant")  # compacted, as the next process maps it
        idle = await _idle(cfg, idle_seconds) if idle_seconds else None
        # The same texts, embedded alone, in the same batch size: the embedder's own limit.
        raw_start = time.perf_counter()
        for i in range(0, len(embedder.texts), batch) if raw else ():
            await embedder.inner.embed_documents(embedder.texts[i : i + batch])
        raw_elapsed = time.perf_counter() - raw_start if raw else 0.0
    room = report.rooms[0]
    texts = embedder.count
    return {
        "messages": n,
        "indexed": room.indexed,
        "skipped": dict(room.skipped),
        "points": points,
        "windows_embedded": texts,
        "embedded_bytes_per_window": round(embedder.bytes / texts, 1),
        "embedded_minilm_tokens_per_window": (
            round(embedder.tokens / texts, 1) if embedder.minilm_tokens else None
        ),
        "seconds": round(elapsed, 2),
        "messages_per_second": round(n / elapsed, 1),
        "embed_seconds_in_ingest": round(embedder.seconds, 2),
        "raw_embed_seconds": round(raw_elapsed, 2) if raw else None,
        "raw_windows_per_second": round(texts / raw_elapsed, 1) if raw_elapsed else None,
        "ingest_windows_per_second": round(texts / elapsed, 1),
        "embedder_share_of_ingest": round(embedder.seconds / elapsed, 3),
        "export_file_mib": round(export_size / 2**20, 1),
        "rss_of_export_reader_mib": export_mib,
        "rss_after_model_load_mib": rss_loaded,
        "rss_after_first_page_mib": embedder.rss_after_first,
        "rss_at_end_mib": rss_end,
        "peak_rss_ingest_mib": peak_ingest,
        "close_seconds": round(close_seconds, 2),
        "rss_after_close_mib": rss_closed,
        "peak_rss_after_close_mib": hwm_closed,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "store_mib": round(store_bytes / 2**20, 1),
        "store_bytes_per_message": round(store_bytes / max(room.indexed, 1)),
        "max_bytes": max_bytes,
        "batch_size": batch,
        "max_batch_tokens": MAX_BATCH_TOKENS,
        "embedder": "sha256-hash (writer only, not a model)" if writer_only else model,
        "embedder_identity": embedder.identity.model,
        "idle": idle,
    }


async def _idle(cfg: Config, seconds: float) -> dict[str, Any]:
    """`bench.harness.probes` on the index just built, in a fresh process (this one's heap is
    not its)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.harness.probes",
        "--store",
        str(cfg.index.store.path),
        "--collection",
        cfg.index.collection,
        "--seconds",
        str(seconds),
        "--embedder-model",
        cfg.embedder.model,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"bench.harness.probes failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


async def synapse_read(count: int, page_size: int) -> dict[str, Any]:
    """Seed a `count`-event room into a real Synapse and time the reader's forward walk."""
    from ingest.matrix import MatrixReader

    with tempfile.TemporaryDirectory(prefix="muninn-bench-read-") as tmp:
        async with SynapseBench(Path(tmp)) as sb:
            hs = sb.homeserver
            owner = await hs.register()
            room = await hs.fresh_room(owner)
            seed_start = time.perf_counter()
            for i in range(count):
                await owner.send_text(room, f"message {i}: the quick brown fox {i % 97}")
            seed_elapsed = time.perf_counter() - seed_start
            reader = MatrixReader(hs.base_url, owner.access_token, owner.user_id)
            start = time.perf_counter()
            seen = 0
            async for page in reader.walk(room, None, page_size):
                seen += len(page.events)
            elapsed = time.perf_counter() - start
            await reader.close()
    return {
        "events": seen,
        "page_size": page_size,
        "seconds": round(elapsed, 2),
        "events_per_second": round(seen / elapsed, 1),
        "seed_messages_per_second": round(count / seed_elapsed, 1),
    }


MODELS = ("minilm", "multilingual-e5-small", NATIVE)
WARM = 32


def speed_windows(data: Path, n: int, max_bytes: int = ChunkerConfig().max_bytes) -> list[str]:
    """The first `n` windows of the dataset's dialogues, cut at `max_bytes` of UTF-8."""
    convs = json.loads((data / "locomo-dev.json").read_text("utf-8"))
    out: list[str] = []
    for conv in convs:
        c = conv["conversation"]
        for key in sorted(
            (k for k in c if k.startswith("session_") and k[8:].isdigit()),
            key=lambda k: int(k[8:]),
        ):
            lines: list[str] = []
            for turn in c[key]:
                line = f"{turn['speaker']}: {turn['text']}"
                if lines and len("\n".join([*lines, line]).encode()) > max_bytes:
                    out.append("\n".join(lines))
                    lines = []
                lines.append(line)
            if lines:
                out.append("\n".join(lines))
            if len(out) >= n + WARM:
                return out[: n + WARM]
    return out


async def _measure(model: str, texts: Sequence[str]) -> dict[str, Any]:
    embedder = embedder_for(model)
    try:
        await embedder.embed_documents(texts[:WARM])
        start = time.perf_counter()
        await embedder.embed_documents(texts[WARM:])
        seconds = time.perf_counter() - start
    finally:
        await embedder.close()
    n = len(texts) - WARM
    return {
        "model": model,
        "threads": len(os.sched_getaffinity(0)),
        "windows": n,
        "seconds": round(seconds, 2),
        "windows_per_s": round(n / seconds, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _child(model: str, threads: int, data: Path, n: int) -> dict[str, Any]:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
    return asyncio.run(_measure(model, speed_windows(data, n)))


def embedder_speed(args: Any) -> dict[str, Any]:
    """Every (threads, model) in a fresh child process of this module, one run."""
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for model in args.models.split(","):
            cmd = [
                sys.executable,
                "-m",
                "bench.ingest",
                "--embedder-speed",
                str(args.embedder_speed),
            ]
            cmd += ["--windows", str(args.windows), "--speed-child", model, str(threads)]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    return {"rows": rows, "loadavg_after": load}


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.ingest", __doc__)
    p.add_argument("--data", type=Path, help="the irc-ubuntu folder (the import's corpus)")
    p.add_argument("--messages", type=int, default=20_000, help="messages to replay")
    p.add_argument("--max-bytes", type=int, default=350, help="chunker.max_bytes")
    p.add_argument("--batch", type=int, default=32, help="embedder batch size")
    p.add_argument("--synapse-read", type=int, default=0, help="also time a walk of N events")
    p.add_argument(
        "--writer-only",
        action="store_true",
        help="hash vectors instead of the model: the writer's own rate and memory at scale",
    )
    p.add_argument("--no-raw", action="store_true", help="skip embedding the texts again alone")
    p.add_argument(
        "--idle-seconds",
        type=float,
        default=0.0,
        help="then measure an idle service on the index built (`bench.harness.probes`), this long",
    )
    embedder_option(p, f", or {NATIVE}")
    p.add_argument(
        "--embedder-speed", type=Path, metavar="LOCOMO", help="the embedders' windows/s instead"
    )
    p.add_argument("--windows", type=int, default=500, help="--embedder-speed: windows timed")
    p.add_argument("--threads", default="1,2", help="--embedder-speed: thread counts")
    p.add_argument("--models", default=",".join(MODELS), help="--embedder-speed: models")
    p.add_argument("--speed-child", nargs=2, metavar=("MODEL", "THREADS"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="write the JSON results here")
    args = p.parse_args(argv)
    if args.speed_child:
        model, threads = args.speed_child[0], int(args.speed_child[1])
        print(json.dumps(_child(model, threads, args.embedder_speed, args.windows)))
        return 0
    if args.embedder_speed:
        emit(embedder_speed(args), args.out)
        return 0
    if args.data is None:
        p.error("--data (the irc-ubuntu folder) is needed, or --embedder-speed LOCOMO")
    results: dict[str, Any] = {
        "import": asyncio.run(
            run_import(
                args.data,
                args.messages,
                args.max_bytes,
                args.batch,
                args.writer_only,
                not args.no_raw,
                args.idle_seconds,
                args.embedder_model,
            )
        )
    }
    if args.synapse_read:
        results["synapse_read"] = asyncio.run(synapse_read(args.synapse_read, 500))
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
