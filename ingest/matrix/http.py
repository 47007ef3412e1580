"""The one request layer to the client-server API: paths, auth, retries, errors.

`endpoint` turns a `mautrix.api.Path` into the quoted path every client of the homeserver in
this project uses (Muninn's reader and bot, and the demo's people). `MatrixHTTP` sends it
through its transport (`ingest.matrix.transport`, one aiohttp session unless a test passes
another): it authenticates (adding `?user_id=` in appservice mode), retries 429 (for as long as the
server asks, capped) and 5xx or connection errors (backing off), and maps every other failure
onto `ingest.errors`.

Why not mautrix's `HTTPAPI`: its retry policy is not this one (it sleeps a 429's full
`retry_after_ms`, retries a fixed count on any `ClientError`) and its errors are keyed by
errcode, while every caller of Muninn's reader catches `ingest.errors` by HTTP status and
reads a message that names the refused token. The paths, errcodes and event types are
mautrix's.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mautrix.api import Path, PathBuilder
from mautrix.errors import MMissingToken, MUnknownToken
from yarl import URL

from ingest.errors import (
    MatrixAuthError,
    MatrixError,
    MatrixForbidden,
    MatrixNotFound,
    MatrixUnavailable,
)
from ingest.matrix.transport import (
    AiohttpTransport,
    ConnectFailed,
    ConnectionLost,
    Request,
    TLSFailed,
    Transport,
)
from ingest.types import UserID

__all__ = [
    "JSONDict",
    "MatrixHTTP",
    "Path",
    "Query",
    "ReaderMode",
    "Retry",
    "endpoint",
    "refused_token_fix",
]

log = logging.getLogger("muninn.matrix")

JSONDict = dict[str, Any]
Query = Mapping[str, str | int]

_TOKEN_ERRCODES = {MUnknownToken.errcode, MMissingToken.errcode}

# Seconds for the TCP connect and TLS handshake of one attempt: a healthy homeserver needs
# well under one, even across an ocean; a port that never completes the handshake is named.
CONNECT_TIMEOUT = 5.0


def endpoint(path: PathBuilder) -> str:
    """The request path of a `mautrix.api.Path`, e.g. `endpoint(Path.v3.rooms[room_id].state)`.

    Every `[segment]` is quoted whole: room ids, event ids and aliases carry '!', '$', '#' and
    ':', and none may pass unquoted.
    """
    return f"/{path}"


class ReaderMode(enum.StrEnum):
    CLIENT = "client"
    APPSERVICE = "appservice"


@dataclass(frozen=True)
class Retry:
    """How hard one request tries before it raises `MatrixUnavailable`."""

    attempts: int = 5  # tries per request, the first included; 429, 5xx and connection errors
    backoff: float = 0.5  # seconds before the second try, doubling each time
    max_backoff: float = 30.0  # seconds, the cap of that doubling
    max_retry_after: float = 120.0  # seconds; a longer 429 retry_after_ms is waited only this long
    # Tries when the server was never reached (refused, or no TCP connect and TLS handshake
    # within the connect bound); None: `attempts`. The CLI gives up sooner than the service.
    connect_attempts: int | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1 or (self.connect_attempts is not None and self.connect_attempts < 1):
            raise ValueError(f"Retry attempts must be at least 1, got {self}")
        if min(self.backoff, self.max_backoff, self.max_retry_after) < 0:
            raise ValueError("Retry delays must not be negative")


@dataclass(frozen=True)
class _Retryable:
    """A failed attempt worth another try: why, and how long the server asked us to wait."""

    reason: str
    wait: float | None = None
    connecting: bool = False  # the server was never reached (`Retry.connect_attempts`)
    status: int | None = None  # the HTTP status answered, if any
    errcode: str | None = None


class MatrixHTTP:
    """One identity's requests to the homeserver.

    Args:
        homeserver: client-server API base URL, e.g. `http://127.0.0.1:8008`.
        token: the access token (client mode) or the as_token (appservice mode).
        user_id: whom the token acts as (in appservice mode, the bot user).
        mode: `client` or `appservice`.
        token_name: how errors name the token, e.g. `as_token in registration.yaml`.
        token_fix: what an operator does when the homeserver refuses the token (said after
            the error); by default the mode's usual cause and fix.
        retry: the retry bound for 429, 5xx and connection errors.
        timeout: seconds for one HTTP attempt, connect to last byte.
        transport: what sends each attempt (`ingest.matrix.transport`); by default one
            `aiohttp` session. Tests pass their own to count or fault requests.

    `connect_timeout` bounds the TCP connect and the TLS handshake of an attempt (default
    `CONNECT_TIMEOUT`): an `https://` URL to a port that speaks plain HTTP otherwise waits out
    the handshake (Synapse holds the connection open: 60 s a try, silently).
    """

    def __init__(
        self,
        homeserver: str,
        token: str,
        user_id: str,
        mode: ReaderMode | str = ReaderMode.CLIENT,
        *,
        token_name: str | None = None,
        token_fix: str | None = None,
        retry: Retry | None = None,
        timeout: float = 60.0,
        transport: Transport | None = None,
    ) -> None:
        self.homeserver = homeserver.rstrip("/")
        self.user_id = UserID(user_id)
        self.mode = ReaderMode(mode)
        self.retry = retry or Retry()
        self.timeout = timeout
        self.connect_timeout: float | None = CONNECT_TIMEOUT
        self._token = token
        default_name = (
            "reader.access_token"
            if self.mode is ReaderMode.CLIENT
            else "as_token in the appservice registration"
        )
        self.token_name = token_name or default_name
        self.token_fix = token_fix or refused_token_fix(self.mode, self.user_id)
        self.transport: Transport = transport or AiohttpTransport()

    async def close(self) -> None:
        await self.transport.close()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        attempts: int | None = None,
    ) -> Any:
        """One API call with retries; returns the decoded JSON body of a 200.

        `path` is already quoted (build it with `endpoint`). 429 waits `retry_after_ms`; 5xx and
        connection errors back off exponentially; both count against `retry.attempts`, or
        `attempts` for this call (1: the caller repeats it itself, after checks of its own).
        """
        params = {k: str(v) for k, v in (query or {}).items()}
        if self.mode is ReaderMode.APPSERVICE:
            params["user_id"] = self.user_id
        last = _Retryable("no attempt made")
        attempts = self.retry.attempts if attempts is None else max(1, attempts)
        for attempt in range(1, attempts + 1):
            outcome = await self._attempt(method, path, params, body)
            if not isinstance(outcome, _Retryable):
                return outcome
            last = outcome
            if outcome.connecting and self.retry.connect_attempts is not None:
                attempts = min(attempts, self.retry.connect_attempts)
            if attempt >= attempts:
                break
            delay = outcome.wait if outcome.wait is not None else self._backoff(attempt)
            log.warning("%s %s: %s; retry %d in %.2fs", method, path, last.reason, attempt, delay)
            await asyncio.sleep(delay)
        raise MatrixUnavailable(
            f"{method} {path} failed {attempt} time(s) on {self.homeserver}: {last.reason}",
            status=last.status,
            errcode=last.errcode,
        )

    async def _attempt(
        self, method: str, path: str, params: dict[str, str], body: Any
    ) -> Any | _Retryable:
        """One HTTP exchange: the JSON of a 200, a `_Retryable`, or a raised `MatrixError`."""
        request = Request(
            method,
            URL(self.homeserver + path, encoded=True),
            params,
            {"Authorization": f"Bearer {self._token}"},
            body,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
        )
        try:
            resp = await self.transport.send(request)
        except TLSFailed as e:
            # Not transient: an answer that is not TLS (a plain-HTTP port) or a bad certificate.
            hint = "" if e.certificate else _scheme_hint(self.homeserver)
            where = f"{method} {path} on {self.homeserver}"
            raise MatrixUnavailable(f"{where}: {e.detail}{hint}") from e
        except ConnectFailed as e:
            reason = f"cannot connect: {e.detail}"
            if e.timed_out:
                reason += f" (no connection within {self.connect_timeout:g} s)"
            return _Retryable(reason + _scheme_hint(self.homeserver), connecting=True)
        except ConnectionLost as e:
            return _Retryable(f"connection error: {e.detail}")
        status, raw = resp.status, resp.body
        retry_after = next(
            (v for k, v in resp.headers.items() if k.lower() == "retry-after"), None
        )
        payload = _decode(raw)
        if status == 200:
            return payload
        errcode = payload.get("errcode") if isinstance(payload, dict) else None
        errcode = errcode if isinstance(errcode, str) else None
        if status == 429:
            wait = self._retry_after(payload, retry_after)
            return _Retryable("429 rate limited", wait, status=status, errcode=errcode)
        if status >= 500:
            return _Retryable(f"{status} {_describe(payload)}", status=status, errcode=errcode)
        raise self._error(method, path, status, payload)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.retry.backoff * 2 ** (attempt - 1), self.retry.max_backoff))

    def _retry_after(self, payload: Any, header: str | None) -> float | None:
        """Seconds the server asked for: body `retry_after_ms`, else a `Retry-After` header."""
        wait: float | None = None
        ms = payload.get("retry_after_ms") if isinstance(payload, dict) else None
        if isinstance(ms, int | float) and ms >= 0:
            wait = ms / 1000
        elif header is not None and (text := header.strip()).isascii() and text.isdigit():
            # ASCII digits only: `str.isdigit` takes `²`, which `float` refuses.
            wait = float(text)
        return None if wait is None else min(wait, self.retry.max_retry_after)

    def _error(self, method: str, path: str, status: int, payload: Any) -> MatrixError:
        errcode = payload.get("errcode") if isinstance(payload, dict) else None
        where = f"{method} {path} -> {status} {_describe(payload)}"
        if status == 401 or (status == 403 and errcode in _TOKEN_ERRCODES):
            return MatrixAuthError(
                f"the homeserver {self.homeserver} refused {self.token_name} "
                f"(acting as {self.user_id}): {where}. {self.token_fix}",
                status=status,
                errcode=errcode,
            )
        kind = {403: MatrixForbidden, 404: MatrixNotFound}.get(status, MatrixError)
        return kind(where, status=status, errcode=errcode)

    async def _get_object(self, path: str, query: Query | None = None) -> JSONDict:
        payload = await self._request("GET", path, query=query)
        if not isinstance(payload, dict):
            raise MatrixError(f"GET {path}: expected a JSON object, got {type(payload).__name__}")
        return payload


def refused_token_fix(mode: ReaderMode, user_id: str, registration: str | None = None) -> str:
    """What an operator does about a token the homeserver refuses (401, `M_UNKNOWN_TOKEN`):
    in client mode the reader's token was logged out or mistyped; in appservice mode Synapse
    holds another registration than Muninn's, which `muninn generate-registration --force`
    leaves until Synapse restarts (it reads `app_service_config_files` only at start)."""
    if mode is ReaderMode.CLIENT:
        return (
            f"Log in as {user_id} again (or mint a token for it) and put the new access token "
            "in reader.access_token (or reader.access_token_file)"
        )
    where = registration or "Muninn's registration file"
    return (
        "The homeserver still has an older registration than Muninn's (as after `muninn "
        f"generate-registration --force`): restart Synapse so that it reads {where}, or point "
        f"app_service_config_files in its homeserver.yaml at {where} and restart it"
    )


def _scheme_hint(homeserver: str) -> str:
    """What a failed connect to an `https://` URL most likely means, said where it happens."""
    if not homeserver.startswith("https://"):
        return ""
    plain = "http://" + homeserver.removeprefix("https://")
    return (
        f"; TLS to a port that speaks plain HTTP? If the homeserver serves plain HTTP there "
        f"(Synapse's own listener usually does), set homeserver.url: {plain}"
    )


def _decode(raw: bytes) -> Any:
    """JSON if it is JSON; a proxy's HTML error page becomes {"error": <its start>}."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return {"error": raw[:200].decode("utf-8", "replace")}


def _describe(payload: Any) -> str:
    if isinstance(payload, dict) and ("errcode" in payload or "error" in payload):
        return f"{payload.get('errcode', '?')}: {payload.get('error', '')}".strip()
    return ""
