"""Muninn's benchmarks (`python -m bench.NAME`; figures and commands in `bench/RESULTS.md`).

What every benchmark reports with: one JSON document on stdout (and in `--out`), nearest-rank
percentiles, this process's memory lines and the machine it ran on; and the product's config
for a benchmark that needs no homeserver. Every benchmark measures the product as shipped: its
embedder is the default one (`embedder_option`) unless `--embedder-model` names another.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ingest.config import Config, default_local_model, parse_config

SERVER_NAME = "bench.local"


def arguments(module: str, doc: str | None) -> argparse.ArgumentParser:
    """`python -m MODULE`'s parser, its help the module's docstring as written."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def embedder_option(p: argparse.ArgumentParser, more: str = "") -> None:
    """`--embedder-model`: `embedder.model` (kind: local), the product's default unless given;
    `more` adds to its help what else this benchmark accepts."""
    p.add_argument(
        "--embedder-model",
        default=default_local_model(),
        help=f"embedder.model (kind: local), default the product's: %(default)s{more}",
    )


def emit(results: Any, out: Path | None) -> None:
    print(json.dumps(results, indent=2))
    save(results, out)


def save(results: Any, out: Path | None) -> None:
    """The JSON document in `out` only (a benchmark that prints tables instead)."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")


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


def vm(key: str) -> float:
    """A memory line of /proc/self/status (VmRSS, VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


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


def offline_config(store_dir: Path, collection: str = "bench", **sections: Any) -> Config:
    """The product's defaults, an embedded store in `store_dir`, and no homeserver to reach
    (an import, the store alone); `sections` override whole keys of the document."""
    doc: dict[str, Any] = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": SERVER_NAME},
        "reader": {"user_id": f"@muninn:{SERVER_NAME}", "access_token": "bench-not-used"},
        "index": {"store": {"path": str(store_dir)}, "collection": collection},
        **sections,
    }
    return parse_config(doc, store_dir.parent)
