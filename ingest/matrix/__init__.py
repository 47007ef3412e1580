"""The one Matrix layer: every request Muninn (and its demo) makes to a homeserver.

- `http` — `endpoint` (a `mautrix.api.Path` as a quoted request path), `MatrixHTTP` (auth,
  Muninn's retry and 429 policy, errors mapped onto `ingest.errors`), `Retry`, `ReaderMode`;
- `ClientEvent`, the typed view of an event every layer above reads; `events_in`, `as_event`
  (JSON to the view), `content_of`, `relation_of`, `bundled_edit` (the one read of each) —
  defined in `ingest.event`, under the pure rules that take them too, and handed on from here;
- `transport` — the seam under it: `Transport` sends one `Request` and returns a `Response`
  (`AiohttpTransport` by default; tests pass their own to count or fault requests);
- `timeline` — `Page` and the `/messages`, event and relation reads;
- `reader` — `MatrixReader`: whoami, joined rooms, `m.direct`, room state, aliases, join/leave;
- `state` — `room_state_from`, the pure state parser;
- `registration` — the appservice registration file;
- `export` — `ExportReader`: a room export answering the reader's calls as if it were the
  homeserver (`muninn import`, and the record an imported room's hits are checked against).

Muninn's appservice listener (`bot.service.appservice`) and its event normalisation
(`ingest.rules.events`)
stay its own rather than mautrix's: the listener acknowledges a transaction only once its events
are queued (503 when full) and de-duplicates on the transaction id plus its events (Synapse on
SQLite restarts ids at 1), and normalisation skips what must never be indexed (rules 5–9 of
docs/ARCHITECTURE.md §3), where mautrix's parse whatever arrives.
"""

from ingest.event import (
    BRIDGE_TYPES,
    ClientEvent,
    EventContent,
    Relation,
    Unsigned,
    as_event,
    bundled_edit,
    content_of,
    events_in,
    relation_of,
)
from ingest.matrix.http import JSONDict, MatrixHTTP, Path, ReaderMode, Retry, endpoint
from ingest.matrix.reader import MatrixReader
from ingest.matrix.registration import (
    USER_LOCALPART,
    Registration,
    load_registration,
    read_registration,
)
from ingest.matrix.state import room_state_from
from ingest.matrix.timeline import Page, TimelineReader
from ingest.matrix.transport import AiohttpTransport, Request, Response, Transport

__all__ = [
    "BRIDGE_TYPES",
    "USER_LOCALPART",
    "AiohttpTransport",
    "ClientEvent",
    "EventContent",
    "JSONDict",
    "MatrixHTTP",
    "MatrixReader",
    "Page",
    "Path",
    "ReaderMode",
    "Registration",
    "Relation",
    "Request",
    "Response",
    "Retry",
    "TimelineReader",
    "Transport",
    "Unsigned",
    "as_event",
    "bundled_edit",
    "content_of",
    "endpoint",
    "events_in",
    "load_registration",
    "read_registration",
    "relation_of",
    "room_state_from",
]
