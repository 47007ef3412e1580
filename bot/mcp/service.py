"""`muninn mcp` beside a running `muninn run`: its listener, with the read token only (issue 46).

While `muninn run` holds the embedded store, `muninn search` and `muninn status` ask its loopback
listener with `LISTENER_TOKEN`, which may also purge. `muninn mcp` never reads that file: the
configuration its read paths are given has no listener (`without_listener`), so
`bot.operations` meets the held store as an error (`held`) instead of reaching for that token,
and this module asks the listener itself with `LISTENER_READ_TOKEN`, which may search and read
the status only (`bot.service.http_api`). `refuse_the_write_token` makes the process unable to
open the other file at all (an audit hook: nothing it imports can take it up either).

`store_or_service` is each call's choice: the store, else the service that holds it; a service
starting (the store taken, the listener not up yet) or stopping is waited for, not failed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from bot.config import MetricsConfig, ServiceConfig
from bot.operations.common import HELD
from bot.service.http_api import (
    post_search,
    post_status,
    read_token,
    read_token_path,
    result_from_json,
    service_url,
    token_path,
)
from bot.service.http_api.wire import filter_fields
from ingest.errors import StoreUnavailable
from ingest.index.facts import StoreFacts
from ingest.search.filters import MessageFilter
from ingest.search.hits import SearchResult

__all__ = [
    "HANDOVER",
    "held",
    "refuse_the_write_token",
    "search",
    "status",
    "store_or_service",
    "without_listener",
]

HANDOVER = 10.0  # seconds a call waits while neither the store nor the service answers
T = TypeVar("T")


def without_listener(cfg: ServiceConfig) -> ServiceConfig:
    """`cfg` as the read paths see it here: no listener port, so none of them asks the
    running service with the write token; `held` says when one would have."""
    return cfg.model_copy(update={"metrics": MetricsConfig(host=cfg.metrics.host, port=None)})


def held(error: StoreUnavailable) -> bool:
    """The embedded store is held by another process (a running `muninn run`)."""
    return HELD in str(error)


async def store_or_service(
    cfg: ServiceConfig,
    store: Callable[[], Awaitable[T]],
    service: Callable[[], Awaitable[T]],
    handover: float = HANDOVER,
) -> T:
    """`store()`; while another process holds the store, `service()` (the running service's
    listener, `cfg`'s). While neither answers, a service is starting (it has taken the store,
    its listener is not up yet) or stopping: both are tried again for up to `handover` s."""
    deadline = time.monotonic() + handover
    while True:
        try:
            return await store()
        except StoreUnavailable as e:
            if not held(e):
                raise
        try:
            return await service()
        except StoreUnavailable:
            if cfg.metrics.port is None or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(0.05)


async def search(
    cfg: ServiceConfig,
    texts: Sequence[str],
    room_ids: Sequence[str] | None,
    *,
    senders: Sequence[str] | None,
    after: int | None,
    before: int | None,
    limit: int,
    flt: MessageFilter,
    sort: str,
    offset: int,
    match: str = "meaning",
) -> SearchResult:
    """The running service's search (`POST /_muninn/search`), as `muninn search --json`'s."""
    body: dict[str, Any] = {
        "texts": list(texts),
        "room_ids": list(room_ids) if room_ids else None,
        "senders": list(senders) if senders else None,
        "after": after,
        "before": before,
        "limit": limit,
        **filter_fields(flt, sort, offset),
        "close_only": False,
        "match": match,
    }
    return result_from_json(await post_search(service_url(cfg.metrics), _token(cfg), body))


async def status(cfg: ServiceConfig) -> StoreFacts:
    """The store's facts from the running service (`POST /_muninn/status`)."""
    return StoreFacts.from_json(await post_status(service_url(cfg.metrics), _token(cfg)))


def _token(cfg: ServiceConfig) -> str:
    path = read_token_path(cfg)
    if cfg.metrics.port is None or path is None:
        raise StoreUnavailable(
            f"`muninn run` holds the store ({HELD}) and serves no listener: give it a loopback "
            "port (metrics: {port: 9108} in the config, deploy/README.md §1) and restart it; "
            "the tools then ask it"
        )
    return read_token(path)


def refuse_the_write_token(cfg: ServiceConfig) -> None:
    """From now on this process cannot open the listener's write token (`LISTENER_TOKEN`):
    opening it raises PermissionError, whatever code asks."""
    path = token_path(cfg)
    if path is None:
        return
    forbidden = os.path.abspath(path)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not args or not isinstance(args[0], str | bytes | os.PathLike):
            return
        if os.path.abspath(os.fsdecode(args[0])) == forbidden:
            raise PermissionError(f"muninn mcp may not read {forbidden}: it holds the read token")

    sys.addaudithook(hook)
