"""`bench.load --profile N`: one asker's commands one after another, sampled by py-spy in the
service's process and in Synapse; each function's inclusive CPU ms a command."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.load_probes import cpu_seconds, now_token, read_new
from ingest.embed import Embedder

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
