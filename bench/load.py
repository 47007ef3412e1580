"""A burst of commands: N people × M `!search` at once against the real service and Synapse.

    python -m bench.load [--data ../shared/data/irc-ubuntu] [--room-messages 3000]
        [--people 40] [--per-person 5] [--concurrency 1,8] [--out FILE]
    python -m bench.load --profile 20 [--profile-out FILE]
    python -m bench.load --floor ...

Setup as in `bench.latency`'s end-to-end part: a real Synapse, one public room of
`--room-messages` IRC messages sent by seed users (backdated, 20 s apart; 8 sends in flight),
the real service (appservice mode, the real MiniLM) indexing it. Then, for each `--concurrency`
value in turn (same room, index and Synapse), a fresh `Service` with
`bot.max_concurrent_commands` set to it (`1`, with a 600 s deadline, is the old one-at-a-time
path) and every other setting at its default, the per-asker rate limit included: `--people`
users each send `--per-person` `!search` commands (two-word phrases of the room's own
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
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.ingest import irc_events, vm
from bench.latency_e2e import seed_room
from bench.latency_setup import machine, phrases, stats
from bench.output import emit
from ingest.embed import Embedder, make_embedder
from ingest.types import RoomID

POLL_SECONDS = 1.0
WAIT_SAMPLE_SECONDS = 0.25  # how often the burst notes where each command in flight waits


class Requests:
    """The service's homeserver requests by kind (wraps its client's one request layer)."""

    KINDS = ("/messages", "/state", "/event/", "/send/", "/members", "/context/")

    def __init__(self, client: Any) -> None:
        self.by_kind: dict[str, int] = {}
        inner = client._request

        async def counted(method: str, path: str, **kwargs: Any) -> Any:
            kind = next((k.strip("/") for k in self.KINDS if k in path), f"{method} other")
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            return await inner(method, path, **kwargs)

        client._request = counted


def _awaiting(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: its innermost coroutine's function and line."""
    coro: Any = task.get_coro()
    where = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            where = f"{frame.f_code.co_qualname}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where


async def _sample_waits(into: dict[str, int]) -> None:
    """Every `WAIT_SAMPLE_SECONDS`, count where each command task in flight is suspended."""
    while True:
        await asyncio.sleep(WAIT_SAMPLE_SECONDS)
        for task in asyncio.all_tasks():
            if task.get_name().startswith("muninn-command-") and not task.done():
                where = _awaiting(task)
                into[where] = into.get(where, 0) + 1


def _cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux: write 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def _in_reply_to(event: dict[str, Any]) -> str | None:
    rel = event.get("content", {}).get("m.relates_to", {})
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


async def _now_token(user: Any, room: str) -> str:
    """A `/messages` token at the room's present, to read forward from."""
    return str((await user.messages(room, direction="b", limit=1))["start"])


async def _read_new(
    user: Any,
    room: str,
    token: str,
    bot_id: str,
    wanted: set[str],
    seen: dict[str, dict[str, Any]],
    answer: dict[str, dict[str, Any]],
) -> str:
    """Read the room forward from `token` (each event once: a poll of the latest 1,000 events
    cost Synapse and this process, which hosts the service, more than the replies did);
    record the events in `seen` and the bot's replies to `wanted` commands in `answer`; the token
    to go on from."""
    while True:
        page = await user.messages(room, direction="f", from_token=token, limit=500)
        for event in page["chunk"]:
            seen[event["event_id"]] = event
            target = _in_reply_to(event)
            if event["sender"] == bot_id and target in wanted and target not in answer:
                answer[target] = event
        end = page.get("end")
        if not page["chunk"] or not isinstance(end, str) or end == token:
            return token if not isinstance(end, str) else end
        token = end


