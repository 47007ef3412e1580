"""The service's loopback listener: `/metrics`, `/healthz`, `POST /_muninn/search` and `/purge`.

Served by `muninn run` on `metrics.host:metrics.port` (loopback by default; off without a port).

- `GET /metrics`: the Prometheus text format (`bot.metrics`).
- `GET /healthz`: 200 `{"status": "ok", "checks": {...}}` when every part answers (the service
  loop, the store, the homeserver); 503 `{"status": "failing", "failing": [parts], ...}`.
- `POST /_muninn/search`: JSON `{texts, room_ids?, senders?, after?, before?, limit?}` (times in
  ms; rooms by id or alias) → exactly `SearchResult.as_json()` (docs/ARCHITECTURE.md §4.3),
  through the service's own read path. A bad request is 400 `{"field", "message", "error"}`
  naming the field. Only loopback peers are answered, with a loopback `Host` (no DNS
  rebinding) and a JSON content type (no cross-site "simple" POST): the embedded store is one
  process per path, and this is how `muninn search` reaches it while `muninn run` holds it
  (`post_search`, `service_url`).
- `POST /_muninn/purge`: JSON `{room_id, from_ts, to_ts}` (ms; the room by id or alias) →
  `{room_id, from_ts, to_ts, key}`, the document `muninn purge --json` prints. The service's own
  writer records the tombstone (`Writer.add_tombstone`) and wakes the room's refresh, which
  applies it within seconds. Same guards and 400s as search; `muninn purge` falls back to it
  (`post_purge`) exactly as `muninn search` does.

Who may search and purge: `/metrics` and `/healthz` are open, but the search and purge
endpoints answer every room with no asker's visibility and write permanent tombstones, so they
also require `Authorization: Bearer <token>`, the token the service writes at start into
`<store path>/LISTENER_TOKEN` (mode 0600, in the 0700 store directory): only the service's own
user (and root) can read it, whatever local user or process reaches the port. A missing token
is 401, a wrong one 403 (compared in constant time). With a Qdrant server store there is no
store path and no reason for the endpoints (`muninn search`/`purge` open the server store
themselves): they are not served.

A bind address that is not loopback is allowed (a Prometheus scraping from another host) but
warned about; the search and purge endpoints still answer loopback peers only.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bot.metrics import CONTENT_TYPE, ServiceMetrics
from ingest.config import Config, MetricsConfig
from ingest.errors import MuninnError, QueryError, StoreError, StoreUnavailable
from ingest.records import Tombstone
from ingest.search import DEFAULT_LIMIT, Hit, SearchQuery, SearchResult
from ingest.store import Store, embedded_path

__all__ = [
    "MAX_IDS",
    "MAX_TS",
    "PURGE_PATH",
    "SEARCH_PATH",
    "TOKEN_FILE",
    "HealthCheck",
    "HttpApi",
    "PurgeRequest",
    "SearchRequest",
    "is_loopback",
    "post_purge",
    "post_search",
    "purge_document",
    "read_token",
    "result_from_json",
    "service_url",
    "store_check",
    "token_path",
    "write_token",
]

log = logging.getLogger("muninn.http")

SEARCH_PATH = "/_muninn/search"
PURGE_PATH = "/_muninn/purge"
HEALTH_TIMEOUT = 5.0  # seconds a part has to answer /healthz
MAX_BODY = 256 * 1024
CLIENT_TIMEOUT = 120.0
TOKEN_FILE = "LISTENER_TOKEN"
MAX_IDS = 100  # room_ids or senders in one search
# Times are ms in [0, 2^53): a larger int is stored as a float, and a tombstone keyed by it
# would never match its own key again (re-applied on every pass).
MAX_TS = 2**53

# A health check returns a short detail when the part is healthy and raises when it is not.
HealthCheck = Callable[[], Awaitable[str]]
Search = Callable[[SearchQuery], Awaitable[SearchResult]]
ResolveRoom = Callable[[str], Awaitable[str]]
Purge = Callable[["PurgeRequest"], Awaitable[Tombstone]]


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

    def probe() -> str:
        active = store.active()
        if active is None:
            return "empty (no active generation yet)"
        points = store.open(active, dense_dim=None, create=False).count()
        return f"{active}: {points} points"

    async def check() -> str:
        return await asyncio.to_thread(probe)

    return check


# ---------------------------------------------------------------- the token


def token_path(cfg: Config) -> Path | None:
    """Where the service keeps its listener token: in the embedded store's 0700 directory.
    None with a server store (no search or purge endpoint then)."""
    store = embedded_path(cfg.index, cfg.base_dir)
    return store / TOKEN_FILE if store is not None else None


def write_token(path: Path) -> str:
    """A fresh random token, written 0600 (never readable by others, not even for an instant)
    and swapped in atomically: a restart retires the old one."""
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, f"{token}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token


def read_token(path: Path) -> str:
    """The running service's token, or a StoreUnavailable naming the file and who may read it."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise StoreUnavailable(
            f"cannot read the service's listener token {path}: {e.strerror or e}. Only the "
            "service's own user (or root) may search or purge through the running service: "
            "run `muninn` as that user"
        ) from None
    if not token:
        raise StoreUnavailable(f"the listener token {path} is empty: is `muninn run` running?")
    return token


