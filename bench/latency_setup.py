"""What `bench.latency` and `bench.load` measure on: the IRC data, queries, percentiles, the
sampled embedder for sizes past the model's reach, the product's config and the machine."""

from __future__ import annotations

import copy
import hashlib
import math
import random
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.ingest import irc_events
from ingest.config import Config, parse_config
from ingest.embed import DelegatingEmbedder, Embedder

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


def bench_config(workdir: Path) -> Config:
    """The product's defaults (chunker, refresh), an embedded store in `workdir`."""
    return parse_config(
        {
            "homeserver": {"url": "http://127.0.0.1:1", "server_name": SERVER_NAME},
            "reader": {"user_id": "@muninn:bench.local", "access_token": "bench-not-used"},
            "index": {"store": {"path": str(workdir / "qdrant")}, "collection": "bench"},
        },
        workdir,
    )


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
