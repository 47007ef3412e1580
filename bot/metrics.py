"""Metrics of `muninn run`: a small registry written in the Prometheus text format (0.0.4).

No client library: counters, gauges and histograms with labels, rendered by `Registry.render()`
with the escaping the format asks for (label values: `\\`, `"`, newline; HELP: `\\`, newline).
`ServiceMetrics` declares the service's metrics once; `CountingStore` and `CountingEmbedder`
wrap the adapters so that every store or embedder error is counted whoever the caller was
(the bot's search swallows a `StoreError` to answer from the transcript; it still counts).

Updates may come from worker threads (store calls run in `asyncio.to_thread`), so each family
takes a lock.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from ingest.embed import Embedder
from ingest.errors import EmbedError, StoreError
from ingest.refresh import RefreshReport
from ingest.store import Store
from ingest.types import EmbedderIdentity, Refusal

__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "Counter",
    "CountingEmbedder",
    "Gauge",
    "Histogram",
    "Registry",
    "ServiceMetrics",
    "counting_store",
    "escape_help",
    "escape_label_value",
    "format_value",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds; a search on the embedded defaults takes ~5-50 ms, a slow Ollama several seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

LabelValues = tuple[str, ...]


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Family:
    kind = "untyped"

    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        if not _METRIC_NAME.match(name):
            raise ValueError(f"not a metric name: {name!r}")
        for label in labels:
            if not _LABEL_NAME.match(label) or label.startswith("__"):
                raise ValueError(f"{name}: not a label name: {label!r}")
        if len(set(labels)) != len(labels):
            raise ValueError(f"{name}: duplicate label names")
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labels)
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, str]) -> LabelValues:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: labels {sorted(labels)} != {list(self.labelnames)}")
        return tuple(str(labels[n]) for n in self.labelnames)

    def samples(self) -> Iterator[str]:
        raise NotImplementedError

    def render(self) -> str:
        head = f"# HELP {self.name} {escape_help(self.help)}\n# TYPE {self.name} {self.kind}\n"
        return head + "".join(f"{line}\n" for line in self.samples())


class _Scalar(_Family):
    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        super().__init__(name, help_text, labels)
        self._values: dict[LabelValues, float] = {}
        if not self.labelnames:
            self._values[()] = 0.0

    def value(self, **labels: str) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def samples(self) -> Iterator[str]:
        with self._lock:
            items = sorted(self._values.items())
        for key, value in items:
            yield f"{self.name}{_labels(self.labelnames, key)} {format_value(value)}"


class Counter(_Scalar):
    """A monotonic count; `inc()` only goes up."""

    kind = "counter"

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot go down ({amount})")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount


class Gauge(_Scalar):
    """A value that goes up and down; `clear()` forgets every labelled series."""

    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            if not self.labelnames:
                self._values[()] = 0.0


class Histogram(_Family):
    """Observations in cumulative buckets (`le`), with `_sum` and `_count`."""

    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, labels: Sequence[str], buckets: Sequence[float]
    ) -> None:
        if "le" in labels:
            raise ValueError(f"{name}: 'le' is reserved for histogram buckets")
        super().__init__(name, help_text, labels)
        bounds = sorted(float(b) for b in buckets if not math.isinf(b))
        if not bounds or len(set(bounds)) != len(bounds):
            raise ValueError(f"{name}: buckets must be distinct and non-empty")
        self.buckets = (*bounds, math.inf)
        self._series: dict[LabelValues, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            counts, total = self._series.setdefault(key, ([0] * len(self.buckets), [0.0]))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    counts[i] += 1
                    break
            total[0] += value

    def count(self, **labels: str) -> int:
        with self._lock:
            series = self._series.get(self._key(labels))
            return sum(series[0]) if series else 0

    def samples(self) -> Iterator[str]:
        with self._lock:
            items = sorted((k, (list(c), t[0])) for k, (c, t) in self._series.items())
        for key, (counts, total) in items:
            running = 0
            for bound, n in zip(self.buckets, counts, strict=True):
                running += n
                le = f'le="{format_value(bound)}"'
                yield f"{self.name}_bucket{_labels(self.labelnames, key, le)} {running}"
            yield f"{self.name}_sum{_labels(self.labelnames, key)} {format_value(total)}"
            yield f"{self.name}_count{_labels(self.labelnames, key)} {running}"


class Registry:
    """Metric families by name, rendered in registration order; `before_render` hooks first."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}
        self._hooks: list[Callable[[], None]] = []

    def _add(self, family: _Family) -> Any:
        if family.name in self._families:
            raise ValueError(f"metric {family.name} is already registered")
        self._families[family.name] = family
        return family

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return cast(Counter, self._add(Counter(name, help_text, labels)))

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        return cast(Gauge, self._add(Gauge(name, help_text, labels)))

    def histogram(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        return cast(Histogram, self._add(Histogram(name, help_text, labels, buckets)))

    def before_render(self, hook: Callable[[], None]) -> None:
        self._hooks.append(hook)

    def render(self) -> str:
        for hook in self._hooks:
            hook()
        return "".join(f.render() for f in self._families.values())


VERDICTS = ("eligible", *(str(r) for r in Refusal))


class ServiceMetrics:
    """Every metric `muninn run` exports, declared once."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        r = self.registry = Registry()
        self.events_read = r.counter("muninn_events_read_total", "Events read by the writer.")
        self.events_indexed = r.counter(
            "muninn_events_indexed_total", "Messages indexed by the writer."
        )
        self.events_skipped = r.counter(
            "muninn_events_skipped_total", "Events of eligible rooms not indexed.", ["reason"]
        )
        self.windows_written = r.counter("muninn_windows_written_total", "Windows upserted.")
        self.windows_deleted = r.counter("muninn_windows_deleted_total", "Windows deleted.")
        self.rooms = r.gauge(
            "muninn_rooms", "Rooms by scope verdict at their last refresh.", ["verdict"]
        )
        self.refresh_lag = r.gauge(
            "muninn_refresh_lag_seconds",
            "Seconds since the room's last successful refresh.",
            ["room"],
        )
        self.refresh_passes = r.counter(
            "muninn_refresh_passes_total", "Completed writer passes.", ["kind"]
        )
        self.refresh_failures = r.counter(
            "muninn_refresh_failures_total", "Failed writer passes.", ["kind"]
        )
        self.search_latency = r.histogram(
            "muninn_search_latency_seconds", "Time to answer a search.", ["source"]
        )
        self.embedder_errors = r.counter(
            "muninn_embedder_errors_total", "Embedder calls that failed.", ["op"]
        )
        self.store_errors = r.counter(
            "muninn_store_errors_total", "Store calls that failed.", ["op"]
        )
        self.commands = r.counter(
            "muninn_commands_total",
            "Commands handled, by name and outcome.",
            ["command", "outcome"],
        )
        self._verdicts: dict[str, str] = {}
        self._last_ok: dict[str, float] = {}
        for kind in ("full", "rooms"):
            self.refresh_passes.inc(0, kind=kind)
            self.refresh_failures.inc(0, kind=kind)
        r.before_render(self._derive)

    def record_refresh(self, report: RefreshReport, *, full: bool) -> None:
        """Count what one successful writer pass did."""
        now = self._clock()
        if full:
            self._verdicts.clear()
        for room in report.rooms:
            self.events_read.inc(room.events_read)
            self.events_indexed.inc(room.indexed)
            for reason, n in room.skipped.items():
                self.events_skipped.inc(n, reason=str(reason))
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
        self.refresh_passes.inc(kind="full" if full else "rooms")

    def _derive(self) -> None:
        tally = Tally(self._verdicts.values())
        for verdict in sorted(set(VERDICTS) | set(tally)):
            self.rooms.set(tally.get(verdict, 0), verdict=verdict)
        now = self._clock()
        self.refresh_lag.clear()
        for room_id, when in self._last_ok.items():
            self.refresh_lag.set(max(0.0, now - when), room=room_id)


# ---------------------------------------------------------------- adapters that count errors


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
            try:
                result = attr(*args, **kwargs)
            except StoreError:
                self._errors.inc(op=name)
                raise
            if name == "open":  # a Collection: its calls count too
                return _CountingProxy(result, self._errors)
            return result

        return call


def counting_store(store: Store, errors: Counter) -> Store:
    """`store`, with every `StoreError` of it and its collections counted in `errors`."""
    return cast(Store, _CountingProxy(store, errors))


class CountingEmbedder:
    """An `Embedder` whose `EmbedError`s are counted (by operation) and re-raised."""

    def __init__(self, inner: Embedder, errors: Counter) -> None:
        self.inner = inner
        self._errors = errors

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    async def probe(self) -> EmbedderIdentity:
        try:
            return await self.inner.probe()
        except EmbedError:
            self._errors.inc(op="probe")
            raise

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            return await self.inner.embed_documents(texts)
        except EmbedError:
            self._errors.inc(op="documents")
            raise

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            return await self.inner.embed_queries(texts)
        except EmbedError:
            self._errors.inc(op="queries")
            raise

    async def close(self) -> None:
        await self.inner.close()
