"""Transports for faults a real homeserver cannot produce on demand, and for counting requests.

`MatrixHTTP` takes a transport (`ingest.matrix.transport`): `Scripted` answers from a script
(statuses, headers, bodies, dropped connections) with no server at all, `Recorder` passes every
request to the real one and remembers it. `MockedTransport` (aioresponses) stays for what is
aiohttp's own: the default transport's mapping of aiohttp's exceptions, and the demo's clients.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
from aioresponses import aioresponses

from ingest.matrix.transport import AiohttpTransport, Request, Response, Transport, TransportError

__all__ = ["MockedTransport", "Outcome", "Recorder", "Scripted", "answer", "calls"]


def answer(
    status: int = 200,
    payload: Any = None,
    *,
    body: bytes | str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A response as a homeserver (or a proxy before it) sends one: JSON `payload` or a raw
    `body`."""
    raw = body.encode() if isinstance(body, str) else body
    if raw is None:
        raw = json.dumps({} if payload is None else payload).encode()
    return Response(status, headers or {}, raw)


Outcome = Response | TransportError


class Scripted:
    """Answers the requests in turn from `script` (a `Response`, or a `TransportError` raised
    as a dropped or refused connection); the last outcome repeats when `repeat`."""

    def __init__(self, *script: Outcome, repeat: bool = False) -> None:
        self._script = list(script)
        self._repeat = repeat
        self.requests: list[Request] = []
        self.closed = False

    async def send(self, request: Request) -> Response:
        self.requests.append(request)
        if not self._script:
            raise AssertionError(f"no scripted answer left for {request.method} {request.url}")
        last = self._repeat and len(self._script) == 1
        outcome = self._script[0] if last else self._script.pop(0)
        if isinstance(outcome, TransportError):
            raise outcome
        return outcome

    async def close(self) -> None:
        self.closed = True


class Recorder:
    """The real transport (by default the product's), remembering every request it sends;
    `fault(request)` may answer one instead (a `Response`, or a `TransportError` raised)."""

    def __init__(
        self,
        inner: Transport | None = None,
        fault: Callable[[Request], Outcome | None] | None = None,
    ) -> None:
        self._inner = inner or AiohttpTransport()
        self.fault = fault
        self.requests: list[Request] = []

    async def send(self, request: Request) -> Response:
        self.requests.append(request)
        faulted = self.fault(request) if self.fault is not None else None
        if isinstance(faulted, TransportError):
            raise faulted
        if faulted is not None:
            return faulted
        return await self._inner.send(request)

    async def close(self) -> None:
        await self._inner.close()


class CompatResponse(aiohttp.ClientResponse):
    """aioresponses 0.7.9 does not pass aiohttp 3.14's new `stream_writer`; give it a stub."""

    def __init__(self, method: str, url: Any, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", SimpleNamespace(output_size=0))
        super().__init__(method, url, **kwargs)


class MockedTransport(aioresponses):
    """aioresponses with a response class this aiohttp accepts."""

    def add(self, url: Any, method: str = "GET", *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("response_class", CompatResponse)
        super().add(url, method, *args, **kwargs)


def calls(mocked: aioresponses) -> int:
    """How many requests went through the mocked transport."""
    return sum(len(v) for v in mocked.requests.values())