async def burst(
    server: Any,
    workdir: Path,
    embedder: Embedder,
    hs: Any,
    room: str,
    people: Sequence[Any],
    texts: Sequence[str],
    *,
    concurrency: int,
    patience: float,
) -> dict[str, Any]:
    """One burst against a fresh service; `texts` has one query per command, in send order."""
    from bot.service import Service
    from tests.botkit import service_config

    # 1 is the path before commands ran concurrently: one at a time and no deadline.
    bot: dict[str, Any] = {"max_concurrent_commands": concurrency}
    if concurrency == 1:
        bot["command_timeout_seconds"] = 600
    cfg = service_config(server, workdir, bot=bot)
    service = Service(cfg, embedder=embedder, full_at_start=False)
    await service.start()
    try:
        await hs.ping_appservice()
        rss_before = vm("VmRSS")
        requests = Requests(service.client)
        waits: dict[str, int] = {}
        sampler = asyncio.create_task(_sample_waits(waits))
        _reset_peak()
        per = len(texts) // len(people)

        async def ask(n: int, user: Any) -> list[str]:
            mine = texts[n * per : (n + 1) * per]
            sends = (user.send_text(room, f"!search {text}") for text in mine)
            return list(await asyncio.gather(*sends))

        token = await _now_token(people[0], room)
        cpu_at, synapse_at = time.process_time(), _cpu_seconds(server.pid)
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
            token = await _read_new(
                people[0], room, token, server.bot_user_id, wanted, seen, answer
            )
        wall_s = time.perf_counter() - sent_at
        sampler.cancel()
        cpu_s, synapse_s = time.process_time() - cpu_at, _cpu_seconds(server.pid) - synapse_at
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


async def floor(
    server: Any,
    workdir: Path,
    embedder: Embedder,
    hs: Any,
    room: str,
    people: Sequence[Any],
    texts: Sequence[str],
) -> dict[str, Any]:
    """What a burst's messages cost the homeserver alone: the same people send as many
    messages at once, shaped like a command that nobody answers (`!nosuchcommand …`: unknown
    outside the command room, so the service reads nothing, sends nothing and wakes no
    writer), to the running service. Synapse's CPU a message is then one send with its
    persistence, push rules and push to the appservice: a command costs it that, and its
    reply about the same again, whatever the service does."""
    from bot.service import Service
    from tests.botkit import service_config

    service = Service(service_config(server, workdir), embedder=embedder, full_at_start=False)
    await service.start()
    try:
        await hs.ping_appservice()
        per = len(texts) // len(people)

        async def send(n: int, user: Any) -> list[str]:
            mine = texts[n * per : (n + 1) * per]
            return list(
                await asyncio.gather(*(user.send_text(room, f"!nosuchcommand {t}") for t in mine))
            )

        synapse_at, sent_at = _cpu_seconds(server.pid), time.perf_counter()
        asked = await asyncio.gather(*(send(n, user) for n, user in enumerate(people)))
        sent = [event_id for ids in asked for event_id in ids]
        send_s = time.perf_counter() - sent_at
        await asyncio.sleep(2.0)  # the last pushes to the appservice
        await service.queue.join()
        synapse_s = _cpu_seconds(server.pid) - synapse_at
    finally:
        await service.stop()
    return {
        "messages": len(sent),
        "send_seconds": round(send_s, 1),
        "synapse_cpu_ms_per_message": round(synapse_s * 1000 / max(len(sent), 1), 1),
    }


PROFILE_RATE = 200  # py-spy samples a second
PROFILE_WARMUP = 3  # commands before the profile starts: the room's copy is then warm