# ---------------------------------------------------------------- the search request


def _known_fields(body: Any, fields: Sequence[str]) -> None:
    """A JSON object of only these fields, or a QueryError naming the first stranger."""
    if not isinstance(body, dict):
        raise QueryError("body", "must be a JSON object")
    for key in body:
        if key not in fields:
            raise QueryError(str(key), f"is not a known field (known: {', '.join(fields)})")


@dataclass(frozen=True)
class SearchRequest:
    """The JSON body of `POST /_muninn/search`, type-checked; `build` validates the rest."""

    texts: list[str]
    room_ids: list[str] | None
    senders: list[str] | None
    after: int | None
    before: int | None
    limit: int

    FIELDS = ("texts", "room_ids", "senders", "after", "before", "limit")

    @classmethod
    def parse(cls, body: Any) -> SearchRequest:
        _known_fields(body, cls.FIELDS)
        limit = body.get("limit", DEFAULT_LIMIT)
        if not _is_int(limit):
            raise QueryError("limit", "must be an integer")
        return cls(
            texts=_strings(body, "texts", required=True) or [],
            room_ids=_strings(body, "room_ids", most=MAX_IDS),
            senders=_strings(body, "senders", most=MAX_IDS),
            after=_time(body, "after"),
            before=_time(body, "before"),
            limit=limit,
        )

    async def query(self, resolve_room: ResolveRoom) -> SearchQuery:
        rooms = [await resolve_room(r) for r in self.room_ids] if self.room_ids else None
        return SearchQuery.build(
            self.texts,
            room_ids=rooms,
            senders=self.senders,
            after_ts=self.after,
            before_ts=self.before,
            limit=self.limit,
        )


@dataclass(frozen=True)
class PurgeRequest:
    """The JSON body of `POST /_muninn/purge`: a room (id or alias) and a range in ms."""

    room_id: str
    from_ts: int
    to_ts: int

    FIELDS = ("room_id", "from_ts", "to_ts")

    @classmethod
    def parse(cls, body: Any) -> PurgeRequest:
        _known_fields(body, cls.FIELDS)
        room = body.get("room_id")
        if room is None:
            raise QueryError("room_id", "is required")
        if not isinstance(room, str) or not room.startswith(("!", "#")):
            raise QueryError("room_id", "must be a room id (!…) or an alias (#…)")
        stamps: list[int] = []
        for key in ("from_ts", "to_ts"):
            value = _time(body, key)
            if value is None:
                raise QueryError(key, "is required")
            stamps.append(value)
        from_ts, to_ts = stamps
        if to_ts < from_ts:
            raise QueryError("to_ts", "is before from_ts")
        return cls(room_id=room, from_ts=from_ts, to_ts=to_ts)


