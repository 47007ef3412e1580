"""What the service benchmarks measure a running service with: its homeserver requests by kind,
where its commands in flight wait, CPU seconds of a process, the peak RSS, the replies read
forward, a py-spy profile of one asker's commands (`bench.load --profile N`) and, run as a
program, the memory of an idle service over an index that exists:

    python -m bench.harness.probes --store DIR --collection NAME [--seconds 60]
        [--embedder-model M]
        [--out FILE]

A fresh process opens what `bot.service.run.Service.start` opens for the read path — the store,
the purge log, the embedder (the default unless `--embedder-model` names another), a
`Searcher` — answers a few searches as the first `!search`es after a
start would (loading the model and the collection), then idles and samples its RSS every
second. Revalidation and the sync loop are left out: they hold no index data. `bench.ingest
--idle-seconds N` runs this on the index it just built. Each of the embedder's models
is unloaded after `embedder.unload_after_seconds` (300 s by default) without a call: idle longer
than that to measure the service without it. The first search of all (the model's first load)
and the first after the idle spell (a reload if it was unloaded) are timed.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import SERVER_NAME, arguments, embedder_option, emit, offline_config, vm
from bot.demo.client import MatrixUser
from bot.demo.homeserver import Homeserver, service_config
from bot.demo.synapse import SynapseServer
from ingest.embed import Embedder, e5, make_embedder, minilm
from ingest.matrix import AiohttpTransport, Request, Response, Transport
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.store import open_store
from ingest.store.purges import PurgeLog, purge_log_path

if TYPE_CHECKING:
    from bot.service.run import Service

POLL_SECONDS = 1.0
WAIT_SAMPLE_SECONDS = 0.25  # how often the burst notes where each command in flight waits


@dataclass(frozen=True)
class Stage:
    """What a burst, the floor and a profile run against: the Synapse, its seeded room and the
    people in it, the folder a fresh service's config points into, the embedder all share."""

    server: SynapseServer
    hs: Homeserver
    room: str
    people: Sequence[MatrixUser]
    workdir: Path
    embedder: Embedder

    def service(self, transport: Transport | None = None, **bot: Any) -> Service:
        """A fresh service on the room's index (not started), `bot` settings over the defaults;
        `transport` sends its homeserver requests (a `Requests` to count them)."""
        from bot.service.run import Service

        cfg = service_config(self.server, self.workdir, bot=bot)
        return Service(cfg, embedder=self.embedder, full_at_start=False, transport=transport)


class Requests:
    """The service's homeserver requests by kind: the transport its client sends through
    (`Service(transport=...)`), counting each request as it goes to the product's own;
    `reset()` starts the count afresh (after the service's start and first pass)."""

    KINDS = ("/messages", "/state", "/event/", "/send/", "/members", "/context/")

    def __init__(self) -> None:
        self.by_kind: dict[str, int] = {}
        self._inner = AiohttpTransport()

    async def send(self, request: Request) -> Response:
        path, query = request.path, request.params
        kind = next((k.strip("/") for k in self.KINDS if k in path), f"{request.method} other")
        if kind == "messages":  # whose: the room log's, revalidation's or the writer's
            which = "log" if query.get("dir") == "b" else "walk"
            kind = "messages " + ("tail" if "filter" in query else which)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        return await self._inner.send(request)

    async def close(self) -> None:
        await self._inner.close()

    def reset(self) -> None:
        self.by_kind.clear()

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: its innermost coroutine's function and line."""
    coro: Any = task.get_coro()
    where = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            where = f"{frame.f_code.co_qualname}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where


async def sample_waits(into: dict[str, int]) -> None:
    """Every `WAIT_SAMPLE_SECONDS`, count where each command task in flight is suspended."""
    while True:
        await asyncio.sleep(WAIT_SAMPLE_SECONDS)
        for task in asyncio.all_tasks():
            if task.get_name().startswith("muninn-command-") and not task.done():
                where = awaiting(task)
                into[where] = into.get(where, 0) + 1


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and every process under it, the reaped ones included (a
    PostgreSQL cluster: its postmaster and a backend per connection)."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        spent[child] = sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
    tree, grown = {pid}, True
    while grown:
        below = {c for c, p in parents.items() if p in tree} - tree
        tree |= below
        grown = bool(below)
    return sum(spent.get(p, 0.0) for p in tree)


def reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux: write 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def in_reply_to(event: dict[str, Any]) -> str | None:
    rel = event.get("content", {}).get("m.relates_to", {})
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


async def now_token(user: Any, room: str) -> str:
    """A `/messages` token at the room's present, to read forward from."""
    return str((await user.messages(room, direction="b", limit=1))["start"])


