"""Embedding speed of the bundled embedders on real windows, at 1 and 2 threads, in one run.

    python -m bench.embedders [--data ../shared/data/locomo-dev] [--windows 500] [--out FILE]

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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import emit
from ingest.config import ChunkerConfig, EmbedderConfig
from ingest.embed import make_embedder

MODELS = ("minilm", "multilingual-e5-small")
WARM = 32


def windows(data: Path, n: int, max_bytes: int = ChunkerConfig().max_bytes) -> list[str]:
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
    embedder = make_embedder(EmbedderConfig(model=model))
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
    return asyncio.run(_measure(model, windows(data, n)))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/locomo-dev"))
    ap.add_argument("--windows", type=int, default=500)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "THREADS"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child[0], int(args.child[1]), args.data, args.windows)))
        return 0
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for model in args.models.split(","):
            cmd = [sys.executable, "-m", "bench.embedders", "--data", str(args.data)]
            cmd += ["--windows", str(args.windows), "--child", model, str(threads)]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    emit({"rows": rows, "loadavg_after": load}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
