"""The seam under `MatrixHTTP`: one HTTP exchange, as httpx's transports are.

A `Transport` takes a `Request` (method, URL, query, headers, JSON body, time bounds) and
returns a `Response` (status, headers, raw body), or raises one of the three `TransportError`s
below when no response came. `MatrixHTTP` decides everything else (auth, retries, errors), so a
test counts or faults requests by passing a transport of its own; the product's is
`AiohttpTransport`, which owns the one `aiohttp.ClientSession` and maps aiohttp's exceptions
onto these three.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from yarl import URL

__all__ = [
    "AiohttpTransport",
    "ConnectFailed",
    "ConnectionLost",
    "Request",
    "Response",
    "TLSFailed",
    "Transport",
    "TransportError",
]


@dataclass(frozen=True)
class Request:
    """One attempt of one API call: `url` is the homeserver plus the quoted path."""

    method: str
    url: URL
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None  # sent as JSON when not None
    timeout: float = 60.0  # seconds, connect to last byte
    connect_timeout: float | None = None  # seconds for the TCP connect and TLS handshake

    @property
    def path(self) -> str:
        """The quoted request path, e.g. `/_matrix/client/v3/rooms/%21r%3Ahs/state`."""
        return self.url.raw_path


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class TransportError(Exception):
    """No response: `detail` names the cause as `<ExceptionType>: <message>`."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ConnectFailed(TransportError):
    """The server was never reached (refused, no route, no TCP connect or TLS handshake
    within the connect bound: `timed_out`)."""

    def __init__(self, detail: str, *, timed_out: bool = False) -> None:
        super().__init__(detail)
        self.timed_out = timed_out


class ConnectionLost(TransportError):
    """The exchange began and broke off: a dropped connection, a cut payload, a timeout."""


class TLSFailed(TransportError):
    """Not transient: an answer that is not TLS (a plain-HTTP port), or a bad certificate
    (`certificate`)."""

    def __init__(self, detail: str, *, certificate: bool = False) -> None:
        super().__init__(detail)
        self.certificate = certificate


class Transport(Protocol):
    async def send(self, request: Request) -> Response: ...

    async def close(self) -> None: ...


def _named(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class AiohttpTransport:
    """The product's transport: one `aiohttp.ClientSession`, made on first use (a session
    belongs to the running event loop) and again after `close`."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def send(self, request: Request) -> Response:
        # sock_connect bounds the TCP connect and the TLS handshake (not a wait for the pool).
        timeout = aiohttp.ClientTimeout(
            total=request.timeout, sock_connect=request.connect_timeout
        )
        try:
            async with self._client().request(
                request.method,
                request.url,
                params=dict(request.params),
                json=request.body,
                headers=dict(request.headers),
                timeout=timeout,
            ) as resp:
                raw = await resp.read()
                return Response(resp.status, dict(resp.headers), raw)
        except aiohttp.ClientSSLError as e:
            cert = isinstance(e, aiohttp.ClientConnectorCertificateError)
            raise TLSFailed(_named(e), certificate=cert) from e
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as e:
            timed_out = isinstance(e, aiohttp.ConnectionTimeoutError)
            raise ConnectFailed(_named(e), timed_out=timed_out) from e
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as e:
            raise ConnectionLost(_named(e)) from e

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
