"""A burst of commands: N people × M `!search` at once against the real service and Synapse.

    python -m bench.load [--data ../shared/data/irc-ubuntu] [--room-messages 3000]
        [--people 40] [--per-person 5] [--concurrency 1,8] [--embedder-model M] [--out FILE]
    python -m bench.load --profile 20 [--profile-out FILE]
    python -m bench.load --floor ...
    python -m bench.load --synapse-db postgres ...  (`apt-get install postgresql`)

Setup as in `bench.latency`'s end-to-end part: a real Synapse, one public room of
`--room-messages` IRC messages sent by seed users (backdated, 20 s apart; 8 sends in flight),
the real service (appservice mode, the default embedder unless `--embedder-model` names
another) indexing it. Then, for each `--concurrency`
value in turn (same room, index and Synapse), a fresh `Service` with
`bot.max_concurrent_commands` set to it (`1`, with a 600 s deadline, is the old one-at-a-time
path) and every other setting at its default, the per-asker rate limit included, its writer
first caught up with the room (the earlier bursts' commands and replies): `--people` users each
send `--per-person` `!search` commands (two-word phrases of the room's own
messages), all at once, and the run waits until every command has its reply.

Reported per run, on the server clock (`origin_server_ts`): replies/s (commands answered over
the span from the first command to the last reply) and reply latency p50/p99 (reply minus
command); unanswered commands; the service's timed-out commands and most in flight; the CPU
seconds a command of this process (the service, and the benchmark's own sends and reads) and of
Synapse; and the process's RSS before the burst and its peak during it (VmHWM reset before the
burst; the service runs in this process, Synapse in its own). The replies are read forward from
a token taken before the burst, each event once.

`--floor` sends, before the bursts, as many messages shaped like a command nobody answers, all
at once, and reports Synapse's CPU a message: its own floor, paid for each command and again
for each reply (`floor`).

`--profile N` comes first, on the same room and index (`--concurrency ''` skips the bursts after
it): one person asks N commands one after another (each waiting
for its reply; after 3 not profiled, which warm the room's copy) while `py-spy record` (the
`bench` extra) samples this process and Synapse; reported are both processes' CPU a command
and their functions by inclusive CPU ms a command (idle threads left out).
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

from bench import arguments, embedder_option, emit, machine, stats, vm
from bench.harness.irc import phrases, speakers_and_lines
from bench.harness.latency_e2e import seed_room
from bench.harness.probes import (
    POLL_SECONDS,
    PROFILE_WARMUP,
    Requests,
    Stage,
    cpu_seconds,
    now_token,
    profile,
    read_new,
    reset_peak,
    sample_waits,
    tree_cpu_seconds,
)
from bench.harness.synapse import SYNAPSE_DBS, SynapseBench, postgres_problem
from bot.demo.homeserver import service_config
from ingest.embed import make_embedder
from ingest.types import RoomID


async def burst(
    stage: Stage,
    texts: Sequence[str],
    *,
    concurrency: int,
    patience: float,
    db_pid: int | None = None,
) -> dict[str, Any]:
    """One burst against a fresh service; `texts` has one query per command, in send order.
    `db_pid`: Synapse's PostgreSQL cluster, whose CPU is reported beside Synapse's."""
    server, hs, room, people = stage.server, stage.hs, stage.room, stage.people
    # 1 is the path before commands ran concurrently: one at a time and no deadline.
    bot: dict[str, Any] = {"max_concurrent_commands": concurrency}
    if concurrency == 1:
        bot["command_timeout_seconds"] = 600
    requests = Requests()
    service = stage.service(transport=requests, **bot)
    await service.start()
    try:
        await hs.ping_appservice()
        # The writer walks the earlier bursts' commands and replies first, as after any
        # ordinary message: each burst starts with the index caught up, not behind by them.
        await asyncio.wait_for(service.scheduler.settle([RoomID(room)]), 600)
        rss_before = vm("VmRSS")
        requests.reset()  # the burst's requests, not the start's and catch-up pass's
        waits: dict[str, int] = {}
        sampler = asyncio.create_task(sample_waits(waits))
        reset_peak()
        per = len(texts) // len(people)

        async def ask(n: int, user: Any) -> list[str]:
            mine = texts[n * per : (n + 1) * per]
            sends = (user.send_text(room, f"!search {text}") for text in mine)
            return list(await asyncio.gather(*sends))

        token = await now_token(people[0], room)
        cpu_at, synapse_at = time.process_time(), cpu_seconds(server.pid)
        db_at = tree_cpu_seconds(db_pid) if db_pid else 0.0
        sent_at = time.perf_counter()
        asked = await asyncio.gather(*(ask(n, user) for n, user in enumerate(people)))
        sent = [event_id for ids in asked for event_id in ids]
        send_s = time.perf_counter() - sent_at
        wanted = set(sent)
        seen: dict[str, dict[str, Any]] = {}
        answer: dict[str, dict[str, Any]] = {}
        deadline = time.perf_counter() + patience
        while len(answer) < len(wanted) and time.perf_counter() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            token = await read_new(
                people[0], room, token, server.bot_user_id, wanted, seen, answer
            )
        wall_s = time.perf_counter() - sent_at
        sampler.cancel()
        cpu_s, synapse_s = time.process_time() - cpu_at, cpu_seconds(server.pid) - synapse_at
        db_s = tree_cpu_seconds(db_pid) - db_at if db_pid else None
        peak = vm("VmHWM")
        rss_after = vm("VmRSS")
        sent_ts = {e: int(seen[e]["origin_server_ts"]) for e in sent}
        latencies = [
            (int(reply["origin_server_ts"]) - sent_ts[cmd]) / 1000 for cmd, reply in answer.items()
        ]
        first = min(sent_ts.values())
        last = max((int(r["origin_server_ts"]) for r in answer.values()), default=first)
        span_s = max((last - first) / 1000, 1e-3)
        bodies = [str(r["content"].get("body", "")) for r in answer.values()]
        return {
            "concurrency": concurrency,
            "commands": len(sent),
            "answered": len(answer),
            "unanswered": len(wanted) - len(answer),
            "rate_notices": sum("faster than" in b for b in bodies),
            "timeout_replies": sum("took longer than" in b for b in bodies),
            "send_seconds": round(send_s, 1),
            "span_seconds_server": round(span_s, 1),
            "replies_per_second": round(len(answer) / span_s, 2),
            "reply_latency_server": stats(latencies),
            "wall_seconds": round(wall_s, 1),
            "service_timeouts": service.commands.timeouts,
            "most_in_flight": service.commands.peak,
            "service_cpu_ms_per_command": round(cpu_s * 1000 / max(len(sent), 1), 1),
            "synapse_cpu_ms_per_command": round(synapse_s * 1000 / max(len(sent), 1), 1),
            "postgres_cpu_ms_per_command": (
                round(db_s * 1000 / max(len(sent), 1), 1) if db_s is not None else None
            ),
            "requests_per_command": {
                k: round(n / max(len(sent), 1), 2) for k, n in sorted(requests.by_kind.items())
            },
            # Command tasks in flight, sampled every WAIT_SAMPLE_SECONDS: where they waited.
            "waits_sampled": dict(sorted(waits.items(), key=lambda kv: -kv[1])[:15]),
            "rss_before_mib": rss_before,
            "peak_rss_during_mib": peak,
            "rss_after_mib": rss_after,
        }
    finally:
        await service.stop()


async def floor(stage: Stage, texts: Sequence[str]) -> dict[str, Any]:
    """What a burst's messages cost the homeserver alone: the same people send as many
    messages at once, shaped like a command that nobody answers (`!nosuchcommand …`: unknown
    outside the command room, so the service reads nothing, sends nothing and wakes no
    writer), to the running service. Synapse's CPU a message is then one send with its
    persistence, push rules and push to the appservice: a command costs it that, and its
    reply about the same again, whatever the service does."""
    server, hs, room, people = stage.server, stage.hs, stage.room, stage.people
    service = stage.service()
    await service.start()
    try:
        await hs.ping_appservice()
        per = len(texts) // len(people)

        async def send(n: int, user: Any) -> list[str]:
            mine = texts[n * per : (n + 1) * per]
            return list(
                await asyncio.gather(*(user.send_text(room, f"!nosuchcommand {t}") for t in mine))
            )

        synapse_at, sent_at = cpu_seconds(server.pid), time.perf_counter()
        asked = await asyncio.gather(*(send(n, user) for n, user in enumerate(people)))
        sent = [event_id for ids in asked for event_id in ids]
        send_s = time.perf_counter() - sent_at
        await asyncio.sleep(2.0)  # the last pushes to the appservice
        await service.queue.join()
        synapse_s = cpu_seconds(server.pid) - synapse_at
    finally:
        await service.stop()
    return {
        "messages": len(sent),
        "send_seconds": round(send_s, 1),
        "synapse_cpu_ms_per_message": round(synapse_s * 1000 / max(len(sent), 1), 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from bot.service.run import Service

    senders, bodies = speakers_and_lines(args.data, args.room_messages)
    total = args.people * args.per_person
    result: dict[str, Any] = {
        "machine": machine(),
        "embedder_model": args.embedder_model,
        "runs": [],
        "synapse_db": args.synapse_db,
    }
    model = {"model": args.embedder_model}
    with tempfile.TemporaryDirectory(prefix="muninn-bench-load-") as tmp:
        workdir = Path(tmp)
        async with SynapseBench(workdir / "synapse", args.synapse_db) as sb:
            server, hs = sb.synapse, sb.homeserver
            db_pid = sb.postgres.process.pid if sb.postgres is not None else None
            if sb.postgres is not None:
                result["machine"]["postgres"] = await asyncio.to_thread(sb.postgres.version)
            embedder = make_embedder(service_config(server, workdir, embedder=model).embedder)
            try:
                owner = await hs.register(displayname="Owner")
                room = await hs.fresh_room(owner, preset="public_chat")
                await hs.join_bot(owner, room)
                base_ts = int(time.time() * 1000) - len(bodies) * 20_000 - 3_600_000
                start = time.perf_counter()
                result["senders"] = await seed_room(hs, room, senders, bodies, base_ts, at_once=8)
                result["seed_seconds"] = round(time.perf_counter() - start, 1)
                people = []
                for n in range(args.people):
                    person = await hs.register(displayname=f"Person {n}")
                    await person.join(room)
                    people.append(person)
                indexer = Service(
                    service_config(server, workdir, embedder=model), embedder=embedder
                )
                await indexer.start()
                start = time.perf_counter()
                try:
                    await hs.ping_appservice()
                    await asyncio.wait_for(indexer.scheduler.settle([RoomID(room)]), 3600)
                    col = await indexer.writer.open()
                    result["points"] = await asyncio.to_thread(col.count)
                finally:
                    await indexer.stop()
                result["index_seconds"] = round(time.perf_counter() - start, 1)
                result["room_messages"] = len(bodies)
                stage = Stage(server, hs, room, people, workdir, embedder)
                if args.profile:
                    asked = phrases(bodies, args.profile + PROFILE_WARMUP, seed=7)
                    out = args.profile_out or workdir / "profile.txt"
                    result["profile"] = await profile(stage, asked, warmup=PROFILE_WARMUP, out=out)
                if args.floor:
                    said = phrases(bodies, total, seed=11)
                    result["floor"] = await floor(stage, said)
                    print(json.dumps(result["floor"]), file=sys.stderr, flush=True)
                texts = phrases(bodies, total * len(args.concurrency))
                for i, concurrency in enumerate(args.concurrency):
                    row = await burst(
                        stage,
                        texts[i * total : (i + 1) * total],
                        concurrency=concurrency,
                        patience=args.patience,
                        db_pid=db_pid,
                    )
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    result["runs"].append(row)
            finally:
                await embedder.close()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.load", __doc__)
    p.add_argument("--data", type=Path, default=Path("../shared/data/irc-ubuntu"))
    p.add_argument("--room-messages", type=int, default=3000)
    p.add_argument("--people", type=int, default=40)
    p.add_argument("--per-person", type=int, default=5)
    p.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[1, 8],
        help="bot.max_concurrent_commands of each run, comma-separated (1: one at a time; "
        "'': no burst)",
    )
    p.add_argument("--patience", type=float, default=900.0, help="seconds to wait for replies")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="before the bursts: N commands one after another under py-spy (the bench extra), "
        "reporting where a command's CPU goes",
    )
    p.add_argument("--profile-out", type=Path, help="keep py-spy's raw stacks in this file")
    p.add_argument(
        "--floor",
        action="store_true",
        help="before the bursts: as many messages that nobody answers, sent at once, for "
        "Synapse's own CPU a message",
    )
    p.add_argument(
        "--synapse-db",
        choices=SYNAPSE_DBS,
        default="sqlite",
        help="Synapse's database: sqlite (on /dev/shm) or postgres (Debian's server, a "
        "throwaway cluster started here: what operators run)",
    )
    embedder_option(p)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.synapse_db == "postgres" and (problem := postgres_problem()):
        print(f"--synapse-db postgres: {problem}", file=sys.stderr)
        return 2
    results = asyncio.run(run(args))
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