def purge_document(stone: Tombstone) -> dict[str, Any]:
    """What `muninn purge --json` prints, and what `POST /_muninn/purge` answers."""
    return {
        "room_id": stone.room_id,
        "from_ts": stone.from_ts,
        "to_ts": stone.to_ts,
        "key": stone.key,
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(
    body: Mapping[str, Any], key: str, *, required: bool = False, most: int | None = None
) -> list[str] | None:
    value = body.get(key)
    if value is None:
        if required:
            raise QueryError(key, "is required")
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise QueryError(key, "must be a list of strings")
    if most is not None and len(value) > most:
        raise QueryError(key, f"give at most {most}, got {len(value)}")
    return list(value)


def _time(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise QueryError(key, "must be a time in milliseconds since the epoch (an integer)")
    if not 0 <= value < MAX_TS:
        raise QueryError(key, f"must be in [0, 2^53) milliseconds, got {value}")
    return int(value)


def _query_error(e: QueryError) -> web.Response:
    message = str(e).removeprefix(f"{e.field}: ")
    return web.json_response({"field": e.field, "message": message, "error": str(e)}, status=400)


# ---------------------------------------------------------------- the listener


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
        self.token_file = token_file
        self._token = b""
        self.app = web.Application(client_max_size=MAX_BODY)
        self.app.add_routes(
            [web.get("/metrics", self._metrics), web.get("/healthz", self._healthz)]
        )
        if token_file is not None:
            self.app.add_routes([web.post(SEARCH_PATH, self._search_handler)])
            if purge is not None:
                self.app.add_routes([web.post(PURGE_PATH, self._purge_handler)])
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        if not is_loopback(self.host):
            log.warning(
                "metrics.host %s is not a loopback address: /metrics and /healthz are reachable "
                "from the network (%s and %s answer loopback peers only)",
                self.host,
                SEARCH_PATH,
                PURGE_PATH,
            )
        if self.token_file is not None:
            token = await asyncio.to_thread(write_token, self.token_file)
            self._token = token.encode()
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
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

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: web.Request) -> web.Response:
        names = list(self.checks)
        outcomes = await asyncio.gather(*(self._check(self.checks[n]) for n in names))
        checks = dict(zip(names, outcomes, strict=True))
        failing = [n for n, c in checks.items() if not c["ok"]]
        doc: dict[str, Any] = {"status": "failing" if failing else "ok", "checks": checks}
        if failing:
            doc["failing"] = failing
            log.warning(
                "health: failing %s", ", ".join(f"{n} ({checks[n]['detail']})" for n in failing)
            )
        return web.json_response(doc, status=503 if failing else 200)

    @staticmethod
    async def _check(check: HealthCheck) -> dict[str, Any]:
        try:
            detail = await asyncio.wait_for(check(), HEALTH_TIMEOUT)
        except TimeoutError:
            return {"ok": False, "detail": f"no answer within {HEALTH_TIMEOUT:g} s"}
        except Exception as e:  # any failure of a part is that part's health, not ours
            return {"ok": False, "detail": str(e) or type(e).__name__}
        return {"ok": True, "detail": detail}

    def _refusal(self, request: web.Request) -> web.Response | None:
        if not is_loopback(request.remote):
            log.warning("%s from a non-loopback peer %s refused", request.path, request.remote)
            what = "purge" if request.path == PURGE_PATH else "search"
            return web.json_response({"error": f"only loopback peers may {what}"}, status=403)
        if not is_loopback(request.url.host):
            return web.json_response({"error": "the Host must be a loopback name"}, status=403)
        header = request.headers.get("Authorization", "")
        given = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        if not given:
            return web.json_response(
                {"error": f"send Authorization: Bearer <the token in {self.token_file}>"},
                status=401,
            )
        if not self._token or not hmac.compare_digest(
            given.encode("utf-8", "surrogateescape"), self._token
        ):
            log.warning("%s with a wrong token refused", request.path)
            return web.json_response({"error": f"not the token in {self.token_file}"}, status=403)
        if request.content_type != "application/json":
            return web.json_response({"error": "send Content-Type: application/json"}, status=415)
        return None

    async def _search_handler(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        started = time.monotonic()
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _query_error(QueryError("body", "is not JSON"))
        try:
            query = await SearchRequest.parse(body).query(self._resolve_room)
            result = await self._search(query)
        except QueryError as e:
            return _query_error(e)
        except MuninnError as e:
            log.warning("search over %s failed: %s", SEARCH_PATH, e)
            return web.json_response({"error": str(e)}, status=503)
        elapsed = time.monotonic() - started
        self.metrics.search_latency.labels(source="api").observe(elapsed)
        log.debug("%s answered %d hits in %.0f ms", SEARCH_PATH, len(result.hits), elapsed * 1e3)
        return web.json_response(result.as_json())

    async def _purge_handler(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        assert self._purge is not None  # the route exists only with a purge
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _query_error(QueryError("body", "is not JSON"))
        try:
            stone = await self._purge(PurgeRequest.parse(body))
        except QueryError as e:
            return _query_error(e)
        except MuninnError as e:
            log.warning("purge over %s failed: %s", PURGE_PATH, e)
            return web.json_response({"error": str(e)}, status=503)
        return web.json_response(purge_document(stone))


# ---------------------------------------------------------------- the client (`muninn search`)


def service_url(cfg: MetricsConfig) -> str:
    """Where a local client reaches the listener (a wildcard bind is reached on loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(cfg.host, cfg.host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{cfg.port}"


async def post_search(url: str, token: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST a search to a running service; a 400 raises the `QueryError` it names."""
    return await _post(url, token, SEARCH_PATH, "search", body)


async def post_purge(url: str, token: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST a purge to a running service; a 400 raises the `QueryError` it names."""
    return await _post(url, token, PURGE_PATH, "purge", body)


async def _post(
    url: str, token: str, path: str, what: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url + path, json=dict(body), headers=headers) as resp,
        ):
            status = resp.status
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        raise StoreUnavailable(
            f"the service's {what} endpoint at {url} did not answer: {e}"
        ) from e
    try:
        doc: Any = json.loads(text)
    except ValueError:
        doc = text.strip()  # e.g. aiohttp's plain 404 from a service without this endpoint
    if status == 400 and isinstance(doc, dict) and "field" in doc:
        raise QueryError(str(doc["field"]), str(doc.get("message", "")))
    if status != 200 or not isinstance(doc, dict):
        error = doc.get("error") if isinstance(doc, dict) else doc
        raise StoreError(f"the service at {url} answered {status}: {error}")
    return doc


def result_from_json(doc: Mapping[str, Any]) -> SearchResult:
    """A `SearchResult` from its §7 document (the inverse of `as_json`, bar point ids)."""
    hits = [
        Hit(
            point_id="",
            room_id=h["room_id"],
            room_alias=h["room_alias"],
            thread_root=h["thread_root"],
            first_event_id=h["first_event_id"],
            last_event_id=h["last_event_id"],
            event_ids=tuple(h["event_ids"]),
            messages=tuple(h["messages"]),
            score=float(h["score"]),
            permalink=h["permalink"],
            best_event_id=h["best_event_id"],
        )
        for h in doc["hits"]
    ]
    return SearchResult(
        hits=hits,
        warnings=list(doc["warnings"]),
        retrievers=list(doc["retrievers"]),
        dropped_stale=int(doc["dropped_stale"]),
        below_floor=int(doc.get("below_floor", 0)),
    )
