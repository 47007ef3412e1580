"""The service's loopback listener: `/metrics`, `/healthz`, `POST /_muninn/search` and `/purge`.

Served by `muninn run` on `metrics.host:metrics.port` (loopback by default; off without a port).

- `GET /metrics`: the Prometheus text format (`bot.service.metrics`).
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
- `POST /_muninn/status`: JSON `{}` → `ingest.index.facts.StoreFacts.as_json()`, the store's half
of
  `muninn status` (generation, points, each room's cursor, refusal, failing passes, import),
  read by the service, and `service`: what only the running service knows (`command_room`:
  `{room, room_id, error}`, its alias unresolved while `room_id` is null); `muninn status` asks
  it (`post_status`) while the service holds the store, with the same token and guards.

Who may read what: `/metrics` and `/healthz` are open but aggregate (no room id, no homeserver
or reader name, no generation); a request carrying the token below also gets the per-room
`muninn_refresh_lag_seconds{room}` and each health check's detail. The search and purge
endpoints answer every room with no asker's visibility and write permanent tombstones, so they
also require `Authorization: Bearer <token>`, the token the service writes at start into
`<store path>/LISTENER_TOKEN` (mode 0600, in the 0700 store directory): only the service's own
user (and root) can read it, whatever local user or process reaches the port. Beside it,
`LISTENER_READ_TOKEN` may search and ask the status (and read the detail), never purge: a
purge with it is 403. `muninn mcp` reads only that one (issue 46). A missing token
is 401, a wrong one 403 (compared in constant time). With a Qdrant server store there is no
store path and no reason for the endpoints (`muninn search`/`purge` open the server store
themselves): they are not served.

A bind address that is not loopback is allowed (a Prometheus scraping from another host) but
warned about; the search and purge endpoints still answer loopback peers only.

The package by job: `server` (the listener and its guards), `wire` (the request and answer
documents, decoded and encoded the same on both sides), `token` (the listener token file),
`client` (how `muninn search` and `muninn purge` reach it).
"""

from bot.service.http_api.client import post_purge, post_search, post_status, service_url
from bot.service.http_api.server import HealthCheck, HttpApi, is_loopback, store_check
from bot.service.http_api.token import (
    READ_TOKEN_FILE,
    TOKEN_FILE,
    read_token,
    read_token_path,
    token_path,
    write_token,
)
from bot.service.http_api.wire import (
    MAX_IDS,
    MAX_TS,
    PURGE_PATH,
    SEARCH_PATH,
    STATUS_PATH,
    PurgeRequest,
    SearchRequest,
    purge_document,
    result_from_json,
)

__all__ = [
    "MAX_IDS",
    "MAX_TS",
    "PURGE_PATH",
    "READ_TOKEN_FILE",
    "SEARCH_PATH",
    "STATUS_PATH",
    "TOKEN_FILE",
    "HealthCheck",
    "HttpApi",
    "PurgeRequest",
    "SearchRequest",
    "is_loopback",
    "post_purge",
    "post_search",
    "post_status",
    "purge_document",
    "read_token",
    "read_token_path",
    "result_from_json",
    "service_url",
    "store_check",
    "token_path",
    "write_token",
]
