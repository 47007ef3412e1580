"""`muninn mcp` against `muninn search --json`: the same searches, each way, and the server's
idle memory.

    python -m bench.mcp [--searches 20] [--unload 20] [--out FILE]

A private Synapse (`bot.demo.synapse.start_synapse`) holds the demo community, seeded as
`muninn demo` seeds it, indexed by `muninn refresh` with the default embedder. Then each of the
demo script's `!search` questions, in turn, up to `--searches`:
- cli: `muninn --config C search TEXT --json` in a child process, spawn to exit: what a shell,
  or an agent that runs the CLI, pays for one search (Python's start and the model's load
  included);
- mcp: the tool call `search` with the same text to one `muninn mcp` child the SDK's stdio
  client started, request to answer: what an agent host pays once the server runs. Its start
  (spawn to initialized) and its first call (the model's load) are reported apart.
Both revalidate every hit against the same homeserver. Then the reads an agent adds (issue
49), each question asked three ways in turn, the order rotating so that load drifts alike:
the plain `search`, with `context: 2` (each hit's conversation read from the homeserver), and
with `match: "words"` (the lexical list alone); their p50s and ratios to the plain one (the
acceptance: `context: 2` ≤ 1.5×, `words` ≤ 1×). Then the server's VmRSS idle after its last
call, and again once the embedder's idle unload (`embedder.unload_after_seconds`, here
`--unload` seconds) has run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench import arguments, emit, machine, stats
from bot.demo.community import load, seed
from bot.demo.homeserver import Homeserver
from bot.demo.run import SERVER_NAME, demo_config_doc, demo_registration
from bot.demo.synapse import SynapseServer, start_synapse

PROJECT = Path(__file__).resolve().parents[1]


def muninn(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli.main", "--config", str(config), *args]


def questions(count: int) -> list[str]:
    """The demo script's `!search` texts, cycled to `count`."""
    texts = [
        step.say.removeprefix("!search ")
        for step in load().script
        if step.say and step.say.startswith("!search ")
    ]
    unique = list(dict.fromkeys(texts))
    return [unique[i % len(unique)] for i in range(count)]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def server_pid() -> int:
    """The `muninn mcp` child of this process (the stdio client hides its process)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and cmdline.endswith(b"mcp\0"):
            return int(stat.parent.name)
    raise RuntimeError("no muninn mcp child found")


def cli_searches(config: Path, texts: Sequence[str]) -> list[float]:
    out = []
    for text in texts:
        started = time.perf_counter()
        run = subprocess.run(
            muninn(config, "search", text, "--json"), cwd=PROJECT, capture_output=True
        )
        out.append(time.perf_counter() - started)
        assert run.returncode == 0, run.stderr.decode()
    return out


async def mcp_searches(config: Path, texts: Sequence[str], unload: float) -> dict[str, Any]:
    cmd = muninn(config, "mcp")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], cwd=PROJECT)
    started = time.perf_counter()
    async with stdio_client(params) as streams, ClientSession(*streams) as session:
        await session.initialize()
        start_s = time.perf_counter() - started
        samples = []
        for text in texts:
            t0 = time.perf_counter()
            result = await session.call_tool("search", {"query": text})
            samples.append(time.perf_counter() - t0)
            assert not result.is_error, result.content
        reads = await read_ways(session, texts)
        pid = server_pid()
        await asyncio.sleep(2)
        idle = rss_mib(pid)
        await asyncio.sleep(unload + 5)
        unloaded = rss_mib(pid)
    return {
        "start_s": round(start_s, 2),
        "first_call_ms": round(samples[0] * 1000, 1),
        "calls": samples[1:],
        "reads": reads,
        "idle_rss_mib": idle,
        "idle_rss_after_unload_mib": unloaded,
    }


# The reads an agent adds (issue 49), each beside the plain search it is compared with.
WAYS: dict[str, dict[str, Any]] = {
    "plain": {},
    "context_2": {"context": 2},
    "match_words": {"match": "words"},
}


async def read_ways(session: ClientSession, texts: Sequence[str]) -> dict[str, list[float]]:
    """Each text asked each way (`WAYS`), the order rotating a question; seconds a call."""
    out: dict[str, list[float]] = {way: [] for way in WAYS}
    ways = list(WAYS)
    for i, text in enumerate(texts):
        for way in ways[i % len(ways) :] + ways[: i % len(ways)]:
            t0 = time.perf_counter()
            result = await session.call_tool("search", {"query": text, **WAYS[way]})
            out[way].append(time.perf_counter() - t0)
            assert not result.is_error, result.content
    return out


def ways_report(reads: dict[str, list[float]]) -> dict[str, Any]:
    """Each way's stats, and its p50 over the plain search's."""
    shown = {way: stats(samples) for way, samples in reads.items()}
    plain = float(shown["plain"]["p50_ms"])
    for row in shown.values():
        row["over_plain_p50"] = round(float(row["p50_ms"]) / plain, 3)
    return shown


def indexed(folder: Path, unload: float) -> tuple[Path, SynapseServer]:
    """The demo community on a private Synapse, indexed; the config file for the CLI."""
    community = load()
    server = start_synapse(
        folder / "synapse",
        server_name=SERVER_NAME,
        registration=demo_registration(SERVER_NAME, list(community.people)),
    )
    try:
        doc = demo_config_doc(server, folder)
        doc["embedder"]["unload_after_seconds"] = unload
        del doc["metrics"]  # nothing runs beside: the CLI and the server open the store
        config = folder / "config.yaml"
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        asyncio.run(seeded(server))
        run = subprocess.run(muninn(config, "refresh"), cwd=PROJECT, capture_output=True)
        assert run.returncode == 0, run.stderr.decode()
    except BaseException:
        server.stop()
        raise
    return config, server


async def seeded(server: SynapseServer) -> None:
    async with aiohttp.ClientSession() as http:
        await seed(Homeserver(server, http), load(), "bench-password")


def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = questions(args.searches)
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        config, server = indexed(Path(tmp), args.unload)
        try:
            cli = cli_searches(config, texts)
            mcp = asyncio.run(mcp_searches(config, texts, args.unload))
        finally:
            server.stop()
    calls, reads = mcp.pop("calls"), mcp.pop("reads")
    cli_stats, mcp_stats = stats(cli), stats(calls)
    return {
        "machine": machine(),
        "searches": len(texts),
        "cli_search_json": cli_stats,
        "mcp_search": {**mcp_stats, **mcp},
        "mcp_over_cli_p50": round(float(mcp_stats["p50_ms"]) / float(cli_stats["p50_ms"]), 3),
        "mcp_search_reads": ways_report(reads),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.mcp", __doc__)
    p.add_argument("--searches", type=int, default=20)
    p.add_argument("--unload", type=float, default=20.0, help="embedder idle unload, seconds")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    emit(run(args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
