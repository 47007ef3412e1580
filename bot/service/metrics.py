"""Metrics of `muninn run`, on `prometheus_client` (the Matrix ecosystem's convention).

`ServiceMetrics` declares the service's metrics once, in a registry of its own (never the
process-global one, so two services in one process, as in the tests, do not collide). The room
verdicts and refresh lags are derived when scraped, by a custom collector: they are a view of the
last passes, not counts. Room ids are per-room detail (which rooms exist, when each is active):
the per-room lag lives in a second registry, rendered only for a caller holding the listener
token (`render(detail=True)`); anyone else sees the aggregate `muninn_refresh_lag_max_seconds`.

`CountingStore` and `CountingEmbedder` wrap the adapters so that every
store or embedder error is counted whoever the caller was (the bot's search swallows a
`StoreError` to answer from the transcript; it still counts). prometheus_client's metrics are
thread-safe, so store calls made in the store facade's worker threads may count too.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.chat.command_room import CommandRoomRefusal
from bot.chat.metrics import LATENCY_BUCKETS, ChatMetrics
from ingest.embed import DelegatingEmbedder, Embedder, WindowVectors
from ingest.errors import EmbedError, StoreError
from ingest.index.reports import RefreshReport
from ingest.store import Store
from ingest.types import EmbedderIdentity, Refusal

__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "CountingEmbedder",
    "ServiceMetrics",
    "counting_store",
]

# The classic text format: every Prometheus server and agent reads it.
CONTENT_TYPE = prometheus_client.exposition.CONTENT_TYPE_PLAIN_0_0_4
# `_created` series double every counter's output and no dashboard of ours reads them.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# `muninn_rooms` labels: every verdict, shown at 0 too (the command room's refusals as well, as
# when the scope rules held them: the series a dashboard reads stay the same).
VERDICTS = ("eligible", *map(str, Refusal), *map(str, CommandRoomRefusal))


class ServiceMetrics:
    """Every metric `muninn run` exports, declared once, in a registry of its own."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        r = self.registry = CollectorRegistry()
        self.events_read = Counter(
            "muninn_events_read_total", "Events read by the writer.", registry=r
        )
        self.events_indexed = Counter(
            "muninn_events_indexed_total", "Messages indexed by the writer.", registry=r
        )
        self.events_skipped = Counter(
            "muninn_events_skipped_total",
            "Events of eligible rooms not indexed.",
            ["reason"],
            registry=r,
        )
        self.windows_written = Counter(
            "muninn_windows_written_total", "Windows upserted.", registry=r
        )
        self.windows_deleted = Counter(
            "muninn_windows_deleted_total", "Windows deleted.", registry=r
        )
        self.refresh_passes = Counter(
            "muninn_refresh_passes_total", "Completed writer passes.", ["kind"], registry=r
        )
        self.refresh_failures = Counter(
            "muninn_refresh_failures_total", "Failed writer passes.", ["kind"], registry=r
        )
        # chat's own metrics (commands, a search's time, replies given up), exported here
        self.chat = ChatMetrics(r)
        self.search_latency = self.chat.search_latency
        self.commands = self.chat.commands
        self.replies_given_up = self.chat.replies_given_up
        self.embedder_errors = Counter(
            "muninn_embedder_errors_total", "Embedder calls that failed.", ["op"], registry=r
        )
        self.store_errors = Counter(
            "muninn_store_errors_total", "Store calls that failed.", ["op"], registry=r
        )
        self._verdicts: dict[str, str] = {}
        self._last_ok: dict[str, float] = {}
        for kind in ("full", "rooms"):  # exported at 0 from the start, so rate() works
            self.refresh_passes.labels(kind=kind)
            self.refresh_failures.labels(kind=kind)
        # the collectors read through callables (a copy: a scrape may run on its own thread)
        r.register(_PassView(lambda: dict(self._verdicts).values(), self.lags))
        self.detail_registry = CollectorRegistry()
        self.detail_registry.register(_RoomLagView(self.lags))

    def render(self, *, detail: bool = False) -> bytes:
        """The exposition, in the classic text format (`CONTENT_TYPE`); with `detail`, also the
        per-room series (room ids: only for the listener token's holder)."""
        text = generate_latest(self.registry)
        return text + generate_latest(self.detail_registry) if detail else text

    def lags(self) -> dict[str, float]:
        """Seconds since each eligible room's last successful refresh."""
        now = self._clock()
        return {room: max(0.0, now - when) for room, when in sorted(dict(self._last_ok).items())}

    def record_refresh(self, report: RefreshReport, *, full: bool) -> None:
        """Count what one successful writer pass did."""
        now = self._clock()
        if full:
            self._verdicts.clear()
        for room in report.rooms:
            self.events_read.inc(room.events_read)
            self.events_indexed.inc(room.indexed)
            for reason, n in room.skipped.items():
                self.events_skipped.labels(reason=str(reason)).inc(n)
            self.windows_written.inc(room.windows_written)
            self.windows_deleted.inc(room.windows_deleted)
            self._verdicts[room.room_id] = room.verdict
            if room.error is not None:
                pass  # failed this pass: its lag keeps growing from its last success
            elif room.verdict == "eligible":
                self._last_ok[room.room_id] = now
            else:
                self._last_ok.pop(room.room_id, None)
        if full:
            for room_id in set(self._last_ok) - set(self._verdicts):
                del self._last_ok[room_id]
        self.refresh_passes.labels(kind="full" if full else "rooms").inc()


