"""Folds over the room log: the pinboard fold and the transcript scan at 2,048 and 100k events,
and how long one `!search` over large messages holds the event loop.

    python -m bench.folds [--data ../shared/data/irc-ubuntu] [--sizes 2048,100000] [--out FILE]
    python -m bench.folds --stall [--events 2048] [--chars 16000] [--on-loop]

Both folds are pure functions over plain records, so this measures them alone (no homeserver):
the per-command cost the bot pays on top of reading the room. Message bodies come from the
Ubuntu IRC logs when `--data` is given (real lengths and vocabulary), else from a fixed
synthetic generator. The pinboard log mixes 1 marker in 20 events (pins, re-pins, unpins).

`--stall` (issue 11, item 4) builds a room log of `--events` messages of about `--chars`
characters each, bounds it as the bot's read does (`ingest.search.logs.recent.within_text`),
and runs the transcript fold the way the bot does (in a thread) while a 1 ms ticker runs on the
loop. It
prints the events folded, the fold's wall time (the first fold, uncached scrub) and the longest
gap between two ticks: how long appservice transactions, `/healthz` and other rooms would have
waited. `--on-loop` folds the whole unbounded log on the loop instead, as before the fix.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import arguments, emit
from bench.harness.irc import irc_events
from bot.chat import pinboard
from bot.chat.commands.patterns import compile_pattern
from bot.chat.pinboard import Marker, MarkerKind
from ingest.matrix import ClientEvent
from ingest.search.logs import transcript
from ingest.search.logs.recent import within_text
from ingest.search.logs.request import LogQuery, RoomLogs, RoomView
from ingest.search.logs.roomlog import RoomLog
from ingest.search.logs.roomlogs import log_finds
from ingest.types import RoomID


@dataclass(frozen=True)
class Event:
    event_id: str
    sender: str
    ts: int
    body: str
    msgtype: str = "m.text"


def _bodies(data: Path | None, n: int) -> list[str]:
    if data is not None:
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
                newest_first,
                pattern=compile_pattern(r"(?i)back\w*\s+fail"),  # compiled in the timing
                bound=n,
                timeout_s=30.0,
            ),
            repeat,
        ),
        "pinboard_fold": {
            "markers": len(markers),
            **_time(lambda: pinboard.fold(markers), repeat),
        },
    }


# ---------------------------------------------------------------- the event loop's stall


_WORDS = ["deploy", "server", "backup", "kernel", "lunch", "the", "a", "upgrade", "wifi"]


def _log(events: int, chars: int) -> list[ClientEvent]:
    rng = random.Random(1)
    words = chars // 6
    return [
        {
            "type": "m.room.message",
            "event_id": f"$e{i}",
            "sender": "@a:x",
            "origin_server_ts": i,
            "room_id": "!r",
            "content": {
                "msgtype": "m.text",
                "body": f"msg {i} " + " ".join(rng.choice(_WORDS) for _ in range(words)),
            },
        }
        for i in range(events)
    ]


async def _measure(raw: list[ClientEvent], on_loop: bool) -> tuple[int, float, float]:
    kept, cut = (raw, False) if on_loop else within_text(raw)
    view = RoomView(RoomLog(RoomID("!r"), kept, len(raw), cut), None)
    logs = RoomLogs(LogQuery(("kernel upgrade",), limit=5), [view], "@bot:x", "!")
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    if on_loop:
        log_finds(logs, [], [], 15)
    else:
        await asyncio.to_thread(log_finds, logs, [], [], 15)
    took = time.perf_counter() - started
    done.set()
    await ticker
    return len(kept), took, max(gaps)


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.folds", __doc__)
    p.add_argument("--data", type=Path, help="the irc-ubuntu folder (else synthetic bodies)")
    p.add_argument("--sizes", default="2048,100000", help="comma-separated event counts")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", type=Path)
    p.add_argument("--stall", action="store_true", help="the event loop's stall instead")
    p.add_argument("--events", type=int, default=2048, help="--stall: messages in the log")
    p.add_argument("--chars", type=int, default=16_000, help="--stall: characters a message")
    p.add_argument("--on-loop", action="store_true", help="--stall: unbounded, on the loop")
    args = p.parse_args(argv)
    if args.stall:
        raw = _log(args.events, args.chars)
        folded, took, stall = asyncio.run(_measure(raw, args.on_loop))
        where = "on the loop, unbounded" if args.on_loop else "in a thread, within SCAN_TEXT"
        print(f"{where}: {folded} events folded in {took:.2f} s; longest loop stall {stall:.3f} s")
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    bodies = _bodies(args.data, max(sizes))
    results = {"sizes": [bench_size(bodies, n, args.repeat) for n in sizes]}
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
