"""File descriptors: a local process must not starve the service of them (issue 21 item 4).

1,100 idle connections to the open `/metrics` port used to exhaust the usual soft limit of
1,024 descriptors: no Matrix request, no store file, no answer, and asyncio logging
`socket.accept() out of system resource` on every accept. Four guards:

- `raise_nofile`: the soft `RLIMIT_NOFILE` raised to the hard limit at start (the unit sets
  `LimitNOFILE=65536`).
- `serve_capped`: the listener and the appservice port serve at most `MAX_CONNECTIONS` at once;
  one over the cap is closed at once, never queued.
- the same wrapper gives a connection `HEAD_TIMEOUT` seconds to send its first request head;
  a slow or silent client is closed (aiohttp's keep-alive timeout closes idle ones later).
- `quiet_accept_errors`: asyncio's accept error (EMFILE) is logged at most once a minute.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = [
    "HEAD_TIMEOUT",
    "MAX_CONNECTIONS",
    "CappedSite",
    "freeze_startup_heap",
    "quiet_accept_errors",
    "raise_nofile",
    "serve_capped",
]

log = logging.getLogger("muninn.service")

MAX_CONNECTIONS = 256  # open connections a port serves at once
HEAD_TIMEOUT = 10.0  # seconds a connection has to send its first request head
ACCEPT_LOG_EVERY = 60.0  # seconds between two logs of an accept error


def raise_nofile() -> tuple[int, int]:
    """Raise the soft limit of open files to the hard one; returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:  # a sandbox may refuse; the old limit still holds
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, e)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft, hard


_frozen: list[bool] = []  # the process's heap was frozen at a start


def freeze_startup_heap() -> bool:
    """Once a process, at the service's start: what is alive then (modules, models, the
    configuration) is moved out of the collector's reach (`gc.freeze`), garbage collected
    first so none is kept. A full collection otherwise walks all of it again: 75-85 ms on the
    2-core host, which landed inside a `!search` as its p99 (bench/RESULTS.md §3). False:
    frozen already (a second service in one process, as the tests start, freezes nothing)."""
    if _frozen:
        return False
    _frozen.append(True)
    gc.collect()
    gc.freeze()
    return True


@dataclass
class Gate:
    """A port's connection cap and head timeout, and what they have done: shared by the site
    and each connection's protocol (`_Guarded`), so neither reaches into the other."""

    cap: int = MAX_CONNECTIONS
    head_timeout: float = HEAD_TIMEOUT
    live: set[_Guarded] = field(default_factory=set)
    refused: int = 0  # connections closed over the cap
    timed_out: int = 0  # connections closed for a late request head


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection (its class has `__slots__`: wrapped, not patched),
    counted against the port's cap and closed if its first request head is late."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self._inner, self._gate = inner, gate
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""  # the last bytes seen, to find the head's end across reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP server's
        self._inner.connection_made(transport)
        if len(self._gate.live) >= self._gate.cap:
            self._gate.refused += 1
            transport.abort()  # the descriptor is freed now, not after a close handshake
            return
        self._gate.live.add(self)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._gate.head_timeout, self._late, transport)

    def _late(self, transport: asyncio.Transport) -> None:
        self._gate.timed_out += 1
        transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            seen = self._tail + data
            if b"\r\n\r\n" in seen:
                self._timer.cancel()
                self._timer = None
            self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return bool(self._inner.eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._gate.live.discard(self)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class CappedSite(web.BaseSite):
    """`web.TCPSite`'s job, through `loop.create_server` with a protocol factory that caps
    open connections and times out slow request heads."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        cap: int = MAX_CONNECTIONS,
        head_timeout: float = HEAD_TIMEOUT,
    ) -> None:
        super().__init__(runner)
        self._host, self._port = host, port
        self.gate = Gate(cap, head_timeout)

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None  # the runner is set up
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Guarded(server(), self.gate), self._host, self._port, reuse_address=True
        )


async def serve_capped(runner: web.AppRunner, host: str, port: int) -> CappedSite:
    """Start `runner` on host:port behind the connection cap and head timeout."""
    site = CappedSite(runner, host, port, cap=MAX_CONNECTIONS, head_timeout=HEAD_TIMEOUT)
    await site.start()
    return site


def quiet_accept_errors(
    loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.monotonic
) -> None:
    """Log asyncio's accept errors (EMFILE: `socket.accept() out of system resource`) at most
    once every `ACCEPT_LOG_EVERY` seconds, with how many were left unlogged; asyncio already
    pauses the accepting socket for a second after each."""
    previous = loop.get_exception_handler()
    state: dict[str, float] = {"last": -ACCEPT_LOG_EVERY, "quiet": 0}

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "accept" not in str(context.get("message", "")):
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = clock()
        if now - state["last"] < ACCEPT_LOG_EVERY:
            state["quiet"] += 1
            return
        log.error(
            "%s: %s (%d more since the last log); open connections are capped per port",
            context.get("message"),
            context.get("exception"),
            state["quiet"],
        )
        state["last"], state["quiet"] = now, 0

    loop.set_exception_handler(handler)
