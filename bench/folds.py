"""Folds over the room log: the pinboard fold and the transcript scan at 2,048 and 100k events.

    python -m bench.folds [--data ../shared/data/irc-ubuntu] [--sizes 2048,100000] [--out FILE]

Both folds are pure functions over plain records, so this measures them alone (no homeserver):
the per-command cost the bot pays on top of reading the room. Message bodies come from the
Ubuntu IRC logs when `--data` is given (real lengths and vocabulary), else from a fixed
synthetic generator. The pinboard log mixes 1 marker in 20 events (pins, re-pins, unpins).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.output import emit
from bot import pinboard, transcript
from bot.pinboard import Marker, MarkerKind


@dataclass(frozen=True)
class Event:
    event_id: str
    sender: str
    ts: int
    body: str


def _bodies(data: Path | None, n: int) -> list[str]:
    if data is not None:
        from bench.ingest import irc_events

        out = [
            str(e["content"]["body"]) for e in irc_events(data, n) if e["type"] != "m.room.create"
        ]
        if len(out) >= n:
            return out[:n]
        return (out * (n // max(len(out), 1) + 1))[:n]
    rng = random.Random(7)
    words = [
        "the",
        "server",
        "backup",
        "failed",
        "again",
        "after",
        "upgrade",
        "kernel",
        "wifi",
        "driver",
        "sound",
        "grub",
    ]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 20))) for _ in range(n)]


def _time(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - start) * 1000)
    runs.sort()
    return {
        "p50_ms": round(statistics.median(runs), 3),
        "max_ms": round(runs[-1], 3),
        "runs": repeat,
    }


def bench_size(bodies: Sequence[str], n: int, repeat: int) -> dict[str, Any]:
    events = [
        Event(f"$e{i}", f"@u{i % 13}:x", 1_700_000_000_000 + i * 1000, bodies[i]) for i in range(n)
    ]
    newest_first = list(reversed(events))
    rng = random.Random(n)
    markers = []
    for i in range(0, n, 20):
        kind = MarkerKind.UNPIN if rng.random() < 0.2 else MarkerKind.PIN
        target = f"$e{rng.randrange(max(i, 1))}"
        markers.append(Marker(f"$m{i}", "@u1:x", i, kind, target, label="ops", note="n"))
    return {
        "events": n,
        "transcript_literal": _time(
            lambda: transcript.fold(newest_first, texts=["backup failed"], bound=n), repeat
        ),
        "transcript_two_texts": _time(
            lambda: transcript.fold(newest_first, texts=["wifi driver", "grub"], bound=n), repeat
        ),
        "transcript_regex": _time(
            lambda: transcript.fold(
                newest_first, pattern=r"(?i)back\w*\s+fail", bound=n, timeout_s=30.0
            ),
            repeat,
        ),
        "pinboard_fold": {
            "markers": len(markers),
            **_time(lambda: pinboard.fold(markers), repeat),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.folds", description=__doc__)
    p.add_argument("--data", type=Path, help="the irc-ubuntu folder (else synthetic bodies)")
    p.add_argument("--sizes", default="2048,100000", help="comma-separated event counts")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    bodies = _bodies(args.data, max(sizes))
    results = {"sizes": [bench_size(bodies, n, args.repeat) for n in sizes]}
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
