"""What every CLI command shares: its adapters, room arguments and JSON output (progress:
`bot.operations.progress`).

Adapters are built here (the imperative shell); policy lives in `ingest.index.refresh` (the one
writer) and `ingest.search` (the one read path).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from bot.chat.commands.arguments import ArgumentError, user
from bot.config import ServiceConfig
from ingest.embed import Embedder, make_embedder
from ingest.errors import QueryError, StoreUnavailable
from ingest.matrix import MatrixReader, Retry
from ingest.store import Store, open_async
from ingest.types import RoomID

__all__ = [
    "CLI_RETRY",
    "HELD",
    "adapters",
    "cli_reader",
    "cli_users",
    "print_json",
    "resolve_room",
    "service_token",
]

# A command at the shell gives up on a homeserver it cannot reach after two tries (each bounded
# by `ingest.matrix.http.CONNECT_TIMEOUT`, TLS handshake included), naming the likely cause; a
# homeserver that answers with 5xx or 429 is retried as the service retries it.
CLI_RETRY = Retry(connect_attempts=2)

# How the embedded store says another process (a running `muninn run`) holds it.
HELD = "held by another process"


def print_json(doc: Any) -> None:
    """The one JSON output of the CLI (`--json`): one document on stdout."""
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


@asynccontextmanager
async def adapters(
    cfg: ServiceConfig, *, embed: bool = True, embedder: Embedder | None = None
) -> AsyncIterator[tuple[MatrixReader, Store, Embedder | None]]:
    """A command's reader, store and embedder, closed at its end; an `embedder` given is the
    caller's to keep (a long-lived `muninn mcp` loads its model once)."""
    reader = cli_reader(cfg)
    store = await open_async(cfg.index, cfg.base_dir)
    own = make_embedder(cfg.embedder) if embed and embedder is None else None
    try:
        yield reader, store.sync, embedder or own
    finally:
        if own is not None:
            await own.close()
        await store.close()
        await reader.close()


def cli_reader(cfg: ServiceConfig) -> MatrixReader:
    """The reader a CLI command talks to the homeserver with (`CLI_RETRY`)."""
    return MatrixReader.from_config(cfg, retry=CLI_RETRY)


def cli_users(values: Sequence[str] | None, server_name: str, flag: str) -> list[str] | None:
    """User ids as chat's `from:` takes them: `@bob:server`, or `@bob` / `bob` on this
    homeserver (`bot.chat.commands.arguments.user`); a malformed one is an error naming the
    flag."""
    if values is None:
        return None
    try:
        return [user(v, server_name, key=flag) for v in values]
    except ArgumentError as e:
        raise QueryError(flag, e.problem.removeprefix(f"{flag}: ")) from None


async def resolve_room(reader: MatrixReader, room: str) -> RoomID:
    """A room id as given, or an alias resolved by the homeserver (an error names it)."""
    if room.startswith("!"):
        return RoomID(room)
    if room.startswith("#"):
        found = await reader.resolve_alias(room)
        if found is None:
            raise QueryError("room", f"no room has the alias {reader.full_alias(room)}")
        return found
    raise QueryError("room", f"{room!r} is neither a room id (!…) nor an alias (#…)")


def service_token(cfg: ServiceConfig, held: StoreUnavailable, verb: str) -> str:
    """The running service's listener token, for `muninn search`/`purge`/`status` while it
    holds the embedded store; the error names how to reach it when it has no listener."""
    from bot.service.http_api import read_token, token_path

    if cfg.metrics.port is None:
        raise StoreUnavailable(
            f"{held}. For `muninn {verb}` while `muninn run` holds the store, give the service a "
            "loopback port (metrics: {port: 9108} in the config, as deploy/README.md §1 says) "
            f"and restart it: `muninn {verb}` then asks it"
        ) from None
    path = token_path(cfg)
    assert path is not None  # only the embedded store is ever held
    return read_token(path)