async def read_new(
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
            target = in_reply_to(event)
            if event["sender"] == bot_id and target in wanted and target not in answer:
                answer[target] = event
        end = page.get("end")
        if not page["chunk"] or not isinstance(end, str) or end == token:
            return token if not isinstance(end, str) else end
        token = end


# ---------------------------------------------------------------- a profile of one asker

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


async def profile(stage: Stage, texts: Sequence[str], *, warmup: int, out: Path) -> dict[str, Any]:
    """`texts` asked one after another by one person, each waiting for its reply, under
    `py-spy record` of this process (every thread, idle ones left out) after `warmup` of
    them: where a command's CPU goes once the room's copy is warm, as in a burst."""
    server, hs, room, person = stage.server, stage.hs, stage.room, stage.people[0]
    # One asker for every command: the rate limit would otherwise drop them after 10.
    service = stage.service(rate_per_minute=10_000)
    await service.start()
    spies: list[asyncio.subprocess.Process] = []
    try:
        await hs.ping_appservice()
        token = await now_token(person, room)
        seen: dict[str, dict[str, Any]] = {}
        answer: dict[str, dict[str, Any]] = {}
        cpu_at = synapse_at = 0.0
        for n, text in enumerate(texts):
            if n == warmup:
                spies = [await _spy(os.getpid(), out), await _spy(server.pid, _synapse(out))]
                await asyncio.sleep(1.0)  # attached
                cpu_at, synapse_at = time.process_time(), cpu_seconds(server.pid)
            wanted = {await person.send_text(room, f"!search {text}")}
            while not wanted <= answer.keys():
                await asyncio.sleep(0.05)
                token = await read_new(
                    person, room, token, server.bot_user_id, wanted, seen, answer
                )
        profiled = len(texts) - warmup
        cpu_s, synapse_s = time.process_time() - cpu_at, cpu_seconds(server.pid) - synapse_at
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


# ---------------------------------------------------------------- an idle service

QUERIES = ("apt-get install fails with a broken package", "how do I mount an ntfs drive", "grub")


async def measure(store_dir: Path, collection: str, seconds: float, model: str) -> dict[str, Any]:
    cfg = offline_config(store_dir, collection, embedder={"model": model})
    rss_start = vm("VmRSS")
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    embedder = make_embedder(cfg.embedder)
    purges = PurgeLog(purge_log_path(cfg.index, cfg.base_dir))
    searcher = Searcher(store, embedder, server_name=SERVER_NAME, purges=purges)
    rss_open = vm("VmRSS")
    hits = 0
    first_ms: float | None = None
    for q in QUERIES:
        started = time.perf_counter()
        result = await searcher.search(SearchQuery.build([q], limit=5))
        first_ms = first_ms or round((time.perf_counter() - started) * 1000, 1)
        hits += len(result.hits)
    rss_searched = vm("VmRSS")
    samples: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(1.0)
        samples.append(vm("VmRSS"))
    rss_idle = vm("VmRSS")
    parts = (e5 if name == "multilingual-e5-small" else minilm for name in model.split("+"))
    unloaded = not any(part.loaded() for part in parts)
    started = time.perf_counter()
    hits_after = len((await searcher.search(SearchQuery.build([QUERIES[0]], limit=5))).hits)
    after_ms = round((time.perf_counter() - started) * 1000, 1)
    rss_after = vm("VmRSS")
    await embedder.close()
    await asyncio.to_thread(store.close)
    return {
        "rss_at_start_mib": rss_start,
        "rss_after_open_mib": rss_open,
        "rss_after_searches_mib": rss_searched,
        "rss_after_idle_mib": rss_idle,
        "rss_idle_max_mib": max(samples, default=rss_idle),
        "model_unloaded_when_idle": unloaded,
        "first_search_ms": first_ms,
        "search_after_idle_ms": after_ms,
        "search_after_idle_hits": hits_after,
        "rss_after_search_after_idle_mib": rss_after,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "searches": len(QUERIES),
        "hits": hits,
        "idle_seconds": seconds,
        "embedder_model": model,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.harness.probes", __doc__)
    p.add_argument("--store", type=Path, required=True, help="the embedded store's folder")
    p.add_argument("--collection", required=True)
    p.add_argument("--seconds", type=float, default=60.0, help="how long to idle")
    embedder_option(p)
    p.add_argument("--out", type=Path, help="write the JSON results here")
    args = p.parse_args(argv)
    result = measure(args.store, args.collection, args.seconds, args.embedder_model)
    emit(asyncio.run(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
