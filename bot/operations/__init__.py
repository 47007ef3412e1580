"""The CLI's commands, wired to the adapters: one function a command, printing its result.

Adapters are built in `common` (the imperative shell); policy lives in `ingest.index.refresh` (the
one
writer) and `ingest.search` (the one read path). By job: `writes` (refresh, purge, import),
`search`, `status`, `pins`; what a search reads from the homeserver beside its hits (the CLI's
and MCP's alike): `context`, `replies`, `freshness`, `enrich`.
"""

from bot.operations.common import print_json, resolve_room
from bot.operations.pins import pins
from bot.operations.search import fail_fast, revalidation, search
from bot.operations.status import status
from bot.operations.writes import EXIT_REFUSED, import_export, purge, refresh

__all__ = [
    "EXIT_REFUSED",
    "fail_fast",
    "import_export",
    "pins",
    "print_json",
    "purge",
    "refresh",
    "resolve_room",
    "revalidation",
    "search",
    "status",
]