def top_costs(raw: str, commands: int, rate: int = PROFILE_RATE, top: int = 30) -> list[Any]:
    """py-spy's `raw` (collapsed) stacks as rows of (function, inclusive ms a command, self ms
    a command), by inclusive time: a function counts once per sample that has it anywhere on
    its stack, so nested rows overlap and do not add up."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + int(count)
        own[frames[-1]] = own.get(frames[-1], 0) + int(count)
    ms = 1000 / rate / max(commands, 1)
    rows = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    return [(frame, round(n * ms, 1), round(own.get(frame, 0) * ms, 1)) for frame, n in rows]


async def profile(
    server: Any,
    workdir: Path,
    embedder: Embedder,
    hs: Any,
    room: str,
    person: Any,
    texts: Sequence[str],
    *,
    warmup: int,
    out: Path,
) -> dict[str, Any]:
    """`texts` asked one after another by one person, each waiting for its reply, under
    `py-spy record` of this process (every thread, idle ones left out) after `warmup` of
    them: where a command's CPU goes once the room's copy is warm, as in a burst."""
    from bot.service import Service
    from tests.botkit import service_config

    # One asker for every command: the rate limit would otherwise drop them after 10.
    cfg = service_config(server, workdir, bot={"rate_per_minute": 10_000})
    service = Service(cfg, embedder=embedder, full_at_start=False)
    await service.start()
    spies: list[asyncio.subprocess.Process] = []
    try:
        await hs.ping_appservice()
        token = await _now_token(person, room)
        seen: dict[str, dict[str, Any]] = {}
        answer: dict[str, dict[str, Any]] = {}
        cpu_at = synapse_at = 0.0
        for n, text in enumerate(texts):
            if n == warmup:
                spies = [await _spy(os.getpid(), out), await _spy(server.pid, _synapse(out))]
                await asyncio.sleep(1.0)  # attached
                cpu_at, synapse_at = time.process_time(), _cpu_seconds(server.pid)
            wanted = {await person.send_text(room, f"!search {text}")}
            while not wanted <= answer.keys():
                await asyncio.sleep(0.05)
                token = await _read_new(
                    person, room, token, server.bot_user_id, wanted, seen, answer
                )
        profiled = len(texts) - warmup
        cpu_s, synapse_s = time.process_time() - cpu_at, _cpu_seconds(server.pid) - synapse_at
    finally:
        for spy in spies:
            if spy.returncode is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
            await spy.wait()
        await service.stop()
    return {
        "profiled_commands": profiled,
        "service_cpu_ms_per_command": round(cpu_s * 1000 / profiled, 1),
        "synapse_cpu_ms_per_command": round(synapse_s * 1000 / profiled, 1),
        "profile_file": str(out),
        "top_inclusive_ms_per_command": _costs_in(out, profiled),
        "synapse_top_inclusive_ms_per_command": _costs_in(_synapse(out), profiled),
    }


async def _spy(pid: int, out: Path) -> asyncio.subprocess.Process:
    """`py-spy record` of a process (every thread, idle ones left out) into `out`."""
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("py-spy")),
        *("record", "--pid", str(pid), "--rate", str(PROFILE_RATE), "--format", "raw"),
        *("--function", "--nonblocking", "-o", str(out)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


def _synapse(out: Path) -> Path:
    return out.with_name(out.stem + "-synapse" + out.suffix)


def _costs_in(path: Path, commands: int) -> list[Any]:
    return top_costs(path.read_text(), commands) if path.exists() else []


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    from bot.demo.synapse import start_synapse
    from bot.service import Service
    from tests.botkit import service_config
    from tests.homeserver import Homeserver

    events = [
        e for e in irc_events(args.data, args.room_messages) if e["type"] == "m.room.message"
    ]
    bodies = [str(e["content"]["body"]).split("\n\n")[-1] for e in events]
    senders = [str(e["sender"]) for e in events]
    total = args.people * args.per_person
    result: dict[str, Any] = {"machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="muninn-bench-load-") as tmp:
        workdir = Path(tmp)
        server = await asyncio.to_thread(start_synapse, workdir / "synapse")
        embedder = make_embedder(service_config(server, workdir).embedder)
        try:
            async with aiohttp.ClientSession() as session:
                hs = Homeserver(server, session)
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
                indexer = Service(service_config(server, workdir), embedder=embedder)
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
                if args.profile:
                    asked = phrases(bodies, args.profile + PROFILE_WARMUP, seed=7)
                    out = args.profile_out or workdir / "profile.txt"
                    result["profile"] = await profile(
                        server,
                        workdir,
                        embedder,
                        hs,
                        room,
                        people[0],
                        asked,
                        warmup=PROFILE_WARMUP,
                        out=out,
                    )
                if args.floor:
                    said = phrases(bodies, total, seed=11)
                    result["floor"] = await floor(
                        server, workdir, embedder, hs, room, people, said
                    )
                    print(json.dumps(result["floor"]), file=sys.stderr, flush=True)
                texts = phrases(bodies, total * len(args.concurrency))
                for i, concurrency in enumerate(args.concurrency):
                    row = await burst(
                        server,
                        workdir,
                        embedder,
                        hs,
                        room,
                        people,
                        texts[i * total : (i + 1) * total],
                        concurrency=concurrency,
                        patience=args.patience,
                    )
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    result["runs"].append(row)
        finally:
            await embedder.close()
            await asyncio.to_thread(server.stop)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    results = asyncio.run(run(args))
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
