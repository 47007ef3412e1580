"""`bot.service.limits`: idle or slow local clients cannot starve the service of file descriptors
(issue 21 item 4): the open-file limit is raised, each port caps its connections and closes a
late request head, and accept errors are logged once a while, not per accept."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.demo.synapse import free_port
from bot.service import limits
from bot.service.limits import quiet_accept_errors
from tests.bot.service.http_api.listener import bare_api


def printed_by_a_fresh_interpreter(code: str) -> list[str]:
    """What `code` prints, run by a new interpreter in the repository (a process-wide setting
    of its own: the test runner's is left alone)."""
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_raise_nofile_lifts_the_soft_limit_to_the_hard_one() -> None:
    """A process started with a soft limit of 256 ends with the hard limit (in a child
    process: the test runner's own limit is left alone)."""
    code = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "from bot.service.limits import raise_nofile\n"
        "after = raise_nofile()\n"
        "print(after == resource.getrlimit(resource.RLIMIT_NOFILE), after[0] > 256)\n"
    )
    assert printed_by_a_fresh_interpreter(code) == ["True", "True"]


def test_the_unit_raises_the_open_file_limit() -> None:
    unit = Path(__file__).resolve().parents[3] / "deploy" / "muninn.service"
    assert "\nLimitNOFILE=65536\n" in unit.read_text()


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    """The server closed the connection (EOF or reset) within 5 s."""
    try:
        return await asyncio.wait_for(reader.read(), 5) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def test_listener_caps_idle_connections_and_closes_slow_heads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression (issue 21 item 4): cap + 4 idle connections and one sending half a request
    head: those over the cap are closed at once, the rest once their head is late, and
    /healthz answers again (before, every one stayed open, each holding a descriptor)."""
    monkeypatch.setattr(limits, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(limits, "HEAD_TIMEOUT", 0.5)
    port = free_port()
    api = bare_api(port)
    await api.start()
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(8 + 4):
            opened.append(await asyncio.open_connection("127.0.0.1", port))
        _, slow = opened[0]
        slow.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        await slow.drain()
        assert all(await asyncio.gather(*(closed_by_peer(r) for r, _ in opened)))
        assert api.site is not None
        gate = api.site.gate
        assert gate.refused >= 4 and gate.timed_out >= 1 and not gate.live
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/healthz") as resp,
        ):
            assert resp.status == 200
    finally:
        for _, writer in opened:
            writer.close()
        await api.stop()


async def test_accept_errors_are_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    """EMFILE on accept, 100 times in a second, is one log line; the next minute's first one
    says how many were left out. Other loop errors pass to the previous handler."""
    caplog.set_level(logging.ERROR, "muninn.service")
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    others: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda loop, context: others.append(context))
    now = [1000.0]
    try:
        quiet_accept_errors(loop, clock=lambda: now[0])
        handler = loop.get_exception_handler()
        assert handler is not None
        emfile = {
            "message": "socket.accept() out of system resource",
            "exception": OSError(24, "Too many open files"),
        }
        for _ in range(100):
            handler(loop, emfile)
        now[0] += 61
        handler(loop, emfile)
        handler(loop, {"message": "Task exception was never retrieved"})
    finally:
        loop.set_exception_handler(previous)
    lines = [r.getMessage() for r in caplog.records if r.name == "muninn.service"]
    assert len(lines) == 2 and "99 more" in lines[1]
    assert [c["message"] for c in others] == ["Task exception was never retrieved"]


def test_the_start_freezes_its_heap_once_and_keeps_no_garbage() -> None:
    """A `!search`'s p99 was a full collection walking the modules and models loaded at start
    (75-85 ms inside the command). The start's heap is frozen (a full collection walks what
    came after only), once a process; a reference cycle already garbage is collected first,
    not kept for good (in a child process: the test runner's heap is left alone)."""
    code = (
        "import gc, weakref\n"
        "import bot.service.run\n"
        "from bot.service.limits import freeze_startup_heap\n"
        "class Node: pass\n"
        "a, b = Node(), Node(); a.b, b.a = b, a\n"
        "gone = weakref.ref(a); del a, b\n"
        "walked = len(gc.get_objects())\n"
        "first, again = freeze_startup_heap(), freeze_startup_heap()\n"
        "print(first, again, gone() is None, gc.get_freeze_count() > 10_000,\n"
        "      len(gc.get_objects()) < walked // 10)\n"
    )
    assert printed_by_a_fresh_interpreter(code) == ["True", "False", "True", "True", "True"]
