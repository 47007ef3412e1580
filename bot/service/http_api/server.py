"""The service's loopback listener (see `bot.service.http_api`): `/metrics`, `/healthz`, and the
token-guarded `POST /_muninn/search`, `/_muninn/status` (the token or the read token) and
`/_muninn/purge` (the token only).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.config import MetricsConfig
from bot.service.http_api.token import READ_TOKEN_FILE, write_token
from bot.service.http_api.wire import (
    PURGE_PATH,
    SEARCH_PATH,
    STATUS_PATH,
    PurgeRequest,
    ResolveRoom,
    SearchRequest,
    purge_document,
)
from bot.service.limits import CappedSite, serve_capped
from bot.service.metrics import CONTENT_TYPE, ServiceMetrics
from ingest.errors import MatrixUnavailable, MuninnError, QueryError, StoreError
from ingest.index.records import Tombstone
from ingest.search.hits import SearchResult
from ingest.search.query import SearchQuery
from ingest.store import AsyncStore, Store

__all__ = ["HealthCheck", "HttpApi", "is_loopback", "store_check"]

log = logging.getLogger("muninn.service")

HEALTH_TIMEOUT = 5.0  # seconds a part has to answer /healthz
# Seconds the homeserver has to answer before a listener search (issue 36): its hits are
# confirmed against it, so without it the search fails at once, naming it, within the ~3 s
# the CLI's own search promises, instead of after the model and the revalidation's retries.
SEARCH_REACH_TIMEOUT = 2.0
MAX_BODY = 256 * 1024

# A health check returns a short detail when the part is healthy and raises when it is not.
HealthCheck = Callable[[], Awaitable[str]]
Search = Callable[[SearchQuery], Awaitable[SearchResult]]
Purge = Callable[[PurgeRequest], Awaitable[Tombstone]]
# `StoreFacts.as_json()` and the running service's own part (`service`), for `muninn status`
Status = Callable[[], Awaitable[Mapping[str, Any]]]
Handler = Callable[[web.Request], Awaitable[web.Response]]


def is_loopback(host: str | None) -> bool:
    """True for `localhost` and loopback addresses (IPv4, IPv6, IPv4-mapped IPv6)."""
    if not host:
        return False
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def store_check(store: Store) -> HealthCheck:
    """Read the active generation and count its points: the store answers, or says why not."""

    def probe(store: Store) -> str:
        store.check_space()  # rule 13c: a disk too full to write fails the store's health
        active = store.active()
        if active is None:
            return "empty (no active generation yet)"
        col = store.open(active, dense_dim=None, create=False)
        if col.damage is not None:  # rule 13a: failing until the rebuild switches in
            raise StoreError(f"damaged: {col.damage}; the next refresh rebuilds it")
        return f"{active}: {col.count()} points"

    async def check() -> str:
        return await AsyncStore(store).run(probe)

    return check


def _bearer(request: web.Request) -> str:
    """The `Authorization: Bearer` token sent, or ''."""
    header = request.headers.get("Authorization", "")
    return header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""


async def _json_body(request: web.Request) -> Any:
    """The request's JSON body; a body that is not JSON is a `QueryError` of the field "body"."""
    try:
        return json.loads(await request.read())
    except ValueError:
        raise QueryError("body", "is not JSON") from None


def _query_error(e: QueryError) -> web.Response:
    message = str(e).removeprefix(f"{e.field}: ")
    return web.json_response({"field": e.field, "message": message, "error": str(e)}, status=400)


