"""How long one `!search` over large messages holds the event loop (issue 11, item 4).

    python -m bench.stall [--events 2048] [--chars 16000] [--on-loop]

Builds a room log of `--events` messages of about `--chars` characters each, bounds it as
the bot's read does (`bot.recent.within_text`), and runs the transcript fold the way
`fused_search` does (in a thread) while a 1 ms ticker runs on the loop. Prints the events
folded, the fold's wall time (the first fold, uncached scrub) and the longest gap between
two ticks: how long appservice transactions, `/healthz` and other rooms would have waited.
`--on-loop` folds the whole unbounded log on the loop instead, as before the fix.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Sequence
from typing import Any

from bot.commands.records import SearchCommand
from bot.lookup import RoomView, _transcript_finds
from bot.recent import within_text
from bot.roomlog import RoomLog
from bot.visibility import ANYONE
from ingest.types import RoomID

_WORDS = ["deploy", "server", "backup", "kernel", "lunch", "the", "a", "upgrade", "wifi"]


def _log(events: int, chars: int) -> list[dict[str, Any]]:
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


async def _measure(raw: list[dict[str, Any]], on_loop: bool) -> tuple[int, float, float]:
    kept, cut = (raw, False) if on_loop else within_text(raw)
    view = RoomView(RoomLog(RoomID("!r"), kept, len(raw), cut), None, ANYONE)
    command = SearchCommand(("kernel upgrade",), None, None, None, None, (), 5)
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
        _transcript_finds([view], command, None, [], "@bot:x", "!", 15)
    else:
        await asyncio.to_thread(_transcript_finds, [view], command, None, [], "@bot:x", "!", 15)
    took = time.perf_counter() - started
    done.set()
    await ticker
    return len(kept), took, max(gaps)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.stall", description=__doc__)
    p.add_argument("--events", type=int, default=2048)
    p.add_argument("--chars", type=int, default=16_000)
    p.add_argument("--on-loop", action="store_true", help="fold unbounded, on the loop")
    args = p.parse_args(argv)
    folded, took, stall = asyncio.run(_measure(_log(args.events, args.chars), args.on_loop))
    where = "on the loop, unbounded" if args.on_loop else "in a thread, within SCAN_TEXT"
    print(
        f"{where}: {folded} events folded in {took:.2f} s; longest loop stall {stall * 1e3:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