class _PassView(Collector):
    """Gauges derived at scrape time from the last passes, without room ids: rooms by verdict
    (every verdict, 0 included) and the largest refresh lag of an eligible room."""

    def __init__(
        self, verdicts: Callable[[], Iterable[str]], lags: Callable[[], dict[str, float]]
    ) -> None:
        self._verdicts, self._lags = verdicts, lags

    def collect(self) -> Iterator[GaugeMetricFamily]:
        rooms = GaugeMetricFamily(
            "muninn_rooms", "Rooms by scope verdict at their last refresh.", labels=["verdict"]
        )
        tally = Tally(self._verdicts())
        for verdict in sorted(set(VERDICTS) | set(tally)):
            rooms.add_metric([verdict], tally.get(verdict, 0))
        yield rooms
        yield GaugeMetricFamily(
            "muninn_refresh_lag_max_seconds",
            "Seconds since the least recently refreshed eligible room's last success.",
            value=max(self._lags().values(), default=0.0),
        )


class _RoomLagView(Collector):
    """Each eligible room's refresh lag (one series per joined room: bounded by the rooms the
    reader has joined, and a room that leaves the corpus leaves the output)."""

    def __init__(self, lags: Callable[[], dict[str, float]]) -> None:
        self._lags = lags

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "muninn_refresh_lag_seconds",
            "Seconds since the room's last successful refresh.",
            labels=["room"],
        )
        for room_id, seconds in self._lags().items():
            lag.add_metric([room_id], seconds)
        yield lag


# ---------------------------------------------------------------- adapters that count errors


@contextlib.contextmanager
def _counted(errors: Counter, op: str, kind: type[Exception]) -> Iterator[None]:
    """A `kind` raised inside is counted in `errors` under `op`, then raised on."""
    try:
        yield
    except kind:
        errors.labels(op=op).inc()
        raise


class _CountingProxy:
    """Passes every call through; a `StoreError` raised is counted under the method's name."""

    def __init__(self, inner: Any, errors: Counter) -> None:
        self._inner = inner
        self._errors = errors

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with _counted(self._errors, name, StoreError):
                result = attr(*args, **kwargs)
            if name == "open":  # a Collection: its calls count too
                return _CountingProxy(result, self._errors)
            return result

        return call


def counting_store(store: Store, errors: Counter) -> Store:
    """`store`, with every `StoreError` of it and its collections counted in `errors`."""
    return cast(Store, _CountingProxy(store, errors))


class CountingEmbedder(DelegatingEmbedder):
    """An `Embedder` whose `EmbedError`s are counted (by operation) and re-raised."""

    def __init__(self, inner: Embedder, errors: Counter) -> None:
        super().__init__(inner)
        self._errors = errors

    async def probe(self) -> EmbedderIdentity:
        with _counted(self._errors, "probe", EmbedError):
            return await self.inner.probe()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with _counted(self._errors, "documents", EmbedError):
            return await self.inner.embed_documents(texts)

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        with _counted(self._errors, "documents", EmbedError):
            return await self.inner.embed_windows(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        with _counted(self._errors, "queries", EmbedError):
            return await self.inner.embed_queries(texts)