class HttpApi:
    """The loopback listener. `start()` binds, `stop()` releases."""

    def __init__(
        self,
        cfg: MetricsConfig,
        metrics: ServiceMetrics,
        *,
        checks: Mapping[str, HealthCheck],
        search: Search,
        resolve_room: ResolveRoom,
        purge: Purge | None = None,
        token_file: Path | None = None,
        status: Status | None = None,
    ) -> None:
        """Without `token_file`, only `/metrics` and `/healthz` are served: nobody could prove
        they may search or purge."""
        if cfg.port is None:
            raise ValueError("the metrics listener needs metrics.port")
        self.host, self.port = cfg.host, cfg.port
        self.metrics = metrics
        self.checks = dict(checks)
        self._search = search
        self._resolve_room = resolve_room
        self._purge = purge
        self._status = status
        self.token_file = token_file
        # Beside it, a token that may only read (search, status): what `muninn mcp` holds.
        self.read_token_file = token_file.with_name(READ_TOKEN_FILE) if token_file else None
        self._token = b""
        self._read_token = b""
        self.app = web.Application(client_max_size=MAX_BODY)
        self.app.add_routes(
            [web.get("/metrics", self._metrics), web.get("/healthz", self._healthz)]
        )
        if token_file is not None:
            self.app.add_routes(
                [web.post(SEARCH_PATH, self._guarded("search", self._search_handler))]
            )
            if purge is not None:
                self.app.add_routes(
                    [web.post(PURGE_PATH, self._guarded("purge", self._purge_handler, True))]
                )
            if status is not None:
                self.app.add_routes(
                    [web.post(STATUS_PATH, self._guarded("status", self._status_handler))]
                )
        self._runner: web.AppRunner | None = None
        self.site: CappedSite | None = None  # capped connections, slow heads closed

    async def start(self) -> None:
        if not is_loopback(self.host):
            log.warning(
                "metrics.host %s is not a loopback address: /metrics and /healthz are reachable "
                "from the network (%s and %s answer loopback peers only)",
                self.host,
                SEARCH_PATH,
                PURGE_PATH,
            )
        if self.token_file is not None and self.read_token_file is not None:
            # On the loop: two small files and their fsyncs, once, before the listener answers.
            self._token = write_token(self.token_file).encode()
            self._read_token = write_token(self.read_token_file).encode()
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        self.site = await serve_capped(self._runner, self.host, self.port)
        log.info(
            "metrics and health on http://%s:%d%s",
            self.host,
            self.port,
            f"; search and purge for holders of {self.token_file}" if self.token_file else "",
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.token_file is not None and self._token:
            self.token_file.unlink(missing_ok=True)  # nothing answers it any more
            self._token = b""
        if self.read_token_file is not None and self._read_token:
            self.read_token_file.unlink(missing_ok=True)
            self._read_token = b""

    def _holds_token(self, request: web.Request) -> bool:
        """The request carries a listener token (either): it may read per-room detail (room
        ids, the homeserver, the reader) that the open `/metrics` and `/healthz` keep back."""
        return self._scope(request) is not None

    def _scope(self, request: web.Request) -> str | None:
        """The scope of the token sent: `write` for the listener token, `read` for the read
        token, else None (each compared in constant time)."""
        given = _bearer(request).encode("utf-8", "surrogateescape")
        write = bool(given and self._token) and hmac.compare_digest(given, self._token)
        read = bool(given and self._read_token) and hmac.compare_digest(given, self._read_token)
        return "write" if write else "read" if read else None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = self.metrics.render(detail=self._holds_token(request))
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: web.Request) -> web.Response:
        names = list(self.checks)
        outcomes = await asyncio.gather(*(self._check(self.checks[n]) for n in names))
        checks = dict(zip(names, outcomes, strict=True))
        failing = [n for n, c in checks.items() if not c["ok"]]
        if failing:
            log.warning(
                "health: failing %s", ", ".join(f"{n} ({checks[n]['detail']})" for n in failing)
            )
        if not self._holds_token(request):  # the details name the homeserver, reader, store
            checks = {n: {"ok": c["ok"]} for n, c in checks.items()}
        doc: dict[str, Any] = {"status": "failing" if failing else "ok", "checks": checks}
        if failing:
            doc["failing"] = failing
        return web.json_response(doc, status=503 if failing else 200)

    @staticmethod
    async def _check(check: HealthCheck, within: float = HEALTH_TIMEOUT) -> dict[str, Any]:
        try:
            detail = await asyncio.wait_for(check(), within)
        except TimeoutError:
            return {"ok": False, "detail": f"no answer within {within:g} s"}
        except Exception as e:  # any failure of a part is that part's health, not ours
            return {"ok": False, "detail": str(e) or type(e).__name__}
        return {"ok": True, "detail": detail}

    def _refusal(self, request: web.Request, writes: bool) -> web.Response | None:
        if not is_loopback(request.remote):
            log.warning("%s from a non-loopback peer %s refused", request.path, request.remote)
            what = "purge" if request.path == PURGE_PATH else "search"
            return web.json_response({"error": f"only loopback peers may {what}"}, status=403)
        if not is_loopback(request.url.host):
            return web.json_response({"error": "the Host must be a loopback name"}, status=403)
        given = _bearer(request)
        if not given:
            return web.json_response(
                {"error": f"send Authorization: Bearer <the token in {self.token_file}>"},
                status=401,
            )
        scope = self._scope(request)
        if scope is None:
            log.warning("%s with a wrong token refused", request.path)
            return web.json_response({"error": f"not the token in {self.token_file}"}, status=403)
        if writes and scope != "write":
            log.warning("%s with the read-only token refused", request.path)
            error = f"the read token may not {request.path.rsplit('/', 1)[-1]}: only the one in"
            return web.json_response({"error": f"{error} {self.token_file}"}, status=403)
        if request.content_type != "application/json":
            return web.json_response({"error": "send Content-Type: application/json"}, status=415)
        return None

    def _guarded(self, what: str, answer: Handler, writes: bool = False) -> Handler:
        """`answer` behind `_refusal`'s guards (`writes`: the read token is refused): a bad
        request (`QueryError`) is a 400 naming its field, any other failure of the service a
        503 (logged)."""

        async def handler(request: web.Request) -> web.Response:
            refused = self._refusal(request, writes)
            if refused is not None:
                return refused
            try:
                return await answer(request)
            except QueryError as e:
                return _query_error(e)
            except MuninnError as e:
                log.warning("%s over %s failed: %s", what, request.path, e)
                return web.json_response({"error": str(e)}, status=503)

        return handler

    async def _search_handler(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        query = await SearchRequest.parse(await _json_body(request)).query(self._resolve_room)
        if "homeserver" in self.checks:
            reached = await self._check(self.checks["homeserver"], SEARCH_REACH_TIMEOUT)
            if not reached["ok"]:
                raise MatrixUnavailable(
                    f"the homeserver is unreachable ({reached['detail']}). Hits are confirmed "
                    "against it before they are shown, so none is"
                )
        result = await self._search(query)
        elapsed = time.monotonic() - started
        self.metrics.search_latency.labels(source="api").observe(elapsed)
        log.debug("%s answered %d hits in %.0f ms", SEARCH_PATH, len(result.hits), elapsed * 1e3)
        return web.json_response(result.as_json())

    async def _purge_handler(self, request: web.Request) -> web.Response:
        assert self._purge is not None  # the route exists only with a purge
        stone = await self._purge(PurgeRequest.parse(await _json_body(request)))
        return web.json_response(purge_document(stone))

    async def _status_handler(self, request: web.Request) -> web.Response:
        """The store's half of `muninn status` (`ingest.index.facts`), read by the service,
        and what only the service knows (`service`)."""
        assert self._status is not None  # the route exists only with a status
        return web.json_response(dict(await self._status()))
