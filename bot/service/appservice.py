"""The appservice edge: where Synapse pushes transactions (application service API v1).

Thin on purpose: authenticate, de-duplicate, hand the events to the service's queue, answer.
A transaction is acknowledged (200 `{}`) only once its events are *accepted* into the queue;
if the queue is full the answer is 503, the id is not remembered, and Synapse retries later.
The work itself happens after the answer. Pushed events are a wake-up, never the record: the
writer's cursor walk over `/messages` is what makes the index lossless.

De-duplication keys on the transaction id *and* a digest of its event ids, in a bounded LRU:
Synapse with SQLite restarts its transaction ids at 1 after a restart, so the id alone would
drop genuinely new transactions as "already seen".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Sequence

from aiohttp import web

from bot.chat.commands.incoming import BoundedSeen
from bot.service.limits import serve_capped
from ingest.matrix import ClientEvent, events_in

__all__ = ["AppserviceServer", "EventSink"]

log = logging.getLogger("muninn.service")

# Accept a batch of pushed events; False when there is no room for them now.
EventSink = Callable[[Sequence[ClientEvent]], bool]

SEEN_TRANSACTIONS = 4096


def _error(status: int, errcode: str, message: str) -> web.Response:
    return web.json_response({"errcode": errcode, "error": message}, status=status)


def transaction_key(txn_id: str, events: Sequence[ClientEvent]) -> str:
    ids = sorted(str(e.get("event_id", "")) for e in events)
    digest = hashlib.sha256("\0".join(ids).encode()).hexdigest()[:24]
    return f"{txn_id}:{digest}"


class AppserviceServer:
    """An aiohttp server for Synapse's pushes. `start()` binds, `stop()` releases."""

    def __init__(
        self,
        hs_token: str,
        sink: EventSink,
        *,
        host: str,
        port: int,
        seen_capacity: int = SEEN_TRANSACTIONS,
        extra_routes: Sequence[web.RouteDef] = (),
    ) -> None:
        self._hs_token = hs_token
        self._sink = sink
        self.host = host
        self.port = port
        self.seen = BoundedSeen(seen_capacity)
        self.pings = 0  # the homeserver's pings answered (the service asks for one at start)
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.add_routes(
            [
                web.put("/_matrix/app/v1/transactions/{txn_id}", self._transaction),
                web.put("/transactions/{txn_id}", self._transaction),  # legacy, unprefixed
                web.post("/_matrix/app/v1/ping", self._ping),
                web.get("/_matrix/app/v1/users/{user_id}", self._query),
                web.get("/_matrix/app/v1/rooms/{alias}", self._query),
                *extra_routes,
            ]
        )
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        await serve_capped(self._runner, self.host, self.port)  # bounded fds, slow heads
        log.info("appservice listening on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------ handlers

    def _refusal(self, request: web.Request) -> web.Response | None:
        """None for the right hs_token; else the spec's answer: no token 401 `M_UNAUTHORIZED`,
        a wrong one 403 `M_FORBIDDEN` (application service API, transactions responses)."""
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
        if token is None:
            token = request.query.get("access_token")  # the pre-v1.4 way, still sent by some
        if not token:
            return _error(401, "M_UNAUTHORIZED", "missing hs_token")
        if not hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"), self._hs_token.encode()
        ):
            return _error(403, "M_FORBIDDEN", "bad hs_token")
        return None

    async def _transaction(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "M_NOT_JSON", "the transaction is not JSON")
        raw = body.get("events", []) if isinstance(body, dict) else None
        if not isinstance(raw, list):
            return _error(400, "M_BAD_JSON", "events must be a list")
        events = events_in(raw)
        key = transaction_key(request.match_info["txn_id"], events)
        if key in self.seen:
            log.debug("transaction %s already accepted", key)
            return web.json_response({})
        if events and not self._sink(events):
            log.warning("work queue full: transaction %s refused for a later retry", key)
            return _error(503, "M_LIMIT_EXCEEDED", "busy; retry later")
        self.seen.add(key)
        return web.json_response({})

    async def _ping(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        self.pings += 1
        return web.json_response({})

    async def _query(self, request: web.Request) -> web.Response:
        # Muninn creates no users or rooms on demand.
        refused = self._refusal(request)
        if refused is not None:
            return refused
        return _error(404, "M_NOT_FOUND", "no such user or room here")
