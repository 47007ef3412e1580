"""`muninn mcp`'s stdio transport (`bot.mcp.stdio`, issue 46), driven by hand on raw pipes:
what the reference SDK's client never sends (a line that is no JSON-RPC message, a line of
megabytes) and never does (send without reading). No homeserver and no index are needed:
`initialize`, `ping` and `tools/list` read neither.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.mcp.stdio import MAX_IN_FLIGHT, MAX_LINE
from tests.indexing import PROJECT, write_config

MIB = 1024 * 1024
KIB = 1024
READ_LIMIT = 256 * KIB  # the client's reader: it buffers at most twice this, then reads no more
PIPE = 64 * KIB  # a Linux pipe's buffer, and asyncio's write buffer before `drain` waits


def config(folder: Path) -> Path:
    doc = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "hs"},
        "reader": {"user_id": "@reader:hs", "access_token": "syt_not_a_real_one"},
        "index": {"store": {"path": str(folder / "qdrant")}},
        "embedder": {"model": "minilm"},
    }
    return write_config(folder / "config.yaml", doc)


@asynccontextmanager
async def raw_mcp(folder: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`muninn mcp` on pipes, initialized; killed at the end."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli.main",
        "--config",
        str(config(folder)),
        "mcp",
        cwd=PROJECT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=READ_LIMIT,
    )
    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        await send(proc, request(0, "initialize", hello))
        assert (await answer(proc))["id"] == 0
        await send(proc, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def request(rid: int, method: str, params: dict[str, Any] | None = None, pad: int = 0) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body).encode().ljust(pad) + b"\n"


async def send(proc: asyncio.subprocess.Process, line: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line)
    await proc.stdin.drain()


async def answer(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert line, "muninn mcp closed stdout"
    doc = json.loads(line)
    assert isinstance(doc, dict)
    return doc


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_mcp_answers_what_it_cannot_read_and_serves_on(tmp_path: Path) -> None:
    """A line that is not JSON is answered -32700 Parse error, JSON that is no JSON-RPC message
    -32600 Invalid Request, a line over the bound -32600 without being held, each with id null
    (the request went unanswered: a client waited forever); the next request is answered."""
    async with raw_mcp(tmp_path) as proc:
        await send(proc, b"this is not json {\n")
        parse = await answer(proc)
        await send(proc, b'{"jsonrpc": "2.0", "id": 7}\n')
        invalid = await answer(proc)
        await send(proc, b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "x": "' + b"a" * MAX_LINE)
        await send(proc, b'"}\n')
        too_long = await answer(proc)
        await send(proc, request(9, "ping"))
        pong = await answer(proc)
    assert parse == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert (invalid["id"], invalid["error"]["code"]) == (None, -32600)
    assert (too_long["id"], too_long["error"]["code"]) == (None, -32600)
    assert "MiB" in too_long["error"]["message"]
    assert pong == {"jsonrpc": "2.0", "id": 9, "result": {}}


async def test_mcp_stops_reading_a_client_that_stops_reading(tmp_path: Path) -> None:
    """A client that sends 8 MiB of `tools/list` without reading an answer: the server reads
    no more than its bounds (a line buffer, MAX_IN_FLIGHT requests) and then waits, so the
    client's own pipe fills (it read on and held every answer: 132 → 453 MiB). Once the client
    reads, every request it sent is answered."""
    async with raw_mcp(tmp_path) as proc:
        await send(proc, request(1, "tools/list"))
        size = len(json.dumps(await answer(proc)))  # the tools are built: the flood follows
        before = rss_kib(proc.pid)
        sent = 0
        try:
            for rid in range(2, 2 + 2048):
                await asyncio.wait_for(send(proc, request(rid, "tools/list", pad=4096)), 5)
                sent += 1
        except TimeoutError:
            sent += 1  # its bytes are in the pipe's buffer: it is read once the client reads
        grown = rss_kib(proc.pid) - before
        ids = {(await answer(proc))["id"] for _ in range(sent)}
    assert sent < 2048, "the server read every request while nobody read an answer"
    # What it may have read: its line buffer (twice a line's bound), the requests in flight,
    # and those answered into the client's buffer and the stdout pipe; the rest waits in the
    # stdin pipe and the client's write buffer.
    answered = (2 * READ_LIMIT + PIPE) // size + 1
    assert sent * 4096 <= 2 * MAX_LINE + (MAX_IN_FLIGHT + answered) * 4096 + 2 * PIPE, sent
    assert grown < 32 * KIB, f"RSS grew {grown} KiB"
    assert ids == set(range(2, 2 + sent))
