"""`bench.latency`'s end-to-end part: a real Synapse, a seeded room, the real service, and
`!search` → reply timed against Synapse's own `POST /search`; `seed_room` is `bench.load`'s too."""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import stats
from bench.harness.irc import phrases, speakers_and_lines
from bench.harness.probes import Requests, in_reply_to
from bench.harness.synapse import SynapseBench, synapse_search
from bot.demo.homeserver import service_config
from ingest.search.query import SearchQuery
from ingest.types import RoomID


async def seed_room(
    hs: Any,
    room: str,
    senders: Sequence[str],
    bodies: Sequence[str],
    base_ts: int,
    at_once: int = 1,
) -> int:
    """Send `bodies` into `room`, each as a seed user standing in for its IRC sender, backdated
    20 s apart from `base_ts`, `at_once` sends in flight (1: strictly in order); returns how
    many seed users spoke."""
    from bot.demo.synapse_config import SEED_PREFIX

    seats: dict[str, Any] = {}
    for sender in senders:
        if sender not in seats:
            local = SEED_PREFIX + re.sub(r"[^a-z0-9]", "-", sender[5:].split(":")[0])
            seats[sender] = user = await hs.seed_user(f"{local}-{len(seats)}")
            await user.join(room)
    for start in range(0, len(bodies), at_once):
        await asyncio.gather(
            *(
                seats[senders[i]].send_text(room, bodies[i], ts=base_ts + i * 20_000)
                for i in range(start, min(start + at_once, len(bodies)))
            )
        )
    return len(seats)


async def end_to_end(
    data: Path, room_messages: int, searches: int, warmup: int, model: str
) -> dict[str, Any]:
    """`!search` → reply with the service's embedder `model` (`embedder.model`)."""
    from bot.service.run import Service

    senders, bodies = speakers_and_lines(data, room_messages)
    texts = phrases(bodies, searches + warmup)
    # `Searcher.search` and Synapse's `/search` alone are asked other phrases: the service
    # remembers a question's vectors (rule 22d), so the commands' own would time a dict read.
    asked = set(texts)
    alone = [t for t in phrases(bodies, 4 * (searches + warmup)) if t not in asked]
    alone = list(dict.fromkeys(alone))[: searches + warmup]
    with tempfile.TemporaryDirectory(prefix="muninn-bench-e2e-") as tmp:
        workdir = Path(tmp)
        service: Service | None = None
        async with SynapseBench(workdir / "synapse") as sb:
            server, hs = sb.synapse, sb.homeserver
            try:
                asker = await hs.register(displayname="Asker")
                room = await hs.fresh_room(asker, preset="public_chat")
                await hs.join_bot(asker, room)
                base_ts = int(time.time() * 1000) - room_messages * 20_000 - 3_600_000
                seed_start = time.perf_counter()
                seats = await seed_room(hs, room, senders, bodies, base_ts)
                seed_s = time.perf_counter() - seed_start
                cfg = service_config(
                    server,
                    workdir,
                    bot={"rate_per_minute": 100_000},
                    embedder={"model": model},
                )
                requests = Requests()
                service = Service(cfg, full_at_start=True, transport=requests)
                await service.start()
                await hs.ping_appservice()
                index_start = time.perf_counter()
                await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 1800)
                index_s = time.perf_counter() - index_start
                col = await service.writer.open()
                points = await asyncio.to_thread(col.count)
                bot_id = server.bot_user_id
                requests.reset()  # the commands' requests, not the start's and first pass's
                reply_requests: list[int] = []
                client: list[float] = []
                server_side: list[float] = []
                reply_hits: list[int] = []
                for i, text in enumerate(texts):
                    start = time.perf_counter()
                    mark = requests.total
                    command = await asker.send_text(room, f"!search {text}")
                    reply = None
                    while reply is None:
                        chunk = (await asker.messages(room, direction="b", limit=10))["chunk"]
                        reply = next(
                            (
                                e
                                for e in chunk
                                if e["sender"] == bot_id and in_reply_to(e) == command
                            ),
                            None,
                        )
                        if reply is None:
                            if time.perf_counter() - start > 60:
                                raise RuntimeError(f"no reply to {command!r} in 60 s")
                            await asyncio.sleep(0.02)
                    elapsed = time.perf_counter() - start
                    made = requests.total - mark
                    sent = await asker.get_event(room, command)
                    if i >= warmup:
                        reply_requests.append(made)
                        client.append(elapsed)
                        server_side.append(
                            (int(reply["origin_server_ts"]) - int(sent["origin_server_ts"])) / 1000
                        )
                        reply_hits.append(str(reply["content"].get("body", "")).count("\n"))
                # Where the time goes: the bot's own receipt → send, the transcript read alone
                # (`latest`, the bound of `bot.transcript_limit`), and `Searcher.search` alone
                # on the bot's store (with its homeserver revalidation of the hits).
                handler = service.handler
                in_bot = [ms / 1000 for ms in list(handler.latencies_ms)[-len(client) :]]
                read_log: list[float] = []
                searcher: list[float] = []
                searcher_requests: list[int] = []
                for text in alone[warmup:]:
                    start = time.perf_counter()
                    await handler.read_log(RoomID(room))
                    read_log.append(time.perf_counter() - start)
                    query = SearchQuery.build([text], room_ids=[room], limit=5)
                    start = time.perf_counter()
                    mark = requests.total
                    await service.searcher.search(query)
                    searcher.append(time.perf_counter() - start)
                    searcher_requests.append(requests.total - mark)
                synapse: list[float] = []
                synapse_results: list[int] = []
                for i, text in enumerate(alone):
                    start = time.perf_counter()
                    answer = await synapse_search(asker, room, text, limit=10)
                    elapsed = time.perf_counter() - start
                    if answer.error is not None:
                        raise RuntimeError(f"Synapse /search refused {text!r}: {answer.error}")
                    if i >= warmup:
                        synapse.append(elapsed)
                        synapse_results.append(len(answer.events))
            finally:
                if service is not None:
                    await service.stop()
    return {
        "embedder_model": model,
        "room_messages": len(bodies),
        "senders": seats,
        "points": points,
        "seed_seconds": round(seed_s, 1),
        "index_seconds": round(index_s, 1),
        "searches": len(client),
        "queries": texts[warmup:],
        "queries_alone": alone[warmup:],  # `Searcher.search` and Synapse's, never asked before
        "bang_search_client": stats(client),
        "bang_search_server_ts": stats(server_side),
        "bot_receipt_to_send": stats(in_bot),
        "transcript_read": {**stats(read_log), "bound": cfg.bot.transcript_limit},
        "searcher_with_revalidation": stats(searcher),
        # Homeserver requests: all the bot made per `!search` reply (transcript read, state,
        # revalidation, the reply), and those of `Searcher.search` alone (revalidation).
        "requests_per_reply": _counts(reply_requests),
        "revalidation_requests_per_search": _counts(searcher_requests),
        "searcher_over_synapse_p50": round(_p50(searcher) / max(_p50(synapse), 1e-9), 1),
        "synapse_search": {
            **stats(synapse),
            "mean_results": round(sum(synapse_results) / max(len(synapse_results), 1), 2),
            "limit": 10,
        },
    }


def _counts(ns: Sequence[int]) -> dict[str, float | int]:
    ordered = sorted(ns)
    if not ordered:
        return {"n": 0}
    return {
        "p50": ordered[(len(ordered) - 1) // 2],
        "max": ordered[-1],
        "mean": round(sum(ordered) / len(ordered), 2),
    }


def _p50(samples_s: Sequence[float]) -> float:
    return float(stats(samples_s).get("p50_ms", 0.0))
